#include "model/Runner.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "coexec/coexec.h"
#include "coexec/detail/FaultInjection.h"

namespace coexec::stress {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// The error a task body throws: it names its task.
struct StressError : std::runtime_error {
  explicit StressError(std::uint32_t taskId) : std::runtime_error("stress task failed"), id(taskId) {}
  std::uint32_t id;
};

/// The error a failing run of a periodic schedule throws.
struct PeriodicError : std::runtime_error {
  explicit PeriodicError(std::uint32_t taskId) : std::runtime_error("periodic run failed"), id(taskId) {}
  std::uint32_t id;
};

/// What the fault plan's user-code sites throw.
struct FaultError : std::runtime_error {
  FaultError() : std::runtime_error("injected fault") {}
};

/// True on the producers and the checking thread: a body that runs there was
/// run by the caller (callerRuns, a custom policy, a drained PendingTask).
thread_local bool tlsProducer = false;

/// True while this program's own code runs a PendingTask (a custom policy, a
/// task shutdownNow() returned): such a task runs outside any pool, where
/// the docs promise no report of an unread failure (PendingTask::run()).
thread_local bool tlsRunningPending = false;

/// Runs `task` with tlsRunningPending set.
void runPending(PendingTask& task) {
  struct Restore {
    bool previous;
    ~Restore() { tlsRunningPending = previous; }
  } restore{std::exchange(tlsRunningPending, true)};
  task.run();
}

enum class End : std::uint8_t { none, returned, threw, cancelled, other };

enum class Role : std::uint8_t {
  top,       ///< submitted or executed by a producer
  child,     ///< submitted from a running task and awaited by it
  detachedSubmit,   ///< submitted from a running task, its Future dropped
  detachedExecute,  ///< executed from a running task
  member,    ///< a combinator's or TaskGroup's task: its failure may be absorbed by the combinator
  driver,    ///< the coroutine that runs a combinator
  periodic,  ///< a periodic schedule
  keyed,     ///< a KeyedExecutor task
};

struct Record {
  std::atomic<std::uint32_t> starts{0};
  std::atomic<End> end{End::none};
  std::atomic<std::uint32_t> observed{0};  ///< reports of its StressError
  std::atomic<bool> cancelRequested{false};
  std::atomic<bool> cancelReported{false};  ///< its Future reported OperationCancelled
  std::atomic<bool> combinatorReturned{false};
  std::atomic<bool> ranOnProducer{false};
  std::atomic<bool> ranAsPendingTask{false};  ///< run by PendingTask::run() (see tlsRunningPending)
  std::atomic<std::uint32_t> periodicThrows{0};
  std::atomic<std::uint32_t> periodicReports{0};
  Role role = Role::top;
  const char* memberOf = "";  ///< for a member: its combinator
  std::atomic<Body> body{Body::quick};
  std::atomic<bool> coroutine{false};
  std::uint64_t allocationsBefore = 0;  ///< frameAllocationCalls() before its submission (leak hunting)
  std::string outcome;                  ///< what its Future reported (set by the check)
  /// For a child: the token of the task that submitted it (written before
  /// the submission). Cancelling that task cancels this one while both run,
  /// and that task's token with it.
  CancellationToken parentToken;
};

/// Records, by id, that never move: chunks of 1024 allocated on demand.
class Records {
 public:
  Records() : chunks_(kMaxChunks) {}
  std::uint32_t add(Role role) {
    const std::uint32_t id = next_.fetch_add(1, std::memory_order_relaxed);
    const std::uint32_t chunk = id / kChunk;
    if (chunk >= kMaxChunks) throw std::length_error("stress program created too many tasks");
    Record* records = chunks_[chunk].load(std::memory_order_acquire);
    if (records == nullptr) {
      std::lock_guard lock(mutex_);
      records = chunks_[chunk].load(std::memory_order_relaxed);
      if (records == nullptr) {
        owned_.push_back(std::make_unique<Record[]>(kChunk));
        records = owned_.back().get();
        chunks_[chunk].store(records, std::memory_order_release);
      }
    }
    records[id % kChunk].role = role;
    return id;
  }
  Record& operator[](std::uint32_t id) { return chunks_[id / kChunk].load(std::memory_order_acquire)[id % kChunk]; }
  [[nodiscard]] std::uint32_t size() const { return next_.load(std::memory_order_acquire); }

 private:
  static constexpr std::uint32_t kChunk = 1024;
  static constexpr std::uint32_t kMaxChunks = 4096;
  std::vector<std::atomic<Record*>> chunks_;
  std::vector<std::unique_ptr<Record[]>> owned_;
  std::mutex mutex_;
  std::atomic<std::uint32_t> next_{0};
};

int valueOf(std::uint32_t id) { return static_cast<int>(id % 1'000'000) * 2 + 1; }

/// A cheap deterministic mix, for the bodies of children (chosen at run time).
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

std::size_t processThreads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoul(line.substr(8));
  }
  return 0;
}

/// The names of the process's threads (their `comm`), for a message.
std::string processThreadNames() {
  std::string names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    std::getline(comm, name);
    names += names.empty() ? name : ", " + name;
  }
  return names;
}

struct Tracked {
  std::uint32_t id;
  Future<int> future;
};

struct TrackedPeriodic {
  std::uint32_t id;
  bool continueOnError;
  PeriodicHandle handle;
  std::atomic<bool> cancelledByUs{false};
};

/// One program's run: the pool, the records and what was seen.
class Run {
 public:
  Run(const Program& program, const RunOptions& options, RunReport& report)
      : program_(program), options_(options), report_(report) {}

  const Program& program() const { return program_; }
  ThreadPoolExecutor& pool() { return *pool_; }
  Records& records() { return records_; }

  void violation(std::string what) {
    std::lock_guard lock(mutex_);
    if (report_.violations.size() < 20) report_.violations.push_back(std::move(what));
  }

  /// Counts one report of task `id`'s StressError, seen at `where`.
  void observe(std::uint32_t id, const char* where) {
    if (id >= records_.size()) {
      violation(fmt::format("a StressError of unknown task {} reached {}", id, where));
      return;
    }
    Record& r = records_[id];
    if (r.end.load() != End::threw) {
      violation(fmt::format("task {}'s StressError reached {}, but its body did not throw one", id, where));
    }
    if (r.observed.fetch_add(1) >= 1) violation(fmt::format("task {}'s error was reported twice (again at {})", id, where));
  }

  /// Classifies an exception caught where a task's error, a refusal or a
  /// fault may arrive (a producer's call, a parent awaiting a child).
  void classify(const std::exception_ptr& error, const char* where) {
    try {
      std::rethrow_exception(error);
    } catch (const StressError& e) {
      observe(e.id, where);
    } catch (const RejectedExecution&) {
      refusals_.fetch_add(1, std::memory_order_relaxed);
    } catch (const OperationCancelled&) {
    } catch (const BrokenPromise&) {
    } catch (const FaultError&) {
      faultSeen(where);
    } catch (const std::bad_alloc&) {
      badAllocSeen(where);
    } catch (const std::exception& e) {
      violation(fmt::format("unexpected exception at {}: {}", where, e.what()));
    } catch (...) {
      violation(fmt::format("unexpected non-std exception at {}", where));
    }
  }

