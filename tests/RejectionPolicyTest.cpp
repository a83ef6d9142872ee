#include "coexec/RejectionPolicy.h"

// Rejection policies (REJ) of ../shared/reference/jdk-executor-behaviours.md,
// ported from the JDK's ThreadPoolExecutorTest
// (testSubmittedTasksRejectedWhenSaturatedOrShutdown, the older
// testSaturatedExecute* / test*OnShutdown, testStandardRejectedExecutionHandlers)
// and Python's test_run_after_shutdown, plus the rules of the coexec contract:
// a task that will never run settles its Future (RejectedExecution or
// BrokenPromise) where Java leaves it pending, callerRuns after shutdown
// reports the rejection instead of returning silently, and every task that
// reaches the policy counts in rejectedCount, never in taskCount.
//
// Not ported: REJ-12 (scheduled pool, invokeAll / invokeAny after shutdown):
// no scheduled pool or combinators yet.

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "AdmissionTestSupport.h"
#include "TestSupport.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/FaultInjection.h"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace coexec::test {
namespace {

/// The standard policies and a user callable.
enum class Kind { abort, callerRuns, discard, discardOldest, block, custom };

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::abort: return "abort";
    case Kind::callerRuns: return "callerRuns";
    case Kind::discard: return "discard";
    case Kind::discardOldest: return "discardOldest";
    case Kind::block: return "block";
    case Kind::custom: return "custom";
  }
  return "?";
}

/// What a custom handler saw. Written on the submitting thread; atomics so
/// that a handler run on another thread would be race-free too.
struct HandlerLog {
  std::atomic<int> calls{0};
  std::atomic<int> priority{-1};
  std::atomic<bool> hasFuture{false};
  std::atomic<bool> taskValid{false};
  std::atomic<const ThreadPoolExecutor*> pool{nullptr};
};

/// A handler that records its call and leaves the task where it is.
RejectionPolicy recordingHandler(HandlerLog& log) {
  return [&log](PendingTask& task, ThreadPoolExecutor& pool) {
    log.priority = task.priority();
    log.hasFuture = task.hasFuture();
    log.taskValid = task.valid();
    log.pool = &pool;
    ++log.calls;
  };
}

RejectionPolicy makePolicy(Kind kind, HandlerLog& log, std::chrono::nanoseconds blockTimeout) {
  switch (kind) {
    case Kind::abort: return RejectionPolicy::abort();
    case Kind::callerRuns: return RejectionPolicy::callerRuns();
    case Kind::discard: return RejectionPolicy::discard();
    case Kind::discardOldest: return RejectionPolicy::discardOldest();
    case Kind::block: return RejectionPolicy::block(blockTimeout);
    case Kind::custom: return recordingHandler(log);
  }
  return RejectionPolicy::abort();
}

/// Checks that `error` is a RejectedExecution whose snapshot and message show
/// the pool `name` in `state`.
void requireRejectedExecution(const std::exception_ptr& error, std::string_view name, PoolState state) {
  REQUIRE(holds<RejectedExecution>(error));
  const std::optional<PoolStats> snapshot = snapshotOf(error);
  REQUIRE(snapshot);
  CHECK(snapshot->name == name);
  CHECK(snapshot->state == state);
  const std::string message = whatOf(error);
  CHECK_THAT(message, Contains(std::string(name)));
  CHECK_THAT(message, Contains(std::string(toString(state))));
}

/// The expected outcome of one rejected submission, from the table in
/// RejectionPolicy.h: `shutDown` selects its right-hand column.
struct Rejected {
  Kind kind;
  bool shutDown;
  std::string_view poolName;
  PoolState state;
  const ThreadPoolExecutor* pool;
};

void checkRejected(const Rejected& expected, const Submission& s, const Probe& probe, const HandlerLog& log,
                   int handlerCallsBefore, int tag) {
  INFO("policy " << kindName(expected.kind) << ", " << formName(s.form) << ", pool " << toString(expected.state));
  const bool hasFuture = s.form != Form::execute;
  const Kind kind = expected.kind;
  const bool throwsRejected =
      kind == Kind::abort || kind == Kind::block || (expected.shutDown && kind == Kind::callerRuns && !hasFuture);
  const bool runs = kind == Kind::callerRuns && !expected.shutDown;

  // Who ran the task: nobody, or the submitting thread before the call returned.
  CHECK(probe.ran.load() == runs);
  if (runs) CHECK(probe.ranOnSubmitter.load());

  // What the submitter saw.
  if (throwsRejected) {
    requireRejectedExecution(s.thrown, expected.poolName, expected.state);
    return;
  }
  REQUIRE(s.thrown == nullptr);
  if (hasFuture) {
    REQUIRE(s.futureDone);  // nothing is left pending (Java leaves it so)
    if (runs) {
      CHECK(s.futureError == nullptr);
      if (s.form == Form::submitValue) CHECK(s.value == kProbeValue);
    } else if (kind == Kind::custom) {
      CHECK(holds<BrokenPromise>(s.futureError));  // the handler left it: destroyed unrun
    } else {
      requireRejectedExecution(s.futureError, expected.poolName, expected.state);
    }
  }
  // A custom handler is called exactly once, with this task and this pool.
  if (kind == Kind::custom) {
    CHECK(log.calls.load() == handlerCallsBefore + 1);
    CHECK(log.priority.load() == tag);
    CHECK(log.hasFuture.load() == hasFuture);
    CHECK(log.taskValid.load());
    CHECK(log.pool.load() == expected.pool);
  } else {
    CHECK(log.calls.load() == handlerCallsBefore);
  }
}

