// SPDX-License-Identifier: BSL-1.0
// The built-in rejection policies on a saturated and on a shut-down pool (REJ-01..10): what the
// submitter sees, what each policy does to the work, RejectedExecution's message.
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
//
// block()'s own behaviour is in RejectionPolicyBlockTest.cpp; custom handlers,
// the policies called by hand (REJ-11), a coroutine task run by callerRuns or
// newThreadRuns, and tryExecute in RejectionPolicyCustomTest.cpp.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "AdmissionTestSupport.h"
#include "RejectionPolicyTestSupport.h"
#include "TestSupport.h"
#include "coexec/ThreadPoolExecutor.h"

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

// ---- the message ----------------------------------------------------------------

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

// ---- local queues (tasks the pool's own threads submitted) -----------------

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

}  // namespace
}  // namespace coexec::test