  void faultSeen(const char* where) {
    const FaultSite site = program_.faults.site;
    if (site == FaultSite::none || site == FaultSite::afterExecute || site == FaultSite::uncaughtHandler ||
        program_.faults.badAlloc) {
      violation(fmt::format("a FaultError reached {} with the plan '{}'", where, toString(site)));
    }
    faultReports_.fetch_add(1);
  }
  void badAllocSeen(const char* where) {
    if (program_.faults.site != FaultSite::frameAllocator && !program_.faults.badAlloc) {
      violation(fmt::format("std::bad_alloc reached {} with no allocation fault planned", where));
    }
    faultReports_.fetch_add(1);
  }

  /// True for a fault plan's n-th call at `site`.
  bool fire(FaultSite site) {
    if (program_.faults.site != site) return false;
    if (siteCalls_.fetch_add(1) + 1 != program_.faults.nth) return false;
    faultsFired_.fetch_add(1);
    return true;
  }
  [[noreturn]] void throwFault() const {
    if (program_.faults.badAlloc) throw std::bad_alloc();
    throw FaultError();
  }

  void track(std::uint32_t id, Future<int> future) {
    std::lock_guard lock(mutex_);
    tracked_.push_back(Tracked{id, std::move(future)});
  }
  void trackPeriodic(std::uint32_t id, bool continueOnError, PeriodicHandle handle) {
    std::lock_guard lock(mutex_);
    periodic_.push_back(std::make_unique<TrackedPeriodic>());
    auto& p = *periodic_.back();
    p.id = id;
    p.continueOnError = continueOnError;
    p.handle = std::move(handle);
  }
  void cancelRecent(std::uint32_t back) {
    std::lock_guard lock(mutex_);
    if (tracked_.empty()) return;
    Tracked& t = tracked_[tracked_.size() - 1 - std::min<std::size_t>(back % 8, tracked_.size() - 1)];
    records_[t.id].cancelRequested = true;
    (void)t.future.cancel();
  }
  void cancelPeriodic(std::uint32_t back) {
    std::lock_guard lock(mutex_);
    if (periodic_.empty()) return;
    TrackedPeriodic& p = *periodic_[periodic_.size() - 1 - std::min<std::size_t>(back % 4, periodic_.size() - 1)];
    p.cancelledByUs = true;
    (void)p.handle.cancel();
  }
  CancellationSource& source(std::uint32_t i) { return sources_[i % sources_.size()]; }
  void markSourceUsed(std::uint32_t i, std::uint32_t id) {
    std::lock_guard lock(mutex_);
    sourceTasks_[i % sources_.size()].push_back(id);
  }
  void cancelSource(std::uint32_t i) {
    std::vector<std::uint32_t> ids;
    {
      std::lock_guard lock(mutex_);
      ids = sourceTasks_[i % sources_.size()];
      sourceCancelled_[i % sources_.size()] = true;
    }
    for (std::uint32_t id : ids) records_[id].cancelRequested = true;
    (void)source(i).requestCancellation();
  }
  bool sourceCancelled(std::uint32_t i) {
    std::lock_guard lock(mutex_);
    return sourceCancelled_[i % sources_.size()];
  }

  void noteShutdownNow(std::size_t returned) {
    shutdownNowCalled_ = true;
    pendingReturned_.fetch_add(returned);
  }
  void noteShutdown() { shutdownCalled_ = true; }
  bool anyShutdownNow() const { return shutdownNowCalled_.load(); }
  bool anyShutdown() const { return shutdownCalled_.load() || shutdownNowCalled_.load(); }

  KeyedExecutor* keyed() { return keyed_.get(); }
  /// Keyed order: the next sequence number of `key` (submitting side) and the
  /// check on the running side.
  std::uint32_t nextKeySeq(std::uint32_t key) { return ++keySubmitted_[key % kKeys]; }
  void keyedStart(std::uint32_t key, std::uint32_t seq) {
    auto& lane = keyLanes_[key % kKeys];
    if (lane.running.exchange(true)) violation(fmt::format("two tasks of key {} overlapped", key));
    const std::uint32_t last = lane.lastSeq.load(std::memory_order_relaxed);
    if (seq <= last) violation(fmt::format("key {}: task {} ran after task {} (out of order)", key, seq, last));
    lane.lastSeq.store(seq, std::memory_order_relaxed);
  }
  void keyedEnd(std::uint32_t key) { keyLanes_[key % kKeys].running.store(false); }

  void execute();

 private:
  static constexpr std::uint32_t kKeys = 64;
  struct KeyLane {
    std::atomic<bool> running{false};
    std::atomic<std::uint32_t> lastSeq{0};
  };

  ThreadPoolOptions options();
  void producer(std::size_t index);
  void runOp(std::size_t thread, const Op& op);
  void probe();
  void stopNow(std::size_t every, const char* where);
  void ending();
  void check();
  void checkFuture(Tracked& t);
  void checkPeriodic(TrackedPeriodic& p);
  void checkRecords();
  bool allStartedEnded();

  const Program& program_;
  const RunOptions& options_;
  RunReport& report_;
  std::mutex mutex_;
  Records records_;
  std::optional<ThreadPoolExecutor> pool_;
  std::unique_ptr<KeyedExecutor> keyed_;
  std::vector<Tracked> tracked_;
  std::vector<std::unique_ptr<TrackedPeriodic>> periodic_;
  std::array<CancellationSource, 4> sources_{};
  std::array<std::vector<std::uint32_t>, 4> sourceTasks_{};
  std::array<bool, 4> sourceCancelled_{};
  std::array<std::uint32_t, kKeys> keySubmitted_{};
  std::array<KeyLane, kKeys> keyLanes_{};
  std::atomic<bool> shutdownNowCalled_{false};
  std::atomic<bool> shutdownCalled_{false};
  std::atomic<std::uint64_t> pendingReturned_{0};
  std::atomic<std::uint64_t> refusals_{0};
  std::atomic<std::uint64_t> faultsFired_{0};
  std::atomic<std::uint64_t> faultReports_{0};
  std::atomic<std::uint64_t> siteCalls_{0};
  std::atomic<std::uint64_t> beforeCalls_{0};
  std::atomic<std::uint64_t> afterCalls_{0};
  std::atomic<std::uint32_t> customCalls_{0};
  std::atomic<bool> uncaughtOther_{false};
  std::atomic<bool> combinatorsUsed_{false};
};

// ---- task bodies --------------------------------------------------------