/// A pool of (1, 1, bounded(1)) saturated by two blocked tasks: one running,
/// one queued (saturatedSize = max + queue capacity = 2).
struct Saturated {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool;
  OpenOnExit release{gate};

  Saturated(std::string name, RejectionPolicy policy)
      : pool(poolOptions(std::move(name), 1, 1, WorkQueue::bounded(1), std::move(policy))) {
    pool.execute(blockingTask(gate, started));
    pool.execute(blockingTask(gate, started));
    REQUIRE(started.waitFor(1));
  }
};

// ---- REJ-01..04: a saturated pool ---------------------------------------------

TEST_CASE(
    "a saturated pool gives each rejected execute and submit to its policy and leaves its counts unchanged, Futures of "
    "unrun tasks settle (REJ-01..04, Java leaves them pending)",
    "[rejection][saturated]") {
  const Kind kind = GENERATE(Kind::abort, Kind::callerRuns, Kind::discard, Kind::block, Kind::custom);
  INFO("policy " << kindName(kind));
  constexpr auto kBlockTimeout = 20ms;
  HandlerLog log;
  Saturated sat("rejsat", makePolicy(kind, log, kBlockTimeout));
  ThreadPoolExecutor& pool = sat.pool;
  const Rejected expected{kind, false, "rejsat", PoolState::running, &pool};

  int tag = 0;
  for (const Form form : kForms) {
    Probe probe;
    const int callsBefore = log.calls.load();
    const auto start = std::chrono::steady_clock::now();
    const Submission s = submitProbe(pool, form, probe, ++tag);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    checkRejected(expected, s, probe, log, callsBefore, tag);
    if (kind == Kind::block) CHECK(elapsed >= kBlockTimeout);  // it waited for room first

    // REJ-04: rejected and caller-run tasks are not admitted tasks.
    const PoolStats stats = pool.stats();
    CHECK(stats.taskCount == 2);
    CHECK(stats.completedTaskCount == 0);
    CHECK(stats.queueSize == 1);
    CHECK(stats.rejectedCount == static_cast<std::uint64_t>(tag));
  }
  sat.gate.open();
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(pool.stats().completedTaskCount == 2);
  CHECK(pool.stats().taskCount == 2);
}

// ---- REJ-05/06/10: after shutdown and shutdownNow --------------------------

TEST_CASE(
    "after shutdown or shutdownNow every submission goes to the policy, before and after termination, callerRuns runs "
    "nothing (REJ-05, REJ-06)",
    "[rejection][shutdown]") {
  const Kind kind =
      GENERATE(Kind::abort, Kind::callerRuns, Kind::discard, Kind::discardOldest, Kind::block, Kind::custom);
  const bool now = GENERATE(false, true);
  INFO("policy " << kindName(kind) << (now ? ", shutdownNow()" : ", shutdown()"));
  HandlerLog log;
  Saturated sat("rejstop", makePolicy(kind, log, kLong));
  ThreadPoolExecutor& pool = sat.pool;

  std::vector<PendingTask> drained;
  if (now) {
    drained = pool.shutdownNow();
    CHECK(drained.size() == 1);  // the queued blocked task
  } else {
    pool.shutdown();
  }

  int tag = 0;
  const auto submitEveryForm = [&](PoolState state) {
    const Rejected expected{kind, true, "rejstop", state, &pool};
    for (const Form form : kForms) {
      Probe probe;
      const int callsBefore = log.calls.load();
      const auto start = std::chrono::steady_clock::now();
      const Submission s = submitProbe(pool, form, probe, ++tag);
      const auto elapsed = std::chrono::steady_clock::now() - start;
      checkRejected(expected, s, probe, log, callsBefore, tag);
      if (kind == Kind::block) CHECK(elapsed < kLong / 2);  // a shut-down pool never has room: no wait
      const PoolStats stats = pool.stats();
      CHECK(stats.rejectedCount == static_cast<std::uint64_t>(tag));
      CHECK(stats.taskCount == 2);
    }
  };

  submitEveryForm(now ? PoolState::stop : PoolState::shutdown);
  CHECK(pool.isShutdown());
  CHECK_FALSE(pool.isTerminated());                  // the blocked task still runs
  CHECK(pool.stats().queueSize == (now ? 0u : 1u));  // discardOldest evicted nothing

  sat.gate.open();
  REQUIRE(pool.awaitTermination(kLong));
  submitEveryForm(PoolState::terminated);

  // REJ-06: shutdown() ran the queued task; shutdownNow() returned it unrun.
  const PoolStats stats = pool.stats();
  CHECK(stats.completedTaskCount == (now ? 1u : 2u));
  CHECK(stats.discardedCount == 0);
  CHECK(stats.rejectedCount == 6);
}

TEST_CASE(
    "on an idle pool after shutdown, abort throws, callerRuns runs nothing, discard and discardOldest drop the task "
    "(REJ-10, Java's callerRuns returns silently)",
    "[rejection][shutdown]") {
  const Kind kind =
      GENERATE(Kind::abort, Kind::callerRuns, Kind::discard, Kind::discardOldest, Kind::block, Kind::custom);
  const bool now = GENERATE(false, true);
  INFO("policy " << kindName(kind) << (now ? ", shutdownNow()" : ", shutdown()"));
  HandlerLog log;
  ThreadPoolExecutor pool(poolOptions("rejidle", 1, 1, WorkQueue::bounded(1), makePolicy(kind, log, kLong)));
  if (now) {
    CHECK(pool.shutdownNow().empty());
  } else {
    pool.shutdown();
  }
  REQUIRE(pool.awaitTermination(kLong));

  const Rejected expected{kind, true, "rejidle", PoolState::terminated, &pool};
  int tag = 0;
  for (const Form form : kForms) {
    Probe probe;
    const int callsBefore = log.calls.load();
    const Submission s = submitProbe(pool, form, probe, ++tag);
    checkRejected(expected, s, probe, log, callsBefore, tag);
  }
  const PoolStats stats = pool.stats();
  CHECK(stats.rejectedCount == 3);
  CHECK(stats.taskCount == 0);
  CHECK(stats.poolSize == 0);
}

