// SPDX-License-Identifier: BSL-1.0
#include "coexec/ThreadPoolExecutor.h"

// co_await pool.invokeAny(tasks): the first success, AllFailed, a timeout,
// the awaiting task's cancellation; and the refusals and misuse of invokeAll
// and invokeAny (docs/reliability.md). InvokeAllTest.cpp has invokeAll.
// Ordering by gates and counters; no sleeps decide an outcome.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
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

using coexec::AllFailed;
using coexec::CancellationToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::RejectedExecution;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::TimeoutError;
using coexec::WorkQueue;
using coexec::test::Children;
using coexec::test::Counter;
using coexec::test::IntTasks;
using coexec::test::invokeAllOf;
using coexec::test::invokeAnyOf;
using coexec::test::ManualClockSetup;
using coexec::test::messageOf;
using coexec::test::OpenOnExit;
using coexec::test::taggedPool;
using coexec::test::throwsA;
using coexec::test::timedOut;
using coexec::test::waitUntilSuspended;
using namespace std::chrono_literals;

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