void begin(Run& run, std::uint32_t id, Body body, bool coroutine) {
  Record& r = run.records()[id];
  r.body = body;
  r.coroutine = coroutine;
  if (r.starts.fetch_add(1) != 0) run.violation(fmt::format("task {} ran twice", id));
  if (r.combinatorReturned.load()) {
    run.violation(fmt::format("task {} started after its combinator ({}) returned{}", id, r.memberOf,
                              tlsProducer ? ", on a producer thread" : ""));
  }
  if (tlsProducer) r.ranOnProducer = true;
  if (tlsRunningPending) r.ranAsPendingTask = true;
}

const char* toString(Role role) {
  switch (role) {
    case Role::top: return "a producer's task";
    case Role::child: return "an awaited child";
    case Role::detachedSubmit: return "a submitted child whose Future was dropped";
    case Role::detachedExecute: return "an executed child";
    case Role::member: return "a combinator's task";
    case Role::driver: return "a combinator's driver";
    case Role::periodic: return "a periodic schedule";
    case Role::keyed: return "a keyed task";
  }
  return "?";
}

/// Spins for `micros`, watching `token`; true if cancellation was seen.
bool spin(std::uint32_t micros, const CancellationToken& token) {
  const auto until = Clock::now() + std::chrono::microseconds(micros);
  while (Clock::now() < until) {
    if (token.isCancellationRequested()) return true;
    std::this_thread::yield();
  }
  return false;
}

/// The body of a child: derived from its id, so that it needs no storage.
Op childOp(const Op& parent, std::uint32_t id) {
  const std::uint64_t h = mix(id + 0x9e3779b97f4a7c15ULL * (parent.depth + 1));
  static constexpr Body kBodies[] = {Body::quick, Body::throws, Body::spin, Body::sleep, Body::children};
  Op op;
  op.kind = OpKind::submitCoroutine;
  op.body = kBodies[h % (parent.depth > 0 ? 5 : 4)];
  op.micros = static_cast<std::uint32_t>((h >> 8) % 300);
  op.fanout = 1 + static_cast<std::uint32_t>((h >> 20) % 3);
  op.arg = static_cast<std::uint32_t>((h >> 28) % 8);
  op.depth = parent.depth > 0 ? parent.depth - 1 : 0;
  return op;
}

Task<int> coroBody(Run* run, std::uint32_t id, Op op);
int callableBody(Run& run, std::uint32_t id, const Op& op, const CancellationToken& token);

/// Submits `op.fanout` children whose Futures are dropped, and executes one
/// more: their errors reach the uncaught handler (unobserved failures).
/// `token`: the submitting task's.
void spawnDetached(Run& run, const Op& op, const CancellationToken& token) {
  for (std::uint32_t k = 0; k <= op.fanout; ++k) {
    const std::uint32_t cid = run.records().add(k < op.fanout ? Role::detachedSubmit : Role::detachedExecute);
    run.records()[cid].parentToken = token;
    const Op child = childOp(op, cid);
    try {
      if (k < op.fanout) {
        (void)run.pool().submit(coroBody(&run, cid, child));
      } else {
        run.pool().execute([&run, cid, child](const CancellationToken& token) { (void)callableBody(run, cid, child, token); });
      }
    } catch (...) {
      run.classify(std::current_exception(), "a task submitting a detached child");
    }
  }
}

int callableBody(Run& run, std::uint32_t id, const Op& op, const CancellationToken& token) {
  begin(run, id, op.body, false);
  Record& r = run.records()[id];
  switch (op.body) {
    case Body::quick:
    case Body::children: break;
    case Body::throws: r.end = End::threw; throw StressError(id);
    case Body::spin:
    case Body::sleep:
      if (spin(op.micros, token) && (op.arg & 1U) != 0) {
        r.end = End::cancelled;
        throw OperationCancelled();
      }
      break;
    case Body::detached: spawnDetached(run, op, token); break;
  }
  r.end = End::returned;
  return valueOf(id);
}

Task<int> coroBody(Run* run, std::uint32_t id, Op op) {
  begin(*run, id, op.body, true);
  Record& r = run->records()[id];
  switch (op.body) {
    case Body::quick: break;
    case Body::throws: r.end = End::threw; throw StressError(id);
    case Body::spin: {
      const CancellationToken token = co_await currentToken();
      if (spin(op.micros, token) && (op.arg & 1U) != 0) {
        r.end = End::cancelled;
        throw OperationCancelled();
      }
      break;
    }
    case Body::sleep: {
      bool cancelled = false;
      try {
        co_await sleepFor(std::chrono::microseconds(op.micros));
      } catch (const OperationCancelled&) {
        cancelled = true;
      }
      if (cancelled) {
        r.end = End::cancelled;
        throw OperationCancelled();
      }
      break;
    }
    case Body::children: {
      std::vector<std::pair<std::uint32_t, Future<int>>> kids;
      for (std::uint32_t k = 0; k < op.fanout; ++k) {
        const std::uint32_t cid = run->records().add(Role::child);
        try {
          kids.emplace_back(cid, run->pool().submit(coroBody(run, cid, childOp(op, cid))));
        } catch (...) {
          run->classify(std::current_exception(), "a task submitting a child");
        }
      }
      for (auto& [cid, kid] : kids) {
        std::exception_ptr error;
        bool cancelled = false;
        try {
          const int v = co_await kid;
          if (v != valueOf(cid)) run->violation(fmt::format("child {} returned {}, not its value", cid, v));
          if (run->records()[cid].end.load() != End::returned) {
            run->violation(fmt::format("child {}'s Future has a value, but its body did not return", cid));
          }
        } catch (const OperationCancelled&) {
          cancelled = true;
        } catch (...) {
          error = std::current_exception();
        }
        if (error) run->classify(error, "a parent awaiting its child");
        if (cancelled) {
          // The child's Future reports its cancellation instead of what its
          // body did: a task cancelled while it runs settles with
          // OperationCancelled when it ends, whatever it threw or returned
          // (Future::cancel(); docs/cancellation.md, "What cancels a task"),
          // as a tracked Future may (checkFuture).
          Record& c = run->records()[cid];
          c.cancelReported = true;
          // Unless its body threw OperationCancelled itself (its token seen
          // cancelled), something cancelled the child. It has no token of
          // its own: only this task's cancellation reaches it ("down, never
          // up"), and that cancels this task's token too (or a token created
          // afterwards is born cancelled); or shutdownNow(), which cancels
          // the children of the tasks running on the pool's threads.
          if (c.end.load() != End::cancelled) {
            bool parentCancelled = run->anyShutdownNow();
            try {
              const CancellationToken token = co_await currentToken();  // may create it (std::bad_alloc)
              parentCancelled = parentCancelled || token.isCancellationRequested();
            } catch (...) {
              run->classify(std::current_exception(), "a parent awaiting its child");
              parentCancelled = true;  // not known
            }
            if (!parentCancelled) {
              run->violation(fmt::format(
                  "child {}'s Future reports a cancellation, but its parent {} was not cancelled", cid, id));
            }
          }
        }
      }
      break;
    }
    case Body::detached: {
      CancellationToken token;
      try {
        token = co_await currentToken();  // may create it (std::bad_alloc)
      } catch (...) {
        run->classify(std::current_exception(), "a task submitting a detached child");
      }
      spawnDetached(*run, op, token);
      break;
    }
  }
  r.end = End::returned;
  co_return valueOf(id);
}

