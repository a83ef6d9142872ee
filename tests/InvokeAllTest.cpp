// SPDX-License-Identifier: BSL-1.0
#include "coexec/ThreadPoolExecutor.h"

// co_await pool.invokeAll(tasks) / invokeAny(tasks), with and without a
// timeout: results in input order, fail-fast, the first success, AllFailed,
// timeouts on a ManualClock, empty input, shutdown and refused admission,
// and cancellation flowing from the awaiting coroutine's task into the
// children. Ordering by gates and counters; no sleeps decide an outcome.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "Assertions.h"

#include "CombinatorTestSupport.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/InvokeAll.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"

using coexec::AllFailed;
using coexec::CancellationToken;
using coexec::Future;
using coexec::ManualClock;
using coexec::OperationCancelled;
using coexec::RejectedExecution;
using coexec::RejectionPolicy;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::TimeoutError;
using coexec::WorkQueue;
using coexec::test::Children;
using coexec::test::Counter;
using coexec::test::currentTag;
using coexec::test::eventually;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::manualClockPool;
using coexec::test::messageOf;
using coexec::test::OpenOnExit;
using coexec::test::taggedPool;
using coexec::test::throwsA;
using coexec::test::timedOut;
using namespace std::chrono_literals;

namespace {

/// The set-up of the timeout tests: a `driver` pool (one thread) for the
/// awaiting coroutine and a `pool` of two threads on `clock`, a ManualClock;
/// `children.release` opens before the pools go.
struct ManualClockSetup {
  Children children;
  ManualClock clock;
  ThreadPoolExecutor driver{taggedPool("driver", 1, 1, WorkQueue::bounded(8))};
  ThreadPoolExecutor pool{manualClockPool("inv", clock)};
  OpenOnExit guard{children.release};
};

using IntTasks = std::vector<std::function<int()>>;

Task<std::vector<int>> invokeAllOf(ThreadPoolExecutor& pool, IntTasks& tasks) {
  co_return co_await pool.invokeAll(tasks);
}

template <class Range>
Task<int> invokeAnyOf(ThreadPoolExecutor& pool, Range& tasks) {
  co_return co_await pool.invokeAny(tasks);
}

Task<int> square(int i) { co_return i* i; }

/// Returns once the one thread of `driver` is free: a coroutine it runs has
/// suspended (for invokeAll: every task was handed over and the timer armed).
void waitUntilSuspended(ThreadPoolExecutor& driver) {
  driver.submit([] {}).get();
}

/// A callable that can only be moved.
struct MoveOnlyTask {
  std::unique_ptr<int> value;
  int operator()() const { return *value; }
};

}  // namespace

TEST_CASE("invokeAll returns every result in input order, whatever the order they finish in", "[invokeAll]") {
  Counter finished;
  ThreadPoolExecutor pool(taggedPool("inv", 2, 2, WorkQueue::bounded(256)));
  constexpr int n = 20;
  IntTasks tasks;
  // Task 0 finishes last: it waits for all the others (which the second
  // thread runs meanwhile).
  tasks.push_back([&finished] {
    REQUIRE(finished.waitFor(n - 1));
    return 0;
  });
  for (int i = 1; i < n; ++i) {
    tasks.push_back([&finished, i] {
      finished.arrive();
      return i * 10;
    });
  }
  const std::vector<int> results = syncWait(invokeAllOf(pool, tasks));
  REQUIRE(results.size() == n);
  for (int i = 0; i < n; ++i)
    CHECK(results[static_cast<std::size_t>(i)] == i * 10);
  CHECK(tasks.size() == n);  // an lvalue range of callables is copied, not taken
  CHECK(tasks[1]() == 10);
}