TEST_CASE(
    "after shutdown callerRuns does not run the task: execute throws RejectedExecution and submit's Future reports it "
    "(Java returns silently)",
    "[rejection][shutdown][callerRuns]") {
  ThreadPoolExecutor pool(poolOptions("rejcr", 1, 1, WorkQueue::bounded(1), RejectionPolicy::callerRuns()));
  pool.shutdown();
  std::atomic<bool> ran{false};
  const std::exception_ptr thrown = thrownBy([&] { pool.execute([&] { ran = true; }); });
  requireRejectedExecution(thrown, "rejcr", PoolState::terminated);
  CHECK_THAT(whatOf(thrown), Contains("TERMINATED"));

  Future<int> future = pool.submit([&] {
    ran = true;
    return 1;
  });
  REQUIRE(future.isDone());
  CHECK_THROWS_AS(future.get(), RejectedExecution);
  CHECK_FALSE(ran.load());
  CHECK(pool.stats().rejectedCount == 2);
}

// ---- REJ-07..09: what each standard policy does to the work ----------------

TEST_CASE(
    "callerRuns runs rejected tasks on the caller before execute returns, the queued one waits for the pool (REJ-07)",
    "[rejection][saturated][callerRuns]") {
  Gate gate;
  Counter started;
  std::array<std::atomic<bool>, 5> done{};
  std::array<std::atomic<bool>, 5> onCaller{};
  std::atomic<int> beforeExecuteCalls{0};
  ThreadPoolOptions options = poolOptions("rej07", 1, 1, WorkQueue::bounded(1), RejectionPolicy::callerRuns());
  options.hooks.beforeExecute = [&](const TaskInfo&) { ++beforeExecuteCalls; };
  ThreadPoolExecutor pool(std::move(options));
  OpenOnExit release(gate);
  pool.execute(blockingTask(gate, started));  // the long task
  REQUIRE(started.waitFor(1));

  const std::thread::id caller = std::this_thread::get_id();
  for (std::size_t i = 0; i < 5; ++i) {
    pool.execute([&, i, caller] {
      onCaller[i] = std::this_thread::get_id() == caller;
      done[i] = true;
    });
  }
  CHECK_FALSE(done[0].load());  // queued
  for (std::size_t i = 1; i < 5; ++i) {
    INFO("task " << i);
    CHECK(done[i].load());
    CHECK(onCaller[i].load());
  }
  PoolStats stats = pool.stats();
  CHECK(stats.taskCount == 2);
  CHECK(stats.rejectedCount == 4);
  CHECK(stats.completedTaskCount == 0);
  CHECK(beforeExecuteCalls.load() == 1);  // caller-run tasks skip the pool's hooks

  gate.open();
  REQUIRE(eventually([&] { return done[0].load(); }));
  CHECK_FALSE(onCaller[0].load());
  REQUIRE(eventually([&] { return pool.stats().completedTaskCount == 2; }));
  CHECK(beforeExecuteCalls.load() == 2);
}

TEST_CASE("a caller-run task's exception reaches the caller: execute throws it, submit's Future carries it",
          "[rejection][saturated][callerRuns]") {
  struct TaskError : std::runtime_error {
    TaskError() : std::runtime_error("the caller-run task failed") {}
  };
  std::atomic<int> uncaught{0};
  ThreadPoolOptions options = poolOptions("rejcrx", 1, 1, WorkQueue::bounded(1), RejectionPolicy::callerRuns());
  options.uncaughtExceptionHandler = [&](std::exception_ptr, const TaskInfo&) { ++uncaught; };
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(std::move(options));
  OpenOnExit release(gate);
  pool.execute(blockingTask(gate, started));
  pool.execute(blockingTask(gate, started));
  REQUIRE(started.waitFor(1));

  CHECK_THROWS_AS(pool.execute([] { throw TaskError(); }), TaskError);
  Future<int> future = pool.submit([]() -> int { throw TaskError(); });
  REQUIRE(future.isDone());
  CHECK_THROWS_AS(future.get(), TaskError);
  CHECK(uncaught.load() == 0);
  CHECK(pool.stats().rejectedCount == 2);
  CHECK(pool.stats().failedCount == 0);  // not admitted: no pool counter but rejectedCount
}

TEST_CASE(
    "discard drops rejected tasks and their Futures report RejectedExecution, the queued one still runs (REJ-08, Java "
    "leaves them pending)",
    "[rejection][saturated][discard]") {
  Gate gate;
  Counter started;
  std::array<std::atomic<bool>, 5> ran{};
  ThreadPoolExecutor pool(poolOptions("rej08", 1, 1, WorkQueue::bounded(1), RejectionPolicy::discard()));
  OpenOnExit release(gate);
  pool.execute(blockingTask(gate, started));
  REQUIRE(started.waitFor(1));

  std::vector<Future<void>> futures;
  for (std::size_t i = 0; i < 5; ++i)
    futures.push_back(pool.submit([&, i] { ran[i] = true; }));
  CHECK_FALSE(futures[0].isDone());  // queued behind the long task
  for (std::size_t i = 1; i < 5; ++i) {
    INFO("task " << i);
    REQUIRE(futures[i].isDone());
    CHECK_FALSE(futures[i].isCancelled());
    CHECK_THROWS_AS(futures[i].get(), RejectedExecution);
  }
  PoolStats stats = pool.stats();
  CHECK(stats.taskCount == 2);
  CHECK(stats.rejectedCount == 4);
  CHECK(stats.discardedCount == 0);  // discardedCount is for evicted admitted tasks

  gate.open();
  REQUIRE(futures[0].waitFor(kLong));
  CHECK_NOTHROW(futures[0].get());
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(ran[0].load());
  for (std::size_t i = 1; i < 5; ++i)
    CHECK_FALSE(ran[i].load());
  CHECK(pool.stats().completedTaskCount == 2);
}