/// Marks the members of a combinator as returned-from, and checks that each
/// has settled (or never started).
void combinatorReturned(Run& run, const std::vector<std::uint32_t>& ids, const char* what) {
  for (std::uint32_t cid : ids) {
    Record& m = run.records()[cid];
    m.combinatorReturned = true;
    if (m.starts.load() != 0 && m.end.load() == End::none) {
      run.violation(fmt::format("{} returned while its task {} was still running (a {} {})", what, cid,
                                m.coroutine.load() ? "coroutine" : "callable", toString(m.body.load())));
    }
  }
}

Task<int> invokeDriver(Run* run, std::uint32_t id, Op op, bool any) {
  begin(*run, id, Body::children, true);
  std::vector<std::function<Task<int>()>> tasks;
  std::vector<std::uint32_t> ids;
  for (std::uint32_t k = 0; k < op.fanout; ++k) {
    const std::uint32_t cid = run->records().add(Role::member);
    run->records()[cid].memberOf = any ? "invokeAny" : "invokeAll";
    ids.push_back(cid);
    const Op member = childOp(op, cid);
    tasks.emplace_back([run, cid, member] { return coroBody(run, cid, member); });
  }
  const bool timed = op.arg % 3 == 0;
  const auto timeout = std::chrono::microseconds(200 + op.micros);
  std::exception_ptr error;
  try {
    if (!any) {
      std::vector<int> values;
      if (timed) {
        auto all = run->pool().invokeAll(tasks, timeout);
        values = co_await all;
      } else {
        auto all = run->pool().invokeAll(tasks);
        values = co_await all;
      }
      if (values.size() != ids.size()) run->violation("invokeAll returned a vector of the wrong size");
      for (std::size_t i = 0; i < values.size() && i < ids.size(); ++i) {
        if (values[i] != valueOf(ids[i])) run->violation(fmt::format("invokeAll result {} is not task {}'s", i, ids[i]));
        if (run->records()[ids[i]].end.load() != End::returned) {
          run->violation(fmt::format("invokeAll returned a value for task {}, whose body did not return", ids[i]));
        }
      }
    } else {
      int value = 0;
      if (timed) {
        auto first = run->pool().invokeAny(tasks, timeout);
        value = co_await first;
      } else {
        auto first = run->pool().invokeAny(tasks);
        value = co_await first;
      }
      const auto winner = std::find_if(ids.begin(), ids.end(), [&](std::uint32_t cid) { return valueOf(cid) == value; });
      if (winner == ids.end() || run->records()[*winner].end.load() != End::returned) {
        run->violation(fmt::format("invokeAny returned {}, which no task of it returned", value));
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
  combinatorReturned(*run, ids, any ? "invokeAny" : "invokeAll");
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const AllFailed& failed) {
      if (!any) run->violation("invokeAll threw AllFailed");
      if (failed.errors().size() != ids.size()) run->violation("AllFailed does not hold one error per task");
      for (const auto& e : failed.errors()) run->classify(e, "AllFailed");
    } catch (const TimeoutError&) {
      if (!timed) run->violation("a combinator without a timeout threw TimeoutError");
    } catch (...) {
      run->classify(std::current_exception(), any ? "invokeAny" : "invokeAll");
    }
  }
  run->records()[id].end = End::returned;
  co_return valueOf(id);
}

Task<int> whenAllDriver(Run* run, std::uint32_t id, Op op) {
  begin(*run, id, Body::children, true);
  const std::uint32_t a = run->records().add(Role::member);
  const std::uint32_t b = run->records().add(Role::member);
  run->records()[a].memberOf = run->records()[b].memberOf = "whenAll";
  std::exception_ptr error;
  bool awaited = false;  // a refused second submission leaves the first to run on its own
  try {
    auto first = run->pool().submit(coroBody(run, a, childOp(op, a)));
    const Op second = childOp(op, b);
    auto other = run->pool().submit([run, b, second](const CancellationToken& token) { return callableBody(*run, b, second, token); });
    awaited = true;
    auto [x, y] = co_await whenAll(first, other);
    if (x != valueOf(a) || y != valueOf(b)) run->violation("whenAll returned values that are not its tasks'");
  } catch (...) {
    error = std::current_exception();
  }
  if (awaited) combinatorReturned(*run, {a, b}, "whenAll");
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      if (awaited && run->records()[a].combinatorReturned && run->records()[b].starts.load() + run->records()[a].starts.load() > 0 &&
          ((run->records()[a].starts.load() != 0 && run->records()[a].end.load() == End::none) ||
           (run->records()[b].starts.load() != 0 && run->records()[b].end.load() == End::none))) {
        run->violation(fmt::format("whenAll threw '{}' with a task still running", e.what()));
      }
    } catch (...) {
    }
    run->classify(error, "whenAll");
  }
  run->records()[id].end = End::returned;
  co_return valueOf(id);
}

Task<int> groupDriver(Run* run, std::uint32_t id, Op op) {
  begin(*run, id, Body::children, true);
  std::vector<std::uint32_t> ids;
  std::vector<Future<int>> kids;
  std::exception_ptr error;
  {
    TaskGroup group(run->pool());
    for (std::uint32_t k = 0; k < op.fanout; ++k) {
      const std::uint32_t cid = run->records().add(Role::member);
      run->records()[cid].memberOf = "TaskGroup";
      try {
        kids.push_back(group.spawn(coroBody(run, cid, childOp(op, cid))));
        ids.push_back(cid);
      } catch (...) {
        run->classify(std::current_exception(), "TaskGroup::spawn");
      }
    }
    if ((op.arg & 3U) == 3U) group.cancel();
    try {
      co_await group.join();
    } catch (...) {
      error = std::current_exception();
    }
    if (group.running() != 0) run->violation("TaskGroup::join returned with children running");
  }
  combinatorReturned(*run, ids, "TaskGroup::join");
  for (auto& kid : kids) {
    if (!kid.isDone()) run->violation("a TaskGroup child's Future was not settled after join");
  }
  if (error) run->classify(error, "TaskGroup::join");
  run->records()[id].end = End::returned;
  co_return valueOf(id);
}

// ---- the run ------------------------------------------------------------