TEST_CASE("invokeAll takes Tasks, callables returning Tasks and callables taking a token, from any forward range",
          "[invokeAll]") {
  ThreadPoolExecutor pool(taggedPool("inv", 2, 2, WorkQueue::bounded(256)));
  SECTION("a vector of Task<int>, taken over") {
    std::vector<Task<int>> tasks;
    for (int i = 0; i < 8; ++i)
      tasks.push_back(square(i));
    const auto run = [&]() -> Task<std::vector<int>> { co_return co_await pool.invokeAll(tasks); };
    const std::vector<int> results = syncWait(run());
    CHECK(results == std::vector<int>{0, 1, 4, 9, 16, 25, 36, 49});
    for (const Task<int>& task : tasks)
      CHECK_FALSE(task.valid());  // consumed
  }
  SECTION("a list of callables returning Task<int>") {
    std::list<std::function<Task<int>()>> tasks;
    for (int i = 0; i < 5; ++i)
      tasks.emplace_back([i] { return square(i + 1); });
    const auto run = [&]() -> Task<std::vector<int>> { co_return co_await pool.invokeAll(tasks); };
    CHECK(syncWait(run()) == std::vector<int>{1, 4, 9, 16, 25});
  }
  SECTION("an array of callables taking a CancellationToken") {
    const auto child = [](CancellationToken token) { return token.canBeCancelled() ? 1 : 0; };
    std::array<decltype(child), 3> tasks{child, child, child};
    const auto run = [&]() -> Task<std::vector<int>> { co_return co_await pool.invokeAll(tasks); };
    CHECK(syncWait(run()) == std::vector<int>{1, 1, 1});
  }
  SECTION("an rvalue range of move-only callables, through a named awaitable") {
    std::vector<MoveOnlyTask> tasks;
    for (int i = 0; i < 4; ++i)
      tasks.push_back(MoveOnlyTask{std::make_unique<int>(i)});
    const auto run = [&]() -> Task<std::vector<int>> {
      auto all = pool.invokeAll(std::move(tasks));  // the named form: builds on every compiler
      co_return co_await all;
    };
    CHECK(syncWait(run()) == std::vector<int>{0, 1, 2, 3});
  }
  SECTION("an rvalue range of move-only callables awaited as a temporary, on every compiler (GCC 12 included)") {
    std::vector<MoveOnlyTask> tasks;
    tasks.push_back(MoveOnlyTask{std::make_unique<int>(5)});
    const auto run = [&]() -> Task<std::vector<int>> { co_return co_await pool.invokeAll(std::move(tasks)); };
    CHECK(syncWait(run()) == std::vector<int>{5});
  }
}

TEST_CASE("invokeAll of void tasks returns once every task has run", "[invokeAll]") {
  std::atomic<int> ran{0};
  ThreadPoolExecutor pool(taggedPool("inv", 2, 2, WorkQueue::bounded(256)));
  std::vector<std::function<void()>> tasks(16, [&ran] { ran.fetch_add(1); });
  const auto run = [&]() -> Task<void> { co_await pool.invokeAll(tasks); };
  syncWait(run());
  CHECK(ran.load() == 16);  // no wait: every task has settled when invokeAll returns
}

TEST_CASE("invokeAll of an empty range returns an empty vector at once, invokeAny throws std::invalid_argument",
          "[invokeAll][invokeAny]") {
  ThreadPoolExecutor pool(taggedPool("inv", 1, 1, WorkQueue::bounded(4)));
  IntTasks none;
  CHECK(syncWait(invokeAllOf(pool, none)).empty());
  CHECK(throwsA<std::invalid_argument>([&] { syncWait(invokeAnyOf(pool, none)); }));
  CHECK(pool.stats().taskCount == 0);
}

TEST_CASE("the first failure cancels the other tasks and is rethrown once all have settled", "[invokeAll][failure]") {
  Children children;
  std::atomic<int> lateRan{0};
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("inv", 2, 2, WorkQueue::bounded(256)));
  OpenOnExit guard(children.release);
  std::vector<std::function<int(CancellationToken)>> tasks;
  tasks.push_back(children.cooperative());  // runs on thread 1 until cancelled
  tasks.push_back([&children, &driver](CancellationToken) -> int {
    REQUIRE(children.started.waitFor(1));  // the cooperative one runs
    // The driver's one thread runs this only once the awaiting coroutine has
    // suspended, that is, once invokeAll has handed every task over.
    driver.submit([] {}).get();
    throw std::runtime_error("task 1 failed");
  });
  for (int i = 0; i < 8; ++i) {
    tasks.push_back([&lateRan](CancellationToken) {  // queued behind the two: cancelled before they start
      lateRan.fetch_add(1);
      return 0;
    });
  }
  Future<std::string> outer = driver.submit([&]() -> Task<std::string> {
    try {
      (void)co_await pool.invokeAll(tasks);
    } catch (const std::runtime_error& e) {
      co_return std::string(e.what());
    }
    co_return std::string("no failure");
  });
  REQUIRE(children.cancelled.waitFor(1));  // the failure cancelled the running one...
  CHECK_FALSE(outer.isDone());             // ...and invokeAll waits for it to settle
  children.release.open();
  CHECK(outer.get() == "task 1 failed");
  CHECK(children.returned.count() == 1);
  CHECK(lateRan.load() == 0);
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  const coexec::PoolStats stats = pool.stats();
  CHECK(stats.taskCount == 10);
  CHECK(stats.failedCount == 1);
  CHECK(stats.cancelledCount == 9);  // the cooperative one threw OperationCancelled, the rest never started
  coexec::test::checkLedgerAddsUp(stats);
}

