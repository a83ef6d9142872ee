// SPDX-License-Identifier: BSL-1.0
#pragma once

// The internals of one stress program's run (model/Runner.h is the
// interface): the records of every task, the errors the bodies throw, and
// the Run that owns the pool. Shared by Runner.cpp (the pool, the producers
// and the ending), Bodies.cpp (the task bodies, the foreign coroutines and
// the combinator drivers) and Checks.cpp (the checks after a run).

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "coexec/coexec.h"
#include "model/GlobalNew.h"
#include "model/Program.h"
#include "model/Runner.h"

namespace coexec::stress::impl {


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
inline thread_local bool tlsProducer = false;

/// True while this program's own code runs a PendingTask (a custom policy, a
/// task shutdownNow() returned): such a task runs outside any pool, where
/// the docs promise no report of an unread failure (PendingTask::run()).
inline thread_local bool tlsRunningPending = false;

/// Runs `task` with tlsRunningPending set.
inline void runPending(PendingTask& task) {
  struct Restore {
    bool previous;
    ~Restore() { tlsRunningPending = previous; }
  } restore{std::exchange(tlsRunningPending, true)};
  task.run();
}

enum class End : std::uint8_t { none, returned, threw, cancelled, other };

enum class Role : std::uint8_t {
  top,              ///< submitted or executed by a producer
  child,            ///< submitted from a running task and awaited by it
  detachedSubmit,   ///< submitted from a running task, its Future dropped
  detachedExecute,  ///< executed from a running task
  member,           ///< a combinator's or TaskGroup's task: its failure may be absorbed by the combinator
  driver,           ///< the coroutine that runs a combinator
  periodic,         ///< a periodic schedule
  keyed,            ///< a KeyedExecutor task
  foreign,          ///< a coroutine of a type foreign to coexec, started by a task body (not a pool task)
  foreignAwaited,   ///< submitted from a running task for a foreign coroutine, which awaits its Future
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
  std::uint32_t awaits = 0;             ///< for a foreign coroutine: the foreignAwaited task it awaits
  std::atomic<bool> sleeping{false};    ///< for a foreign coroutine: in its sleep (an error comes from it)
  std::atomic<bool> onWorker{false};    ///< for a foreign coroutine: started on one of the pool's workers
  std::atomic<bool> foreignEnding{false};  ///< for a foreign coroutine: foreignEnded() was called
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
    HarnessCode harness;
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

inline int valueOf(std::uint32_t id) { return static_cast<int>(id % 1'000'000) * 2 + 1; }

/// The over-aligned payloads (Body::aligned): a capture of 32-byte alignment
/// and a result of 64, their contents derived from the task's id.
struct alignas(32) Pad32 {
  std::array<std::int64_t, 4> v{};
  bool operator==(const Pad32&) const = default;
};
struct alignas(64) Wide64 {
  std::array<std::int64_t, 8> v{};
  bool operator==(const Wide64&) const = default;
};
inline Pad32 padOf(std::uint32_t id) {
  Pad32 pad;
  for (std::size_t i = 0; i < pad.v.size(); ++i)
    pad.v[i] = static_cast<std::int64_t>(id) * 31 + static_cast<std::int64_t>(i);
  return pad;
}
inline Wide64 wideOf(std::uint32_t id) {
  Wide64 wide;
  for (std::size_t i = 0; i < wide.v.size(); ++i)
    wide.v[i] = -static_cast<std::int64_t>(id) * 17 - static_cast<std::int64_t>(i);
  return wide;
}
/// True if `p` is a multiple of `alignment`. The address goes through a
/// volatile, so that the compiler cannot fold the test from the pointee's
/// type (an alignas(64) object is aligned as far as the type system knows).
inline bool isAligned(const void* p, std::size_t alignment) {
  const void* volatile laundered = p;
  return reinterpret_cast<std::uintptr_t>(laundered) % alignment == 0;
}

/// A cheap deterministic mix, for the bodies of children (chosen at run time).
inline std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

struct Tracked {
  std::uint32_t id;
  Future<int> future;
};

struct TrackedWide {
  std::uint32_t id;
  Future<Wide64> future;
};

struct TrackedPeriodic {
  std::uint32_t id;
  bool continueOnError;
  PeriodicHandle handle;
  std::atomic<bool> cancelledByUs{false};
};

/// What the process holds, before a program and after it (Checks.cpp).
struct ProcessState {
  std::size_t threads = 0;
  std::string threadNames;       ///< for a message
  std::int64_t frameBlocks = 0;  ///< FaultInjection::liveFrameBlocks()
  std::uint64_t frameCalls = 0;  ///< FaultInjection::frameAllocationCalls()
};
ProcessState processState();

/// One program's run: the pool, the records and what was seen.
class Run {
 public:
  Run(const Program& program, const RunOptions& options, RunReport& report)
      : program_(program), options_(options), report_(report) {}