TEST_CASE(
    "discardOldest evicts the queued task, whose Future reports RejectedExecution, and queues the new one (REJ-09, "
    "Java leaves the evicted one pending)",
    "[rejection][saturated][discardOldest]") {
  Gate gate;
  std::atomic<bool> r1Started{false};
  std::atomic<bool> r2Ran{false};
  std::atomic<bool> r3Ran{false};
  ThreadPoolExecutor pool(poolOptions("rej09", 1, 1, WorkQueue::bounded(1), RejectionPolicy::discardOldest()));
  OpenOnExit release(gate);
  Future<void> r1 = pool.submit([&] {
    r1Started = true;
    gate.wait();
  });
  Future<void> r2 = pool.submit([&] { r2Ran = true; });
  REQUIRE(eventually([&] { return r1Started.load(); }));

  Future<void> r3 = pool.submit([&] { r3Ran = true; });
  REQUIRE(r2.isDone());  // evicted
  CHECK_THROWS_AS(r2.get(), RejectedExecution);
  CHECK_FALSE(r3.isDone());
  PoolStats stats = pool.stats();
  CHECK(stats.queueSize == 1);
  CHECK(stats.discardedCount == 1);
  CHECK(stats.rejectedCount == 1);
  CHECK(stats.taskCount == 3);  // r3 was re-admitted after the eviction

  gate.open();
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  CHECK_NOTHROW(r1.get());
  CHECK_NOTHROW(r3.get());
  CHECK(r3Ran.load());
  CHECK_FALSE(r2Ran.load());
  stats = pool.stats();
  CHECK(stats.completedTaskCount == 2);
  // The ledger at quiescence: admitted = completed + discarded.
  CHECK(stats.failedCount == 0);
  CHECK(stats.cancelledCount == 0);
  CHECK(stats.drainedCount == 0);
  checkLedgerAddsUp(stats);
}

TEST_CASE("discardOldest on a priority queue evicts the task that would run next, the highest priority",
          "[rejection][saturated][discardOldest][queue]") {
  Gate gate;
  Counter started;
  std::mutex mutex;
  std::vector<char> order;
  const auto record = [&](char id) {
    return [&, id] {
      std::lock_guard lock(mutex);
      order.push_back(id);
    };
  };
  ThreadPoolExecutor pool(poolOptions("rejprio", 1, 1, WorkQueue::priority(2), RejectionPolicy::discardOldest()));
  OpenOnExit release(gate);
  pool.execute(blockingTask(gate, started));
  REQUIRE(started.waitFor(1));
  Future<void> a = pool.submit(record('a'), 1);
  Future<void> b = pool.submit(record('b'), 5);  // the head
  Future<void> c = pool.submit(record('c'), 3);  // full: evicts b
  REQUIRE(b.isDone());
  CHECK_THROWS_AS(b.get(), RejectedExecution);
  CHECK(pool.stats().discardedCount == 1);

  gate.open();
  REQUIRE(a.waitFor(kLong));
  REQUIRE(c.waitFor(kLong));
  std::lock_guard lock(mutex);
  CHECK(order == std::vector<char>{'c', 'a'});
}

// ---- block(timeout) ----------------------------------------------------------

/// A thread that executes one task on `pool` and records how that ended.
/// Declare it after the pool and before the pool's OpenOnExit guard: the gate
/// opens first, then the producer is joined, then the pool is destroyed.
class Producer {
 public:
  void start(ThreadPoolExecutor& pool, std::atomic<bool>& ran) {
    thread_ = std::jthread([this, &pool, &ran] {
      try {
        pool.execute([&ran] { ran = true; });
      } catch (...) {
        error_ = std::current_exception();
      }
      returned_ = true;
    });
  }
  [[nodiscard]] bool returned() const { return returned_.load(); }
  /// Joins the thread; then what execute() threw (null if it returned).
  std::exception_ptr join() {
    thread_.join();
    return error_;
  }

 private:
  std::atomic<bool> returned_{false};
  std::exception_ptr error_;  // written by the producer, read after join
  std::jthread thread_;
};

TEST_CASE(
    "block makes the producer wait for room (a queue slot, or an idle thread for a hand-off), then admits the task",
    "[rejection][saturated][block]") {
  struct Variant {
    const char* name;
    WorkQueue queue;
    std::size_t blockers;  // tasks that saturate a pool of one thread
  };
  const Variant v =
      GENERATE(Variant{"bounded(1)", WorkQueue::bounded(1), 2}, Variant{"synchronous", WorkQueue::synchronous(), 1});
  INFO(v.name);
  // Far longer than the wait below: a producer that only gets in when the
  // timeout expires fails the test.
  constexpr auto kBlockTimeout = kLong * 3;
  Gate gate;
  Counter started;
  std::atomic<bool> ran{false};
  ThreadPoolExecutor pool(poolOptions("rejblk", 1, 1, v.queue, RejectionPolicy::block(kBlockTimeout)));
  Producer producer;
  OpenOnExit release(gate);
  for (std::size_t i = 0; i < v.blockers; ++i)
    pool.execute(blockingTask(gate, started));
  REQUIRE(started.waitFor(1));
  producer.start(pool, ran);

  // The task reached the policy (counted on arrival) and the producer waits.
  REQUIRE(eventually([&] { return pool.stats().rejectedCount == 1; }));
  CHECK_FALSE(producer.returned());

  gate.open();
  REQUIRE(eventually([&] { return producer.returned(); }));
  CHECK(producer.join() == nullptr);
  REQUIRE(eventually([&] { return pool.stats().completedTaskCount == v.blockers + 1; }));
  CHECK(ran.load());
  const PoolStats stats = pool.stats();
  CHECK(stats.taskCount == v.blockers + 1);
  CHECK(stats.rejectedCount == 1);
}