TEST_CASE("invokeAll resumes the awaiting coroutine on the executor it was running on", "[invokeAll][resume]") {
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("inv", 2, 2, WorkQueue::bounded(256)));
  IntTasks tasks(10, [] { return currentTag == "inv" ? 1 : 0; });
  Future<std::string> where = driver.submit([&]() -> Task<std::string> {
    const std::vector<int> ran = co_await pool.invokeAll(tasks);
    for (int onPool : ran)
      if (onPool != 1) co_return std::string("a task ran off the pool");
    co_return std::string(currentTag);
  });
  CHECK(where.get() == "driver");
}

TEST_CASE_METHOD(ManualClockSetup,
                 "invokeAll with a timeout throws TimeoutError right after the deadline on a ManualClock, once the "
                 "cancelled tasks have settled",
                 "[invokeAll][timeout]") {
  std::vector<std::function<int(CancellationToken)>> tasks(2, children.cooperative());
  tasks.push_back([](CancellationToken) { return 7; });  // finishes before the deadline
  Future<std::string> outer = driver.submit([&]() -> Task<std::string> {
    try {
      (void)co_await pool.invokeAll(tasks, 1s);
    } catch (const TimeoutError& e) {
      co_return std::string(e.what());
    }
    co_return std::string("no timeout");
  });
  REQUIRE(children.started.waitFor(2));
  waitUntilSuspended(driver);
  clock.advance(999ms);
  CHECK(children.cancelled.count() == 0);
  CHECK_FALSE(outer.isDone());
  clock.advance(1ms);  // the deadline: both running tasks have their tokens cancelled inside advance()
  REQUIRE(children.cancelled.waitFor(2));
  CHECK_FALSE(outer.isDone());  // they have not returned yet
  children.release.open();
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(outer.waitFor(kLong));  // resumes as soon as they have settled
  CHECK(std::chrono::steady_clock::now() - start < kLong);
  CHECK(outer.get().find("timeout of 1000ms") != std::string::npos);
}

TEST_CASE(
    "invokeAll's TimeoutError comes right after the advance() that reaches the deadline when the tasks stop at "
    "once",
    "[invokeAll][timeout]") {
  Counter started;
  ManualClock clock;
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(manualClockPool("inv", clock));
  std::vector<std::function<int(CancellationToken)>> tasks(2, [&started](CancellationToken token) -> int {
    started.arrive();
    coexec::test::waitForCancellation(token);
    throw OperationCancelled();  // stops as soon as it is told
  });
  Future<bool> outer = driver.submit([&]() -> Task<bool> {
    auto awaitable = pool.invokeAll(tasks, 30s);
    co_return co_await timedOut(awaitable);
  });
  REQUIRE(started.waitFor(2));
  waitUntilSuspended(driver);
  clock.advance(29s);
  CHECK_FALSE(outer.isDone());
  const auto advanced = std::chrono::steady_clock::now();
  clock.advance(1s);
  // No real time has to pass: the error comes as soon as the pool threads
  // have returned from the cancelled tasks (the bound only keeps a bug from
  // hanging the test, and is generous for a loaded machine).
  REQUIRE(outer.waitFor(kLong));
  CHECK(std::chrono::steady_clock::now() - advanced < kLong / 2);
  CHECK(outer.get());
}