ThreadPoolOptions Run::options() {
  const PoolConfig& c = program_.config;
  ThreadPoolOptions o;
  o.name = "stress";
  o.corePoolSize = c.core;
  o.maximumPoolSize = c.max;
  o.keepAliveTime = std::chrono::microseconds(c.keepAliveMicros);
  o.allowCoreThreadTimeOut = c.coreTimeout;
  switch (c.queue) {
    case QueueKind::bounded: o.workQueue = WorkQueue::bounded(c.capacity); break;
    case QueueKind::unbounded: o.workQueue = WorkQueue::unbounded(); break;
    case QueueKind::synchronous: o.workQueue = WorkQueue::synchronous(); break;
    case QueueKind::priority: o.workQueue = WorkQueue::priority(c.capacity); break;
  }
  PolicyKind policy = c.policy;
  if (program_.faults.site == FaultSite::rejectionHandler) policy = PolicyKind::custom;
  switch (policy) {
    case PolicyKind::abort: o.rejectionPolicy = RejectionPolicy::abort(); break;
    case PolicyKind::callerRuns: o.rejectionPolicy = RejectionPolicy::callerRuns(); break;
    case PolicyKind::discard: o.rejectionPolicy = RejectionPolicy::discard(); break;
    case PolicyKind::discardOldest: o.rejectionPolicy = RejectionPolicy::discardOldest(); break;
    case PolicyKind::block: o.rejectionPolicy = RejectionPolicy::block(std::chrono::microseconds(c.blockMicros)); break;
    case PolicyKind::newThreadRuns: o.rejectionPolicy = RejectionPolicy::newThreadRuns(c.temporaryThreads); break;
    case PolicyKind::custom:
      // Runs every other refused task on the caller, drops the others (their
      // Futures report BrokenPromise).
      o.rejectionPolicy = RejectionPolicy([this](PendingTask& task, ThreadPoolExecutor& pool) {
        if (fire(FaultSite::rejectionHandler)) throwFault();
        if (pool.isShutdown()) throw RejectedExecution("stress: refused after shutdown", pool.stats());
        if ((customCalls_.fetch_add(1) & 1U) == 0) runPending(task);
      });
      break;
  }
  if (c.hooks || program_.faults.site == FaultSite::beforeExecute || program_.faults.site == FaultSite::afterExecute) {
    o.hooks.beforeExecute = [this](const TaskInfo&) {
      beforeCalls_.fetch_add(1, std::memory_order_relaxed);
      if (fire(FaultSite::beforeExecute)) throwFault();
    };
    o.hooks.afterExecute = [this](const TaskInfo&, const std::exception_ptr&) {
      afterCalls_.fetch_add(1, std::memory_order_relaxed);
      if (fire(FaultSite::afterExecute)) throwFault();
    };
  }
  if (c.hooks || program_.faults.site == FaultSite::threadFactory) {
    o.threadFactory = [this](const std::string& /*name*/, std::function<void()> body) {
      if (fire(FaultSite::threadFactory)) throwFault();
      return std::thread(std::move(body));
    };
  }
  o.uncaughtExceptionHandler = [this](const std::exception_ptr& error, const TaskInfo& info) {
    try {
      std::rethrow_exception(error);
    } catch (const StressError& e) {
      observe(e.id, info.unobserved ? "the uncaught handler (unobserved)" : "the uncaught handler");
    } catch (const PeriodicError& e) {
      records_[e.id].periodicReports.fetch_add(1);
    } catch (const FaultError&) {
      faultSeen("the uncaught handler");
    } catch (const std::bad_alloc&) {
      badAllocSeen("the uncaught handler");
    } catch (const std::exception& e) {
      violation(fmt::format("the uncaught handler got an unexpected exception: {}", e.what()));
    } catch (...) {
      violation("the uncaught handler got a non-std exception");
    }
    if (fire(FaultSite::uncaughtHandler)) throwFault();
  };
  o.runDelayedTasksAfterShutdown = c.runDelayedAfterShutdown;
  o.continuePeriodicTasksAfterShutdown = c.continuePeriodicAfterShutdown;
  return o;
}

void Run::runOp(std::size_t thread, const Op& op) {
  ThreadPoolExecutor& p = pool();
  const int priority = static_cast<int>(op.arg % 3);
  switch (op.kind) {
    case OpKind::submitCallable: {
      const std::uint32_t id = records_.add(Role::top);
      track(id, p.submit([this, id, op](const CancellationToken& token) { return callableBody(*this, id, op, token); },
                         priority));
      break;
    }
    case OpKind::executeCallable: {
      const std::uint32_t id = records_.add(Role::top);
      p.execute([this, id, op](const CancellationToken& token) { (void)callableBody(*this, id, op, token); }, priority);
      break;
    }
    case OpKind::submitCoroutine: {
      const std::uint32_t id = records_.add(Role::top);
      records_[id].allocationsBefore = detail::FaultInjection::frameAllocationCalls();
      track(id, p.submit(coroBody(this, id, op), priority));
      break;
    }
    case OpKind::executeCoroutine: {
      const std::uint32_t id = records_.add(Role::top);
      p.execute([this, id, op]() -> Task<void> { (void)co_await coroBody(this, id, op); }, priority);
      break;
    }
    case OpKind::submitWithToken: {
      const std::uint32_t id = records_.add(Role::top);
      const std::uint32_t s = op.arg % 4;
      markSourceUsed(s, id);
      if (sourceCancelled(s)) records_[id].cancelRequested = true;
      if ((op.arg & 4U) != 0) {
        track(id, p.submit(coroBody(this, id, op), source(s).token()));
      } else {
        track(id, p.submit([this, id, op](const CancellationToken& token) { return callableBody(*this, id, op, token); },
                           source(s).token()));
      }
      break;
    }
    case OpKind::cancelRecent: cancelRecent(op.arg); break;
    case OpKind::cancelSource: cancelSource(op.arg); break;
    case OpKind::resize: {
      const std::size_t size = op.arg % 5;
      try {
        if (op.fanout % 2 == 0) {
          p.setMaximumPoolSize(std::max<std::size_t>(size, 1));
        } else {
          p.setCorePoolSize(size);
        }
      } catch (const std::invalid_argument&) {
        // core > max or max < core: refused, and the pool unchanged.
      }
      break;
    }
    case OpKind::schedule: {
      const std::uint32_t id = records_.add(Role::top);
      auto scheduled = p.schedule([this, id, op](const CancellationToken& token) { return callableBody(*this, id, op, token); },
                                  std::chrono::microseconds(op.micros));
      track(id, std::move(scheduled));
      break;
    }
    case OpKind::scheduleAtFixedRate:
    case OpKind::scheduleWithFixedDelay: {
      const std::uint32_t id = records_.add(Role::periodic);
      const bool failing = op.body == Body::throws;
      const bool continueOnError = (op.arg & 1U) != 0;
      auto body = [this, id, failing](const CancellationToken&) {
        Record& r = records_[id];
        const std::uint32_t run = r.starts.fetch_add(1) + 1;
        if (failing && run % 3 == 0) {
          r.periodicThrows.fetch_add(1);
          throw PeriodicError(id);
        }
      };
      const auto first = std::chrono::microseconds(op.micros);
      const auto period = std::chrono::microseconds(300 + op.micros);
      PeriodicHandle handle = op.kind == OpKind::scheduleAtFixedRate
                                  ? p.scheduleAtFixedRate(body, first, period, PeriodicOptions{continueOnError})
                                  : p.scheduleWithFixedDelay(body, first, period, PeriodicOptions{continueOnError});
      trackPeriodic(id, continueOnError, std::move(handle));
      break;
    }
    case OpKind::cancelPeriodic: cancelPeriodic(op.arg); break;
    case OpKind::invokeAll:
    case OpKind::invokeAny: {
      combinatorsUsed_ = true;
      const std::uint32_t id = records_.add(Role::driver);
      track(id, p.submit(invokeDriver(this, id, op, op.kind == OpKind::invokeAny)));
      break;
    }
    case OpKind::whenAll: {
      combinatorsUsed_ = true;
      const std::uint32_t id = records_.add(Role::driver);
      track(id, p.submit(whenAllDriver(this, id, op)));
      break;
    }
    case OpKind::taskGroup: {
      combinatorsUsed_ = true;
      const std::uint32_t id = records_.add(Role::driver);
      track(id, p.submit(groupDriver(this, id, op)));
      break;
    }
    case OpKind::keyed: {
      if (keyed_ == nullptr) break;
      const std::uint32_t id = records_.add(Role::keyed);
      const std::uint32_t key = static_cast<std::uint32_t>(thread) * 8 + op.arg % 8;
      const std::uint32_t seq = nextKeySeq(key);
      track(id, keyed_->submit(key, [this, id, op, key, seq](const CancellationToken& token) {
        keyedStart(key, seq);
        struct Leave {
          Run& run;
          std::uint32_t key;
          ~Leave() { run.keyedEnd(key); }
        } leave{*this, key};
        return callableBody(*this, id, op, token);
      }));
      break;
    }
    case OpKind::purge: (void)p.purge(); break;
    case OpKind::prestart:
      if ((op.arg & 1U) != 0) {
        (void)p.prestartAllCoreThreads();
      } else {
        (void)p.prestartCoreThread();
      }
      break;
    case OpKind::awaitTermination: (void)p.awaitTermination(std::chrono::microseconds(op.micros % 500)); break;
    case OpKind::pause:
      if (op.micros >= 1000) {
        std::this_thread::sleep_for(std::chrono::microseconds(op.micros / 10));
      } else {
        std::this_thread::yield();
      }
      break;
    case OpKind::shutdown:
      noteShutdown();
      p.shutdown();
      break;
    case OpKind::shutdownNow:
      stopNow(2, "a drained task run by the producer");  // every other one run here, the rest dropped
      break;
  }
}