  const Program& program() const { return program_; }
  ThreadPoolExecutor& pool() { return *pool_; }
  Records& records() { return records_; }

  void violation(std::string what) {
    HarnessCode harness;
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
    const FaultSite site = program_.faults.site;
    if (site != FaultSite::frameAllocator && site != FaultSite::globalNew && !program_.faults.badAlloc) {
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
  void trackWide(std::uint32_t id, Future<Wide64> future) {
    std::lock_guard lock(mutex_);
    trackedWide_.push_back(TrackedWide{id, std::move(future)});
  }
  void trackPeriodic(std::uint32_t id, bool continueOnError, PeriodicHandle handle) {
    std::lock_guard lock(mutex_);
    periodic_.push_back(std::make_unique<TrackedPeriodic>());
    auto& p = *periodic_.back();
    p.id = id;
    p.continueOnError = continueOnError;
    p.handle = std::move(handle);
  }

  /// A foreign coroutine's start and end (Checks.cpp): `error` is what
  /// escaped it (null if it returned), checked against the task it awaited.
  void foreignStarted(std::uint32_t id);
  void foreignEnded(std::uint32_t id, std::exception_ptr error, const int* value);
  /// Counts an over-aligned result checked (checkWide()).
  void alignedChecked() { alignedChecks_.fetch_add(1, std::memory_order_relaxed); }
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
  void checkWideFuture(TrackedWide& t);
  template <class R, class OnValue>
  void checkSettled(std::uint32_t id, Future<R>& future, OnValue onValue);
  void checkForeignOutcome(std::uint32_t id, const std::exception_ptr& error, const int* value);
  void checkForeignHeld();
  void checkPeriodic(TrackedPeriodic& p);
  void checkRecords();
  /// Each fault reported where docs/reliability.md's table says.
  void checkFaultReports();
  /// The threads and the frame-allocator blocks back to `before`.
  void checkProcess(const ProcessState& before);
  bool allStartedEnded();

  const Program& program_;
  const RunOptions& options_;
  RunReport& report_;
  std::mutex mutex_;
  Records records_;
  std::optional<ThreadPoolExecutor> pool_;
  std::unique_ptr<KeyedExecutor> keyed_;
  std::vector<Tracked> tracked_;
  std::vector<TrackedWide> trackedWide_;
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
  std::atomic<std::uint64_t> foreignStarts_{0};
  std::atomic<std::uint64_t> foreignEnds_{0};
  std::atomic<std::uint64_t> foreignOnWorkers_{0};
  std::array<std::atomic<std::uint64_t>, 4> foreignOutcomes_{};  // RunReport::foreignOutcomes
  std::atomic<std::uint64_t> alignedChecks_{0};
};

const char* toString(Role role);

// ---- the task bodies (Bodies.cpp) ------------------------------------------

/// The body of a callable task `id` (a producer's, a child's or a member's):
/// records its start and end and does what `op` says.
int callableBody(Run& run, std::uint32_t id, const Op& op, const CancellationToken& token);

/// The body of a coroutine task `id`: as callableBody, and it may await or
/// detach children.
Task<int> coroBody(Run* run, std::uint32_t id, Op op);

/// The callable of an executed (fire-and-forget) coroutine task `id`: starts
/// a coroutine that awaits coroBody (alignedCoroBody for Body::aligned, and
/// checks its result). A std::bad_alloc that fails it (its
/// frame's or coroBody's) while PendingTask::run() runs it is counted as
/// reported: the library prints such a failure to stderr.
Task<void> startFireAndForget(Run& run, std::uint32_t id, const Op& op);

/// The over-aligned payloads (Body::aligned) of task `id`: check that their
/// alignas(32) value (the callable's capture `pad`, a local of the
/// coroutine's frame) is aligned and intact where the body runs, quick,
/// throw or wait (a spin, a sleep) as `op` says, and return wideOf(id).
Wide64 alignedCallableBody(Run& run, std::uint32_t id, const Op& op, const CancellationToken& token, const Pad32& pad);
Task<Wide64> alignedCoroBody(Run* run, std::uint32_t id, Op op);

/// Check an over-aligned capture where the body runs and a result where it
/// was read: aligned, and padOf(id) / wideOf(id) (Checks.cpp).
void checkPad(Run& run, std::uint32_t id, const Pad32& pad, const char* where);
void checkWide(Run& run, std::uint32_t id, const Wide64& result, const char* where);

/// The coroutines that drive a combinator over `op.count` member tasks and
/// check it stays structured: invokeAll or invokeAny (`any`), whenAll, a
/// TaskGroup.
Task<int> invokeDriver(Run* run, std::uint32_t id, Op op, bool any);
Task<int> whenAllDriver(Run* run, std::uint32_t id, Op op);
Task<int> groupDriver(Run* run, std::uint32_t id, Op op);

}  // namespace coexec::stress::impl