TEST_CASE_METHOD(ManualClockSetup, "an uncooperative task delays invokeAll's TimeoutError until it returns",
                 "[invokeAll][timeout]") {
  IntTasks tasks{children.uncooperative(1)};
  Future<bool> outer = driver.submit([&]() -> Task<bool> {
    auto awaitable = pool.invokeAll(tasks, 10ms);
    co_return co_await timedOut(awaitable);
  });
  REQUIRE(children.started.waitFor(1));
  waitUntilSuspended(driver);
  clock.advance(1s);
  CHECK_FALSE(outer.isDone());
  children.release.open();
  CHECK(outer.get());  // the task's value is discarded: it was cancelled at the deadline
}

TEST_CASE("invokeAll with a timeout returns the results when every task finishes first", "[invokeAll][timeout]") {
  ManualClock clock;
  ThreadPoolExecutor pool(manualClockPool("inv", clock));
  IntTasks tasks(4, [] { return 3; });
  const auto run = [&]() -> Task<std::vector<int>> { co_return co_await pool.invokeAll(tasks, 1h); };
  CHECK(syncWait(run()) == std::vector<int>(4, 3));
  CHECK(clock.now() == ManualClock::time_point{});  // no time passed: the timer was removed, not fired
}

TEST_CASE("invokeAll and invokeAny with a zero timeout start nothing and throw TimeoutError", "[invokeAll][timeout]") {
  std::atomic<int> ran{0};
  ThreadPoolExecutor pool(taggedPool("inv", 1, 1, WorkQueue::bounded(4)));
  IntTasks tasks(3, [&ran] { return ran.fetch_add(1); });
  const auto all = [&]() -> Task<void> { (void)co_await pool.invokeAll(tasks, 0ms); };
  const auto any = [&]() -> Task<void> { (void)co_await pool.invokeAny(tasks, -1s); };
  CHECK(throwsA<TimeoutError>([&] { syncWait(all()); }));
  CHECK(throwsA<TimeoutError>([&] { syncWait(any()); }));
  CHECK(ran.load() == 0);
  CHECK(pool.stats().taskCount == 0);
}

TEST_CASE("invokeAll after shutdown throws RejectedExecution, starts nothing and counts the tasks it refused",
          "[invokeAll][shutdown]") {
  std::atomic<int> ran{0};
  const auto policy = GENERATE(as<std::string>{}, "abort", "discard", "callerRuns");
  RejectionPolicy rejection = policy == "abort"     ? RejectionPolicy::abort()
                              : policy == "discard" ? RejectionPolicy::discard()
                                                    : RejectionPolicy::callerRuns();
  INFO("rejection policy " << policy);
  ThreadPoolExecutor pool(taggedPool("inv", 2, 2, WorkQueue::bounded(16), rejection));
  pool.shutdown();
  IntTasks tasks(5, [&ran] { return ran.fetch_add(1); });
  CHECK(throwsA<RejectedExecution>([&] { syncWait(invokeAllOf(pool, tasks)); }));
  CHECK(throwsA<RejectedExecution>([&] { syncWait(invokeAnyOf(pool, tasks)); }));
  CHECK(ran.load() == 0);
  const coexec::PoolStats stats = pool.stats();
  CHECK(stats.taskCount == 0);
  CHECK(stats.rejectedCount == 10);  // each refused task counts, whatever the policy
}

TEST_CASE("admission refusing a task midway cancels and awaits the tasks already started, then rethrows",
          "[invokeAll][admission]") {
  Children children;
  std::atomic<int> queuedRan{0};
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  // One thread and a queue of one: the third task is refused, by abort()
  // once the first one runs (else it would be cancelled before it started).
  const RejectionPolicy abortOnceStarted = [&children](coexec::PendingTask& task, ThreadPoolExecutor& on) {
    if (!children.started.waitFor(1)) coexec::test::detail::failTimedOutWait("the first task did not start");
    RejectionPolicy::abort()(task, on);
  };
  ThreadPoolExecutor pool(taggedPool("inv", 1, 1, WorkQueue::bounded(1), abortOnceStarted));
  OpenOnExit guard(children.release);
  std::vector<std::function<int(CancellationToken)>> tasks;
  tasks.push_back([&children](CancellationToken token) {
    children.started.arrive();
    coexec::test::waitForCancellation(token);
    children.cancelled.arrive();
    children.release.wait();
    return 1;  // ignores the cancellation's verdict: its value is dropped
  });
  for (int i = 0; i < 4; ++i) {
    tasks.push_back([&queuedRan](CancellationToken) { return queuedRan.fetch_add(1); });
  }
  Future<std::string> outer = driver.submit([&]() -> Task<std::string> {
    try {
      (void)co_await pool.invokeAll(tasks);
    } catch (const RejectedExecution&) {
      co_return std::string("rejected");
    }
    co_return std::string("admitted");
  });
  REQUIRE(children.cancelled.waitFor(1));
  CHECK_FALSE(outer.isDone());  // the started task has not settled
  children.release.open();
  CHECK(outer.get() == "rejected");
  CHECK(queuedRan.load() == 0);
  CHECK(pool.stats().rejectedCount == 1);
}