/// shutdownNow(), then runs every `every`-th returned task here and drops
/// the rest (their Futures report BrokenPromise): both are accounted for.
void Run::stopNow(std::size_t every, const char* where) {
  std::vector<PendingTask> returned = pool().shutdownNow();
  noteShutdownNow(returned.size());
  for (std::size_t i = 0; i < returned.size(); i += every) {
    try {
      runPending(returned[i]);
    } catch (...) {
      classify(std::current_exception(), where);
    }
  }
}

void Run::producer(std::size_t index) {
  tlsProducer = true;
  for (const Op& op : program_.threads[index]) {
    try {
      runOp(index, op);
    } catch (const std::length_error&) {
      throw;
    } catch (...) {
      classify(std::current_exception(), "a producer's call");
    }
  }
}

/// After the faults: the pool still runs new tasks (unless it was shut down).
void Run::probe() {
  if (anyShutdown()) return;
  const auto deadline = Clock::now() + 20s;
  for (int i = 0; i < 3; ++i) {
    while (true) {
      const std::uint32_t id = records_.add(Role::top);
      Future<int> f;
      try {
        f = pool().submit([this, id](const CancellationToken& token) {
          return callableBody(*this, id, Op{}, token);
        });
      } catch (...) {
        classify(std::current_exception(), "the probe's submit");
        if (Clock::now() > deadline) {
          violation("the pool refused every probe task for 20 s after the program");
          return;
        }
        std::this_thread::sleep_for(1ms);
        continue;
      }
      if (!f.waitFor(20s)) {
        violation("a probe task did not finish within 20 s: the pool no longer runs tasks");
        track(id, std::move(f));
        return;
      }
      track(id, std::move(f));
      break;
    }
  }
}

void Run::ending() {
  if (keyed_ != nullptr) keyed_.reset();  // blocks until every keyed task settled
  if (program_.config.continuePeriodicAfterShutdown || program_.ending == Ending::close) {
    std::lock_guard lock(mutex_);
    for (auto& p : periodic_) {
      p->cancelledByUs = true;
      (void)p->handle.cancel();
    }
  }
  switch (program_.ending) {
    case Ending::shutdown:
      noteShutdown();
      pool().shutdown();
      break;
    case Ending::shutdownNow:
      stopNow(3, "a drained task run at the end");
      break;
    case Ending::close:
      noteShutdown();
      pool().close();
      break;
  }
  if (!pool().awaitTermination(60s)) {
    violation(fmt::format("the pool did not terminate within 60 s: {}", pool().stats()));
  }
}

void Run::checkFuture(Tracked& t) {
  Record& r = records_[t.id];
  if (!t.future.waitFor(20s)) {
    violation(fmt::format("task {}'s Future did not settle within 20 s of termination", t.id));
    return;
  }
  ++report_.futures;
  r.outcome = "value";
  try {
    const int v = t.future.get();
    if (r.role != Role::driver && r.end.load() != End::returned) {
      violation(fmt::format("task {}'s Future has a value, but its body did not return", t.id));
    }
    if (v != valueOf(t.id)) violation(fmt::format("task {}'s Future holds {}, not its value", t.id, v));
  } catch (const StressError& e) {
    r.outcome = "StressError";
    if (e.id != t.id) violation(fmt::format("task {}'s Future holds task {}'s error", t.id, e.id));
    observe(e.id, "its Future");
  } catch (const OperationCancelled&) {
    r.outcome = "OperationCancelled";
    r.cancelReported = true;
    const bool couldBeCancelled = r.cancelRequested.load() || anyShutdownNow() ||
                                  (anyShutdown() && !program_.config.runDelayedAfterShutdown) ||
                                  r.end.load() == End::cancelled;
    if (!couldBeCancelled) violation(fmt::format("task {}'s Future reports a cancellation nobody asked for", t.id));
  } catch (const RejectedExecution&) {
    r.outcome = "RejectedExecution";
    if (r.starts.load() != 0) violation(fmt::format("task {}'s Future reports RejectedExecution, but it ran", t.id));
  } catch (const BrokenPromise&) {
    r.outcome = "BrokenPromise";
    if (r.starts.load() != 0) violation(fmt::format("task {}'s Future reports BrokenPromise, but it ran", t.id));
  } catch (const FaultError&) {
    if (program_.faults.site != FaultSite::beforeExecute) {
      violation(fmt::format("task {}'s Future holds a FaultError with the plan '{}'", t.id,
                            toString(program_.faults.site)));
    }
    faultReports_.fetch_add(1);
  } catch (const std::bad_alloc&) {
    badAllocSeen("a Future");
  } catch (const std::exception& e) {
    violation(fmt::format("task {}'s Future holds an unexpected exception: {}", t.id, e.what()));
  }
}

