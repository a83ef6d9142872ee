// SPDX-License-Identifier: BSL-1.0
#include "coexec/ThreadPoolExecutor.h"

// co_await pool.invokeAll(tasks) / invokeAny(tasks), with and without a
// timeout: results in input order, fail-fast, timeouts on a ManualClock,
// empty input, shutdown and refused admission, and cancellation flowing
// from the awaiting coroutine's task into the children (InvokeAnyTest.cpp:
// the first success, AllFailed, and both combinators' refusals and misuse).
// Ordering by gates and counters; no sleeps decide an outcome.

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "Assertions.h"

#include "CombinatorTestSupport.h"
#include "InvokeAllTestSupport.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/InvokeAll.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"

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
using coexec::test::Gate;
using coexec::test::IntTasks;
using coexec::test::invokeAllOf;
using coexec::test::invokeAnyOf;
using coexec::test::kLong;
using coexec::test::manualClockPool;
using coexec::test::ManualClockSetup;
using coexec::test::OpenOnExit;
using coexec::test::taggedPool;
using coexec::test::throwsA;
using coexec::test::timedOut;
using coexec::test::waitUntilSuspended;
using namespace std::chrono_literals;

namespace {

Task<int> square(int i) { co_return i* i; }

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