TEST_CASE(
    "cancelling the awaiting coroutine's task cancels invokeAll's children, its Future settles only after they "
    "have",
    "[invokeAll][cancel]") {
  Children children;
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("inv", 2, 2, WorkQueue::bounded(256)));
  OpenOnExit guard(children.release);
  std::vector<std::function<int(CancellationToken)>> tasks(2, children.cooperative());
  std::atomic<bool> reachedEnd{false};
  Future<int> outer = driver.submit([&]() -> Task<int> {
    const std::vector<int> results = co_await pool.invokeAll(tasks);
    reachedEnd = true;
    co_return static_cast<int>(results.size());
  });
  REQUIRE(children.started.waitFor(2));
  CHECK(outer.cancel());
  REQUIRE(children.cancelled.waitFor(2));  // both children saw their tokens cancelled
  CHECK_FALSE(outer.isDone());             // structured: not before they settle
  children.release.open();
  CHECK(throwsA<OperationCancelled>([&] { (void)outer.get(); }));
  CHECK(children.returned.count() == 2);
  CHECK_FALSE(reachedEnd.load());
}

TEST_CASE("invokeAll in a coroutine whose task is already cancelled starts nothing", "[invokeAll][cancel]") {
  Gate proceed;
  std::atomic<int> ran{0};
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("inv", 1, 1, WorkQueue::bounded(8)));
  OpenOnExit guard(proceed);
  IntTasks tasks(3, [&ran] { return ran.fetch_add(1); });
  Counter waiting;
  Future<int> outer = driver.submit([&](CancellationToken token) -> Task<int> {
    waiting.arrive();
    proceed.wait();  // the test cancels meanwhile
    if (!token.isCancellationRequested()) co_return -1;
    const std::vector<int> results = co_await pool.invokeAll(tasks);
    co_return static_cast<int>(results.size());
  });
  REQUIRE(waiting.waitFor(1));
  CHECK(outer.cancel());
  proceed.open();
  CHECK(throwsA<OperationCancelled>([&] { (void)outer.get(); }));
  CHECK(ran.load() == 0);
  CHECK(pool.stats().taskCount == 0);
}

TEST_CASE("invalid input is refused before any task starts", "[invokeAll][input]") {
  std::atomic<int> ran{0};
  ThreadPoolExecutor pool(taggedPool("inv", 1, 1, WorkQueue::bounded(8)));
  SECTION("an empty std::function") {
    IntTasks tasks{[&ran] { return ran.fetch_add(1); }, std::function<int()>()};
    CHECK(throwsA<std::invalid_argument>([&] { syncWait(invokeAllOf(pool, tasks)); }));
  }
  SECTION("a Task already started") {
    std::vector<Task<int>> tasks;
    tasks.push_back(square(2));
    tasks.push_back(square(3));
    const auto awaitSecond = [&]() -> Task<int> { co_return co_await tasks[1]; };  // starts it, leaves it in place
    CHECK(syncWait(awaitSecond()) == 9);
    const auto run = [&]() -> Task<void> { (void)co_await pool.invokeAll(tasks); };
    CHECK(throwsA<std::logic_error>([&] { syncWait(run()); }));
    CHECK(tasks[0].valid());  // nothing was taken
  }
  SECTION("an empty Task") {
    std::vector<Task<int>> tasks(2);
    const auto run = [&]() -> Task<void> { (void)co_await pool.invokeAll(tasks); };
    CHECK(throwsA<std::invalid_argument>([&] { syncWait(run()); }));
  }
  CHECK(ran.load() == 0);
}