TEST_CASE("a producer waiting under block is released with RejectedExecution when the pool shuts down",
          "[rejection][saturated][block][shutdown]") {
  const bool now = GENERATE(false, true);
  INFO((now ? "shutdownNow()" : "shutdown()"));
  Gate gate;
  Counter started;
  std::atomic<bool> ran{false};
  ThreadPoolExecutor pool(poolOptions("rejblks", 1, 1, WorkQueue::bounded(1), RejectionPolicy::block(kLong * 3)));
  Producer producer;
  OpenOnExit release(gate);
  pool.execute(blockingTask(gate, started));
  pool.execute(blockingTask(gate, started));
  REQUIRE(started.waitFor(1));
  producer.start(pool, ran);
  REQUIRE(eventually([&] { return pool.stats().rejectedCount == 1; }));

  if (now) {
    CHECK(pool.shutdownNow().size() == 1);
  } else {
    pool.shutdown();
  }
  REQUIRE(eventually([&] { return producer.returned(); }));  // without waiting for room or the timeout
  requireRejectedExecution(producer.join(), "rejblks", now ? PoolState::stop : PoolState::shutdown);
  gate.open();
  REQUIRE(pool.awaitTermination(kLong));
  CHECK_FALSE(ran.load());
  CHECK(pool.stats().taskCount == 2);
}

TEST_CASE("block gives up after its timeout and throws RejectedExecution, the task never runs",
          "[rejection][saturated][block]") {
  constexpr auto kTimeout = 50ms;
  Saturated sat("rejblkt", RejectionPolicy::block(kTimeout));
  std::atomic<bool> ran{false};
  const auto start = std::chrono::steady_clock::now();
  const std::exception_ptr thrown = thrownBy([&] { sat.pool.execute([&] { ran = true; }); });
  CHECK(std::chrono::steady_clock::now() - start >= kTimeout);
  requireRejectedExecution(thrown, "rejblkt", PoolState::running);
  const PoolStats stats = sat.pool.stats();
  CHECK(stats.taskCount == 2);
  CHECK(stats.rejectedCount == 1);
  sat.gate.open();
  sat.pool.shutdown();
  REQUIRE(sat.pool.awaitTermination(kLong));
  CHECK_FALSE(ran.load());
}

TEST_CASE("block with a negative timeout throws invalid_argument", "[rejection][construction][block]") {
  CHECK_THROWS_AS(RejectionPolicy::block(-1ms), std::invalid_argument);
  CHECK_THROWS_WITH(RejectionPolicy::block(-1ms),
                    "coexec::RejectionPolicy::block: timeout must be non-negative, got -1000000ns");
  CHECK(RejectionPolicy::block(0ms).name() == "block");
}

// ---- user handlers -----------------------------------------------------------

TEST_CASE(
    "a custom handler that leaves the task lets it be destroyed: its Future reports BrokenPromise (REJ-02, Java leaves "
    "it pending)",
    "[rejection][custom]") {
  HandlerLog log;
  Saturated sat("rejcust", recordingHandler(log));
  std::atomic<bool> ran{false};
  Future<int> future = sat.pool.submit(
      [&] {
        ran = true;
        return 1;
      },
      7);
  CHECK(log.calls.load() == 1);
  CHECK(log.priority.load() == 7);
  CHECK(log.hasFuture.load());
  CHECK(log.pool.load() == &sat.pool);
  REQUIRE(future.isDone());
  CHECK_FALSE(future.isCancelled());
  CHECK_THROWS_AS(future.get(), BrokenPromise);
  CHECK_FALSE(ran.load());
  CHECK(sat.pool.stats().rejectedCount == 1);
  CHECK(sat.pool.stats().taskCount == 2);
}

TEST_CASE("a custom handler may move the task away and run it later, outside the pool's counters",
          "[rejection][custom]") {
  std::vector<PendingTask> parked;
  Saturated sat("rejpark", [&parked](PendingTask& task, ThreadPoolExecutor&) { parked.push_back(std::move(task)); });
  Future<int> future = sat.pool.submit([] { return 5; });
  REQUIRE(parked.size() == 1);
  CHECK(parked[0].valid());
  CHECK(parked[0].hasFuture());
  CHECK_FALSE(future.isDone());  // still owned by the handler's holder

  parked[0].run();
  CHECK_FALSE(parked[0].valid());
  REQUIRE(future.isDone());
  CHECK(future.get() == 5);
  const PoolStats stats = sat.pool.stats();
  CHECK(stats.rejectedCount == 1);
  CHECK(stats.taskCount == 2);
  CHECK(stats.completedTaskCount == 0);
}

TEST_CASE("a custom handler may run the task in the submitting thread", "[rejection][custom]") {
  Saturated sat("rejrun", [](PendingTask& task, ThreadPoolExecutor&) { task.run(); });
  const std::thread::id caller = std::this_thread::get_id();
  Future<bool> future = sat.pool.submit([caller] { return std::this_thread::get_id() == caller; });
  REQUIRE(future.isDone());
  CHECK(future.get());
  CHECK(sat.pool.stats().rejectedCount == 1);
}