void Run::checkPeriodic(TrackedPeriodic& p) {
  Record& r = records_[p.id];
  if (!p.handle.waitFor(20s)) {
    violation(fmt::format("periodic schedule {}'s handle did not settle within 20 s of termination", p.id));
    return;
  }
  ++report_.handles;
  try {
    p.handle.get();
    if (!p.cancelledByUs.load()) violation(fmt::format("periodic schedule {} ended normally though not cancelled", p.id));
  } catch (const PeriodicError& e) {
    if (e.id != p.id || p.continueOnError || r.periodicThrows.load() == 0) {
      violation(fmt::format("periodic schedule {}'s handle holds an error it should not", p.id));
    }
  } catch (const OperationCancelled&) {
    if (!anyShutdown() && !p.cancelledByUs.load()) {
      violation(fmt::format("periodic schedule {} was cancelled by nobody", p.id));
    }
  } catch (const FaultError&) {
    // A failed run's error reaches the handler (counted there) and then the
    // handle: one report.
    if (program_.faults.site != FaultSite::beforeExecute) violation("a periodic handle holds an unplanned FaultError");
  } catch (const std::bad_alloc&) {
    const FaultPlan& plan = program_.faults;
    if (plan.site == FaultSite::frameAllocator) {
      // The schedule's next run could not be allocated: the schedule ends,
      // and its handle is where that is reported (docs/reliability.md, the
      // fault table): the one report.
      faultReports_.fetch_add(1);
    } else if (!(plan.site == FaultSite::beforeExecute && plan.badAlloc)) {
      // Else only, as for FaultError, a beforeExecute fault planned as
      // std::bad_alloc (the failed run was counted in the handler).
      violation("a periodic handle holds an unplanned bad_alloc");
    }
  } catch (const std::exception& e) {
    violation(fmt::format("periodic schedule {}'s handle holds an unexpected exception: {}", p.id, e.what()));
  }
}

bool Run::allStartedEnded() {
  for (std::uint32_t id = 0, n = records_.size(); id < n; ++id) {
    Record& r = records_[id];
    if (r.role != Role::periodic && r.starts.load() > 0 && r.end.load() == End::none) return false;
  }
  return true;
}

void Run::checkRecords() {
  const std::uint32_t n = records_.size();
  report_.tasks = n;
  for (std::uint32_t id = 0; id < n; ++id) {
    Record& r = records_[id];
    const std::uint32_t starts = r.starts.load();
    if (r.role == Role::periodic) {
      if (r.periodicReports.load() != r.periodicThrows.load()) {
        violation(fmt::format("periodic schedule {}: {} runs failed, {} reached the uncaught handler", id,
                              r.periodicThrows.load(), r.periodicReports.load()));
      }
      continue;
    }
    if (starts > 0) ++report_.started;
    if (starts > 0 && r.end.load() == End::none) {
      violation(fmt::format("task {} started and never finished: {}, a {} {}{}{}", id, toString(r.role),
                            r.coroutine.load() ? "coroutine" : "callable", toString(r.body.load()),
                            r.ranOnProducer.load() ? ", started on a producer thread" : "",
                            r.ranAsPendingTask.load() ? " by PendingTask::run()" : ""));
    }
    // Documented exceptions: a combinator's task whose failure the combinator
    // absorbed (it rethrows the first only), a task whose Future reported
    // its cancellation instead, a task run by PendingTask::run() whose
    // result nobody holds (a detached child, or a fire-and-forget coroutine:
    // printed to stderr), and a submitted child whose Future was dropped and
    // whose parent was cancelled: cancelled with it while it ran, its Future
    // reports OperationCancelled, and a cancelled task's unread failure is
    // never reported (ThreadPoolOptions::reportUnobservedFailures).
    const bool unheld = r.role == Role::detachedSubmit || r.role == Role::top || r.role == Role::detachedExecute;
    const bool cancelledWithParent = r.role == Role::detachedSubmit && r.parentToken.isCancellationRequested();
    if (r.end.load() == End::threw && r.observed.load() == 0 && r.role != Role::member && !r.cancelReported.load() &&
        !(r.ranAsPendingTask.load() && unheld) && !cancelledWithParent) {
      violation(fmt::format("task {}'s error was reported nowhere (lost): {}{}{}", id, toString(r.role),
                            r.ranOnProducer.load() ? ", ran on a producer thread" : "",
                            r.cancelRequested.load() ? ", cancel requested" : ""));
    }
  }
}

void Run::check() {
  for (Tracked& t : tracked_) checkFuture(t);
  for (auto& p : periodic_) checkPeriodic(*p);
  const PoolStats s = pool().stats();
  report_.finalStats = fmt::format("{}", s);
  report_.admitted = s.taskCount;
  report_.pendingReturned = pendingReturned_.load();
  const std::uint64_t accounted =
      s.completedTaskCount + s.failedCount + s.cancelledCount + s.discardedCount + s.drainedCount;
  if (s.taskCount != accounted) {
    violation(fmt::format("the ledger does not add up: taskCount {} != {} accounted: {}", s.taskCount, accounted, s));
  }
  if (s.state != PoolState::terminated) violation(fmt::format("the pool is not TERMINATED: {}", s));
  if (s.poolSize != 0 || s.activeCount != 0 || s.queueSize != 0 || s.localQueueSize != 0 || s.scheduledCount != 0) {
    violation(fmt::format("a terminated pool still holds threads, tasks or timers: {}", s));
  }
  if (s.drainedCount != pendingReturned_.load()) {
    violation(fmt::format("drainedCount {} but shutdownNow() returned {} tasks", s.drainedCount,
                          pendingReturned_.load()));
  }
  if (afterCalls_.load() > beforeCalls_.load()) violation("afterExecute ran more often than beforeExecute");
}