TEST_CASE("a named invokeAll awaitable is awaited once", "[invokeAll]") {
  ThreadPoolExecutor pool(taggedPool("inv", 1, 1, WorkQueue::bounded(8)));
  IntTasks tasks(2, [] { return 1; });
  const auto run = [&]() -> Task<int> {
    auto all = pool.invokeAll(tasks);
    const std::vector<int> first = co_await all;
    try {
      (void)co_await all;
    } catch (const std::logic_error&) {
      co_return static_cast<int>(first.size());
    }
    co_return -1;
  };
  CHECK(syncWait(run()) == 2);
}

TEST_CASE("invokeAny returns the first success, the slow tasks are cancelled and awaited first", "[invokeAny]") {
  Children children;
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("inv", 3, 3, WorkQueue::bounded(256)));
  OpenOnExit guard(children.release);
  std::vector<std::function<int(CancellationToken)>> tasks;
  tasks.push_back(children.cooperative());
  tasks.push_back([](CancellationToken) -> int { throw std::runtime_error("fast failure"); });
  tasks.push_back(children.cooperative());
  tasks.push_back([&children](CancellationToken) {
    REQUIRE(children.started.waitFor(2));  // both slow ones run
    return 42;
  });
  Future<int> outer = driver.submit([&]() -> Task<int> { co_return co_await pool.invokeAny(tasks); });
  REQUIRE(children.cancelled.waitFor(2));
  CHECK_FALSE(outer.isDone());
  children.release.open();
  CHECK(outer.get() == 42);
  CHECK(children.returned.count() == 2);
}

TEST_CASE("invokeAny throws AllFailed with every task's exception in input order", "[invokeAny]") {
  ThreadPoolExecutor pool(taggedPool("inv", 2, 2, WorkQueue::bounded(256)));
  Counter failed;
  IntTasks tasks;
  constexpr int n = 6;
  for (int i = 0; i < n; ++i) {
    tasks.push_back([i, &failed]() -> int {
      // In reverse: task i fails after tasks i+1.. have (the order of the
      // errors must not depend on the order of the failures).
      if (i == 0) REQUIRE(failed.waitFor(n - 1));
      failed.arrive();
      throw std::runtime_error("failure " + std::to_string(i));
    });
  }
  try {
    (void)syncWait(invokeAnyOf(pool, tasks));
    FAIL("invokeAny returned");
  } catch (const AllFailed& e) {
    REQUIRE(e.errors().size() == n);
    for (int i = 0; i < n; ++i)
      CHECK(messageOf(e.errors()[static_cast<std::size_t>(i)]) == "failure " + std::to_string(i));
    CHECK(std::string(e.what()).find("every one of the 6 tasks failed") != std::string::npos);
    CHECK(std::string(e.what()).find("failure 0") != std::string::npos);
  }
}

TEST_CASE_METHOD(ManualClockSetup, "invokeAny with a timeout throws TimeoutError once the cancelled tasks have settled",
                 "[invokeAny][timeout]") {
  std::vector<std::function<int(CancellationToken)>> tasks(2, children.cooperative());
  Future<bool> outer = driver.submit([&]() -> Task<bool> {
    auto awaitable = pool.invokeAny(tasks, 5s);
    co_return co_await timedOut(awaitable);
  });
  REQUIRE(children.started.waitFor(2));
  waitUntilSuspended(driver);
  clock.advance(5s);
  REQUIRE(children.cancelled.waitFor(2));
  CHECK_FALSE(outer.isDone());
  children.release.open();
  CHECK(outer.get());
}