TEST_CASE("a custom handler's exception reaches the submitter of execute and of submit", "[rejection][custom]") {
  struct HandlerError : std::exception {
    const char* what() const noexcept override { return "the handler refuses"; }
  };
  Saturated sat("rejthrow", [](PendingTask&, ThreadPoolExecutor&) { throw HandlerError(); });
  std::atomic<bool> ran{false};
  CHECK_THROWS_AS(sat.pool.execute([&] { ran = true; }), HandlerError);
  CHECK_THROWS_AS((void)sat.pool.submit([&] { ran = true; }), HandlerError);
  CHECK_THROWS_AS((void)sat.pool.submit([&] {
    ran = true;
    return 1;
  }),
                  HandlerError);
  CHECK_FALSE(ran.load());
  const PoolStats stats = sat.pool.stats();
  CHECK(stats.rejectedCount == 3);
  CHECK(stats.taskCount == 2);
}

TEST_CASE("a custom handler runs without the pool's lock: it may call back into the pool", "[rejection][custom]") {
  std::atomic<std::size_t> queueSizeSeen{0};
  std::atomic<bool> shutdownSeen{true};
  Saturated sat("rejcb", [&](PendingTask&, ThreadPoolExecutor& pool) {
    queueSizeSeen = pool.stats().queueSize;
    shutdownSeen = pool.isShutdown();
  });
  sat.pool.execute([] {});
  CHECK(queueSizeSeen.load() == 1);
  CHECK_FALSE(shutdownSeen.load());
}

TEST_CASE("an empty policy callable throws invalid_argument (Java's null handler)", "[rejection][construction]") {
  CHECK_THROWS_AS(RejectionPolicy(RejectionPolicy::Handler{}), std::invalid_argument);
  void (*nullHandler)(PendingTask&, ThreadPoolExecutor&) = nullptr;
  CHECK_THROWS_AS(RejectionPolicy(nullHandler), std::invalid_argument);
  CHECK_THROWS_WITH(RejectionPolicy(nullHandler), "coexec::RejectionPolicy: the handler callable is empty");
}

TEST_CASE("policies report their names, a callable converts implicitly to a custom policy",
          "[rejection][construction]") {
  CHECK(RejectionPolicy::abort().name() == "abort");
  CHECK(RejectionPolicy::callerRuns().name() == "callerRuns");
  CHECK(RejectionPolicy::discard().name() == "discard");
  CHECK(RejectionPolicy::discardOldest().name() == "discardOldest");
  CHECK(RejectionPolicy::block(1s).name() == "block");
  ThreadPoolOptions options;
  CHECK(options.rejectionPolicy.name() == "abort");
  options.rejectionPolicy = [](PendingTask&, ThreadPoolExecutor&) {};
  CHECK(options.rejectionPolicy.name() == "custom");
}

// ---- REJ-11: calling the policies directly ------------------------------------

/// Hands out PendingTasks that never ran, each with its Future: a shut-down
/// pool whose policy parks every task it is given.
class PendingTasks {
 public:
  PendingTasks()
      : pool_(poolOptions("parking", 1, 1, WorkQueue::bounded(1),
                          [this](PendingTask& task, ThreadPoolExecutor&) { parked_.push_back(std::move(task)); })) {
    pool_.shutdown();
  }

  template <class F>
  std::pair<PendingTask, Future<std::invoke_result_t<F&>>> make(F f) {
    auto future = pool_.submit(std::move(f));
    REQUIRE(parked_.size() == 1);
    PendingTask task = std::move(parked_.back());
    parked_.clear();
    return {std::move(task), std::move(future)};
  }

 private:
  std::vector<PendingTask> parked_;
  ThreadPoolExecutor pool_;
};

TEST_CASE(
    "the standard policies called directly on an idle pool act on the task and change nothing in the pool (REJ-11)",
    "[rejection][direct]") {
  ThreadPoolExecutor pool(1, 1, 1s, WorkQueue::bounded(1));
  PendingTasks source;
  std::atomic<bool> ran{false};
  std::atomic<bool> onCaller{false};
  const std::thread::id caller = std::this_thread::get_id();
  auto made = source.make([&, caller] {
    onCaller = std::this_thread::get_id() == caller;
    ran = true;
    return 3;
  });
  PendingTask& task = made.first;
  Future<int>& future = made.second;
  REQUIRE(task.valid());

  SECTION("abort throws RejectedExecution with the pool's snapshot") {
    const std::exception_ptr thrown = thrownBy([&] { RejectionPolicy::abort()(task, pool); });
    requireRejectedExecution(thrown, "coexec", PoolState::running);
    // The reason is about this pool, which runs (the task came from a
    // shut-down one).
    CHECK_THAT(whatOf(thrown), !Contains("shut down"));
    CHECK_FALSE(ran.load());
  }
  SECTION("discard drops the task; its Future reports RejectedExecution") {
    RejectionPolicy::discard()(task, pool);
    CHECK_FALSE(ran.load());
    REQUIRE(future.isDone());
    CHECK_THROWS_AS(future.get(), RejectedExecution);
  }
  SECTION("callerRuns runs the task on the calling thread") {
    RejectionPolicy::callerRuns()(task, pool);
    CHECK(ran.load());
    CHECK(onCaller.load());
    REQUIRE(future.isDone());
    CHECK(future.get() == 3);
  }
  CHECK(pool.rejectionPolicy().name() == "abort");
  const PoolStats stats = pool.stats();
  CHECK(stats.taskCount == 0);
  CHECK(stats.queueSize == 0);
  CHECK(stats.rejectedCount == 0);
  CHECK(stats.completedTaskCount == 0);
  CHECK(stats.poolSize == 0);
}