void Run::execute() {
  const std::size_t threadsBefore = processThreads();
  const std::string threadNamesBefore = processThreadNames();
  const std::int64_t framesBefore = detail::FaultInjection::liveFrameBlocks();
  const std::uint64_t allocationsFailedBefore = detail::FaultInjection::frameAllocationsFailed();
  const std::uint64_t allocationCallsBefore = detail::FaultInjection::frameAllocationCalls();
  tlsProducer = true;
  pool_.emplace(options());
  if (program_.config.keyedLanes > 0) keyed_ = std::make_unique<KeyedExecutor>(*pool_, program_.config.keyedLanes);
  if (program_.faults.site == FaultSite::frameAllocator) {
    detail::FaultInjection::failFrameAllocation(program_.faults.nth);
  }
  {
    std::vector<std::thread> producers;
    producers.reserve(program_.threads.size());
    for (std::size_t i = 0; i < program_.threads.size(); ++i) producers.emplace_back([this, i] { producer(i); });
    for (auto& t : producers) t.join();
  }
  probe();
  ending();
  if (program_.faults.site == FaultSite::frameAllocator) {
    report_.faultsFired = detail::FaultInjection::frameAllocationsFailed() - allocationsFailedBefore;
    report_.siteCalls = detail::FaultInjection::frameAllocationCalls() - allocationCallsBefore;
    detail::FaultInjection::failFrameAllocation(0);
  }
  check();
  tracked_.clear();
  periodic_.clear();
  pool_.reset();
  // Work outside any pool (a fire-and-forget coroutine run by
  // PendingTask::run() sleeps on the process's timer service) ends on its
  // own: wait for it, a bounded time (the check below reports it if not).
  const auto settleBy = Clock::now() + 10s;
  while (Clock::now() < settleBy && !allStartedEnded()) std::this_thread::sleep_for(1ms);
  checkRecords();
  if (program_.faults.site != FaultSite::frameAllocator) {
    report_.faultsFired = faultsFired_.load();
    report_.siteCalls = siteCalls_.load();
  }
  // Where the docs say a fault is reported, it is reported exactly once.
  const FaultSite site = program_.faults.site;
  if (site == FaultSite::threadFactory || site == FaultSite::beforeExecute || site == FaultSite::rejectionHandler ||
      site == FaultSite::frameAllocator) {
    // A fault that fails a combinator's task is that task's failure, which
    // the combinator may absorb (it rethrows its first failure only; invokeAny
    // drops failures once one task succeeds): there, at most one report.
    const bool absorbable = combinatorsUsed_.load() && site != FaultSite::threadFactory;
    if (absorbable ? faultReports_.load() > report_.faultsFired : faultReports_.load() != report_.faultsFired) {
      violation(fmt::format("{} fault(s) injected at {}, {} reported", report_.faultsFired, toString(site),
                            faultReports_.load()));
    }
  } else if (faultReports_.load() != 0) {
    violation(fmt::format("a fault at {} was reported somewhere ({} times): it must be printed and dropped",
                          toString(site), faultReports_.load()));
  }
  if (!options_.checkProcess) return;
  // Temporary threads (newThreadRuns) are detached: give them a moment.
  const auto deadline = Clock::now() + 10s;
  while (processThreads() != threadsBefore && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  if (processThreads() != threadsBefore) {
    violation(fmt::format("{} threads before the program ({}), {} after the pool's destruction ({})", threadsBefore,
                          threadNamesBefore, processThreads(), processThreadNames()));
  }
  if (detail::FaultInjection::available()) {
    // A task that this program ran itself through PendingTask::run() (a
    // custom policy, a task shutdownNow() returned) runs outside any pool:
    // if it slept, it finished on the process's timer thread, which drops
    // its last reference to the task just after the Future settled, and no
    // pool waits for that. Give such releases a bounded moment.
    const auto settled = Clock::now() + 5s;
    while (detail::FaultInjection::liveFrameBlocks() != framesBefore && Clock::now() < settled) {
      std::this_thread::sleep_for(1ms);
    }
    const std::int64_t framesAfter = detail::FaultInjection::liveFrameBlocks();
    if (framesAfter != framesBefore) {
      detail::FaultInjection::printLiveBlocks(allocationCallsBefore);
      if (std::getenv("COEXEC_FAULT_TRACE_LIVE") != nullptr) {
        for (std::uint32_t id = 0; id < records_.size(); ++id) {
          Record& r = records_[id];
          if (r.allocationsBefore == 0) continue;
          std::fprintf(stderr, "record %u: allocations before %llu, starts %u, end %d, outcome %s%s%s\n", id,
                       static_cast<unsigned long long>(r.allocationsBefore), r.starts.load(),
                       static_cast<int>(r.end.load()), r.outcome.c_str(), r.ranOnProducer ? ", on a producer" : "",
                       r.ranAsPendingTask ? " by PendingTask::run" : "");
        }
      }
      violation(fmt::format("{} frame-allocator blocks live before the program, {} after: leaked frames or task states",
                            framesBefore, framesAfter));
    }
  }
}

/// Aborts the process, printing the program, if a run takes longer than its
/// limit (a hang is a failure too). One thread for the whole process, armed
/// for each program: a thread started and joined per program could still be
/// counted in /proc/self/status when the next program counts its threads
/// (join() returns once the thread has finished, a moment before the kernel
/// drops it from the count), and that program would see one thread fewer
/// after it than before.
class Watchdog {
 public:
  /// The process's watchdog; its thread starts on first use.
  static Watchdog& instance() {
    static Watchdog watchdog;
    return watchdog;
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Watches `program` (which must outlive disarm()) for `seconds`.
  void arm(const Program& program, std::uint32_t seconds) {
    {
      std::lock_guard lock(mutex_);
      program_ = &program;
      seconds_ = seconds;
      deadline_ = Clock::now() + std::chrono::seconds(seconds);
      ++generation_;
    }
    cv_.notify_all();
  }
  void disarm() {
    {
      std::lock_guard lock(mutex_);
      program_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
  }

 private:
  Watchdog() : thread_([this] { watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void watch() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      if (program_ == nullptr) {
        cv_.wait(lock);
        continue;
      }
      const std::uint64_t watched = generation_;
      const Clock::time_point deadline = deadline_;
      if (cv_.wait_until(lock, deadline, [&] { return stopping_ || generation_ != watched; })) continue;
      std::fprintf(stderr, "stress: the program did not end within %u s (a hang):\n%s", seconds_,
                   describe(*program_).c_str());
      std::fflush(stderr);
      std::abort();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  const Program* program_ = nullptr;  // guarded by mutex_: the program watched, or none
  std::uint32_t seconds_ = 0;         // guarded by mutex_
  Clock::time_point deadline_;        // guarded by mutex_
  std::uint64_t generation_ = 0;      // guarded by mutex_: counts arm() and disarm() calls
  bool stopping_ = false;             // guarded by mutex_
  std::thread thread_;
};

/// Starts what the process keeps for good once first used, so that the
/// thread count before a program is the one to come back to: the timer
/// service of sleeps outside any pool (a coroutine that callerRuns() ran on a
/// producer sleeps there), whose thread lives until the process exits.
void startProcessWideServices() {
  static std::once_flag once;
  std::call_once(once, [] {
    syncWait([]() -> Task<void> { co_await sleepFor(std::chrono::microseconds(1)); }());
  });
}

}  // namespace

RunReport runProgram(const Program& program, const RunOptions& options) {
  RunReport report;
  startProcessWideServices();
  // The watchdog's thread is started before the run counts threads.
  Watchdog& watchdog = Watchdog::instance();
  watchdog.arm(program, options.watchdogSeconds);
  struct Disarm {
    Watchdog& watchdog;
    ~Disarm() { watchdog.disarm(); }
  } disarm{watchdog};
  {
    Run run(program, options, report);
    run.execute();
  }
  return report;
}

}  // namespace coexec::stress