TEST_CASE("invokeAny whose task is cancelled while it waits throws OperationCancelled after the tasks settle",
          "[invokeAny][cancel]") {
  Children children;
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("inv", 2, 2, WorkQueue::bounded(256)));
  OpenOnExit guard(children.release);
  std::vector<std::function<int(CancellationToken)>> tasks(2, children.cooperative());
  Future<int> outer = driver.submit([&]() -> Task<int> { co_return co_await pool.invokeAny(tasks); });
  REQUIRE(children.started.waitFor(2));
  CHECK(outer.cancel());
  REQUIRE(children.cancelled.waitFor(2));
  CHECK_FALSE(outer.isDone());
  children.release.open();
  CHECK(throwsA<OperationCancelled>([&] { (void)outer.get(); }));
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("invokeAll's and invokeAny's refusals say what was wrong, and nothing starts",
          "[invokeAll][invokeAny][input][bad-input]") {
  std::atomic<int> ran{0};
  ThreadPoolExecutor pool(taggedPool("inv", 1, 1, WorkQueue::bounded(8)));
  const auto whatOf = [](auto&& run) -> std::string {
    try {
      syncWait(run());
    } catch (const std::exception& e) {
      return e.what();
    }
    return "no exception";
  };
  IntTasks none;
  CHECK(whatOf([&] { return invokeAnyOf(pool, none); }) ==
        "coexec::ThreadPoolExecutor::invokeAny: the range of tasks is empty, so there is no result to return");
  IntTasks withEmpty{[&ran] { return ran.fetch_add(1); }, std::function<int()>()};
  CHECK(whatOf([&] { return invokeAllOf(pool, withEmpty); }) ==
        "coexec::ThreadPoolExecutor::invokeAll: the task is empty (an empty std::function or a null pointer)");
  CHECK(whatOf([&] { return invokeAnyOf(pool, withEmpty); }) ==
        "coexec::ThreadPoolExecutor::invokeAny: the task is empty (an empty std::function or a null pointer)");
  std::vector<Task<int>> emptyTasks(1);
  CHECK_THAT(whatOf([&]() -> Task<int> { co_return co_await pool.invokeAny(emptyTasks); }),
             Catch::StartsWith("coexec::ThreadPoolExecutor::invokeAny: the Task is empty"));
  IntTasks tasks(2, [&ran] { return ran.fetch_add(1); });
  CHECK(whatOf([&]() -> Task<void> { (void)co_await pool.invokeAll(tasks, 0ms); }) ==
        "coexec::ThreadPoolExecutor::invokeAll: the timeout of 0ms passed before every task finished; the unfinished "
        "ones were cancelled and have settled");
  CHECK(ran.load() == 0);
  CHECK(pool.stats().taskCount == 0);
}

TEST_CASE("a named invokeAny awaitable awaited twice throws std::logic_error saying it runs its tasks once",
          "[invokeAny][bad-input]") {
  ThreadPoolExecutor pool(taggedPool("inv", 1, 1, WorkQueue::bounded(8)));
  IntTasks tasks(2, [] { return 1; });
  std::uint64_t afterFirst = 0;
  const std::string message = syncWait([&]() -> Task<std::string> {
    auto any = pool.invokeAny(tasks);
    (void)co_await any;
    // 1 or 2: invokeAny starts no more tasks once one has succeeded, and the
    // first may succeed before the second is submitted.
    afterFirst = pool.stats().taskCount;
    try {
      (void)co_await any;
    } catch (const std::logic_error& e) {
      co_return e.what();
    }
    co_return "no exception";
  }());
  CHECK(message ==
        "coexec::ThreadPoolExecutor::invokeAny: this awaitable was already awaited (it runs its tasks once)");
  CHECK(afterFirst >= 1);
  CHECK(afterFirst <= 2);
  CHECK(pool.stats().taskCount == afterFirst);  // the second await started nothing
}

TEST_CASE("invokeAll after shutdown says the pool is shut down and no task was started, and a zero timeout comes first",
          "[invokeAll][shutdown][bad-input]") {
  ThreadPoolExecutor pool(taggedPool("inv", 1, 1, WorkQueue::bounded(8)));
  pool.shutdown();
  IntTasks tasks(2, [] { return 1; });
  const std::exception_ptr refused = [&] {
    try {
      (void)syncWait(invokeAllOf(pool, tasks));
    } catch (...) {
      return std::current_exception();
    }
    return std::exception_ptr();
  }();
  REQUIRE(coexec::test::holdsA<RejectedExecution>(refused));
  CHECK_THAT(messageOf(refused),
             Catch::Contains("ThreadPoolExecutor::invokeAll: the pool is shut down and accepts no "
                             "new tasks (none was started)") &&
                 Catch::Contains("pool 'inv' TERMINATED"));  // idle: it terminated inside shutdown()
  // A zero timeout throws TimeoutError before the pool's state is looked at.
  CHECK(throwsA<TimeoutError>([&] { syncWait([&]() -> Task<void> { (void)co_await pool.invokeAll(tasks, 0ms); }()); }));
  CHECK(pool.stats().rejectedCount == 2);  // the two refused at the first await, none by the timed one
}