// ---- the message, tryExecute --------------------------------------------------

TEST_CASE("RejectedExecution's message names the pool and its state, snapshot() returns its sizes as data",
          "[rejection][abort]") {
  Saturated sat("rejwhat", RejectionPolicy::abort());
  const std::exception_ptr thrown = thrownBy([&] { sat.pool.execute([] {}); });
  requireRejectedExecution(thrown, "rejwhat", PoolState::running);
  const PoolStats snapshot = *snapshotOf(thrown);
  CHECK(snapshot.poolSize == 1);
  CHECK(snapshot.corePoolSize == 1);
  CHECK(snapshot.maximumPoolSize == 1);
  CHECK(snapshot.activeCount == 1);
  CHECK(snapshot.queueSize == 1);
  CHECK(snapshot.queueCapacity == 1);
  CHECK(snapshot.completedTaskCount == 0);
  CHECK(snapshot.taskCount == 2);
  CHECK_THAT(whatOf(thrown), Contains("RUNNING"));

  sat.pool.shutdown();
  const std::exception_ptr afterShutdown = thrownBy([&] { sat.pool.execute([] {}); });
  requireRejectedExecution(afterShutdown, "rejwhat", PoolState::shutdown);
  CHECK_THAT(whatOf(afterShutdown), Contains("SHUTDOWN"));
}

TEST_CASE("tryExecute returns false on a saturated or shut-down pool without calling the policy or counting",
          "[rejection][tryExecute]") {
  HandlerLog log;
  Saturated sat("rejtry", recordingHandler(log));
  std::atomic<bool> ran{false};
  CHECK_FALSE(sat.pool.tryExecute([&] { ran = true; }));
  CHECK(log.calls.load() == 0);
  PoolStats stats = sat.pool.stats();
  CHECK(stats.rejectedCount == 0);
  CHECK(stats.taskCount == 2);

  sat.gate.open();
  REQUIRE(eventually([&] { return sat.pool.stats().completedTaskCount == 2; }));
  CHECK(sat.pool.tryExecute([&] { ran = true; }));
  REQUIRE(eventually([&] { return ran.load(); }));
  CHECK(sat.pool.stats().taskCount == 3);

  sat.pool.shutdown();
  CHECK_FALSE(sat.pool.tryExecute([] {}));
  CHECK(log.calls.load() == 0);
  CHECK(sat.pool.stats().rejectedCount == 0);
}

// ---- local queues (tasks the pool's own threads submitted) -----------------

TEST_CASE("block() producers are woken when a task leaves a local queue, not only the shared queue",
          "[policy][block][local]") {
  // The only place of bounded(1) is held by a subtask in the worker's local
  // queue. The worker then takes it and runs it, and it stays running: room
  // appeared, but no worker parks and the shared queue never changes. The
  // producer must be admitted long before its 60 s timeout.
  Gate parentGate;
  Gate childGate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(1), RejectionPolicy::block(60s));
  OpenOnExit releaseParent(parentGate);
  OpenOnExit releaseChild(childGate);
  Counter subtaskQueued;
  Counter childRunning;
  pool.execute([&] {
    pool.execute([&] {  // from the pool's thread: its local queue, the only place
      childRunning.arrive();
      childGate.wait();
    });
    subtaskQueued.arrive();
    parentGate.wait();
  });
  REQUIRE(subtaskQueued.waitFor(1));
  std::atomic<bool> admitted{false};
  std::thread producer([&] {
    pool.execute([] {});  // full: waits in block()
    admitted = true;
  });
  REQUIRE(eventually([&] { return pool.stats().rejectedCount == 1; }));  // it reached the policy
  parentGate.open();                                                     // the worker takes the subtask
  REQUIRE(childRunning.waitFor(1));
  const bool wokenInTime = eventually([&] { return admitted.load(); });
  childGate.open();
  producer.join();
  CHECK(wokenInTime);
}

TEST_CASE("discardOldest evicts the oldest local task when local queues hold every place",
          "[policy][discardOldest][local]") {
  // bounded(2), one thread: a task submits two subtasks (its local queue
  // holds both places), then a third. The oldest subtask must go, and the
  // newcomer be admitted.
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(2), RejectionPolicy::discardOldest());
  Future<std::vector<Future<int>>> parent = pool.submit([&pool] {
    std::vector<Future<int>> children;
    for (int i = 0; i < 3; ++i)
      children.push_back(pool.submit([i] { return i; }));
    return children;
  });
  std::vector<Future<int>> children = parent.get();
  REQUIRE(children.size() == 3);
  CHECK_THROWS_AS(children[0].get(), RejectedExecution);
  CHECK(children[1].get() == 1);
  CHECK(children[2].get() == 2);
  const PoolStats s = pool.stats();
  CHECK(s.discardedCount == 1);
  CHECK(s.rejectedCount == 1);
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("a policy applied by hand to an empty PendingTask throws invalid_argument and counts nothing",
          "[rejection][custom][bad-input]") {
  ThreadPoolExecutor pool(poolOptions("rejempty", 1, 1, WorkQueue::bounded(1)));
  PendingTask empty;
  for (const RejectionPolicy& policy : {RejectionPolicy::abort(), RejectionPolicy::callerRuns(),
                                        RejectionPolicy::discard(), RejectionPolicy::block(1ms)}) {
    INFO("policy " << policy.name());
    CHECK_THROWS_AS(policy(empty, pool), std::invalid_argument);
    CHECK_THROWS_WITH(policy(empty, pool), "coexec::RejectionPolicy: the task handle is empty");
  }
  CHECK(pool.stats().rejectedCount == 0);
}

TEST_CASE("a pool task submitting to its own saturated pool under block() waits out the timeout, then is rejected",
          "[rejection][saturated][block][bad-input]") {
  // The hazard of RejectionPolicy::block()'s note: the only thread is the
  // submitter, so nothing can make room before the timeout.
  static constexpr auto kTimeout = 20ms;
  ThreadPoolExecutor pool(poolOptions("rejself", 1, 1, WorkQueue::bounded(1), RejectionPolicy::block(kTimeout)));
  Future<std::string> outcome = pool.submit([&pool] {
    pool.execute([] {});  // holds the queue's one place until this task returns
    const auto start = std::chrono::steady_clock::now();
    try {
      pool.execute([] {});
    } catch (const RejectedExecution& e) {
      const bool waited = std::chrono::steady_clock::now() - start >= kTimeout;
      return std::string(waited ? "waited, then: " : "did not wait: ") + e.what();
    }
    return std::string("admitted");
  });
  REQUIRE(outcome.waitFor(kLong));
  const std::string what = outcome.get();
  CHECK_THAT(what, Catch::StartsWith("waited, then: coexec: task rejected: ") && Contains("pool 'rejself' RUNNING"));
  pool.close();
  const PoolStats stats = pool.stats();
  CHECK(stats.rejectedCount == 1);
  CHECK(stats.completedTaskCount == 2);  // the submitter and the task that held the place
}

/// An event outside any pool: a coroutine that awaits it (co_await
/// event.wait()) suspends, and resume() resumes it on the calling thread, as
/// foreign code would (an I/O completion).
class ForeignEvent {
 public:
  struct Awaiter {
    ForeignEvent* event;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> handle) {
      event->handle_ = handle;
      event->suspended_.arrive();  // touches no frame: the coroutine may be resumed from here on
    }
    void await_resume() const noexcept {}
  };
  [[nodiscard]] Awaiter wait() noexcept { return Awaiter{this}; }
  [[nodiscard]] bool waitSuspended() { return suspended_.waitFor(1); }
  /// Resumes the coroutine, once, if it has suspended.
  void resume() {
    if (suspended_.count() > 0 && !resumed_.exchange(true)) handle_.resume();
  }

 private:
  std::coroutine_handle<> handle_;
  Counter suspended_;
  std::atomic<bool> resumed_{false};
};

struct OutsideError : std::runtime_error {
  OutsideError() : std::runtime_error("the coroutine run outside the pool failed") {}
};

TEST_CASE("a coroutine task run by callerRuns or newThreadRuns holds the pool until its state is released",
          "[rejection][coroutine][lifecycle][reliability]") {
  // Caught by the model-based stress driver (a task state live after the pool
  // and every Future were gone): a caller-run coroutine that slept on the
  // process's timer service finished on that thread, whose reference to the
  // task outlived the pool, which did not wait for it. Here the coroutine
  // resumes on a thread of the test's, which is held in the uncaught handler
  // (the last thing the task's thread does before it drops the task).
  using coexec::detail::FaultInjection;
  if (!FaultInjection::available()) {
    WARN("this build has no fault points (COEXEC_FAULT_INJECTION=OFF): nothing to check");
    return;
  }
  const bool temporary = GENERATE(false, true);
  INFO((temporary ? "newThreadRuns" : "callerRuns"));
  Gate release;
  Counter reported;
  ForeignEvent event;
  std::atomic<std::int64_t> liveAtTermination{-1};
  const std::int64_t before = FaultInjection::liveFrameBlocks();
  {
    ThreadPoolOptions options =
        poolOptions("outside", 0, 1, WorkQueue::synchronous(),
                    temporary ? RejectionPolicy::newThreadRuns(1) : RejectionPolicy::callerRuns());
    // No worker can start: every task reaches the policy, and the pool has
    // no thread to wait for when it shuts down.
    options.threadFactory = [](const std::string&, const std::function<void()>&) -> std::thread {
      throw std::runtime_error("no threads here");
    };
    options.uncaughtExceptionHandler = [&](std::exception_ptr error, const TaskInfo&) {
      try {
        std::rethrow_exception(error);
      } catch (const OutsideError&) {
        reported.arrive();
        release.wait();
      } catch (...) {  // the factory's failures
      }
    };
    options.hooks.terminated = [&] { liveAtTermination = FaultInjection::liveFrameBlocks(); };
    ThreadPoolExecutor pool(std::move(options));
    // On every way out, before the pool's destructor: the coroutine ends (a
    // pool waits for it), its thread joined.
    struct Finish {
      Gate& gate;
      ForeignEvent& event;
      std::thread resumer;
      ~Finish() {
        gate.open();
        if (resumer.joinable()) resumer.join();
        event.resume();  // if the thread never started
      }
    } finish{release, event, {}};
    pool.execute([&event]() -> Task<void> {
      co_await event.wait();
      throw OutsideError();
    });
    REQUIRE(event.waitSuspended());
    if (temporary) REQUIRE(eventually([&] { return pool.dumpThreads().temporaryThreads == 0; }));
    finish.resumer = std::thread([&event] { event.resume(); });  // finishes there, held in the handler
    REQUIRE(reported.waitFor(1));
    pool.shutdown();  // no thread, nothing queued: only the coroutine's task may hold the pool
    CHECK_FALSE(pool.isTerminated());
    release.open();
    REQUIRE(pool.awaitTermination(kLong));
    CHECK(liveAtTermination.load() == before);  // the task's state went before the pool terminated
  }
  CHECK(FaultInjection::liveFrameBlocks() == before);
}

}  // namespace
}  // namespace coexec::test
