// SPDX-License-Identifier: BSL-1.0
#include "coexec/WhenAll.h"

// co_await whenAll(t1, t2, ...): Futures and Tasks, values in a tuple in
// argument order (void as std::monostate), the first failure cancelling the
// others (Futures through cancel(), Tasks through whenAll's token) and
// rethrown once they have settled, the awaiting task's cancellation flowing
// in, and composition with invokeAll. Ordering by gates and counters.

#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "Assertions.h"

#include "CombinatorTestSupport.h"
#include "coexec/CancellationToken.h"
#include "coexec/CurrentToken.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/InvokeAll.h"
#include "coexec/Sleep.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using coexec::CancellationRegistration;
using coexec::CancellationToken;
using coexec::currentToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::sleepFor;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::whenAll;
using coexec::WorkQueue;
using coexec::test::Children;
using coexec::test::Counter;
using coexec::test::currentTag;
using coexec::test::Gate;
using coexec::test::OpenOnExit;
using coexec::test::RunningChildSetup;
using coexec::test::sleepsAnHour;
using coexec::test::taggedPool;
using coexec::test::throwsA;
using coexec::test::waitForCancellation;
using namespace std::chrono_literals;

namespace {

Task<std::string> greet(std::string name) { co_return "hello " + name; }

Task<void> touch(std::atomic<int>& counter) {
  counter.fetch_add(1);
  co_return;
}

/// A Task that awaits work on `pool`, then returns twice its value.
Task<int> doubled(ThreadPoolExecutor& pool, int value) {
  Future<int> f = pool.submit([value] { return value; });
  co_return 2 * co_await f;
}

Task<int> failsAfter(ThreadPoolExecutor& pool, Counter& ready, std::size_t wait) {
  Future<void> hop = pool.submit([] {});
  co_await hop;
  if (!ready.waitFor(wait)) throw std::logic_error("the other children did not start");
  throw std::runtime_error("the Task failed");
}

Task<int> sumOfAll(ThreadPoolExecutor& pool, std::vector<std::function<int()>>& tasks) {
  const std::vector<int> values = co_await pool.invokeAll(tasks);
  int sum = 0;
  for (int v : values)
    sum += v;
  co_return sum;
}

}  // namespace

TEST_CASE("whenAll returns the values of Futures and Tasks as a tuple in argument order, void as std::monostate",
          "[whenAll]") {
  std::atomic<int> touched{0};
  ThreadPoolExecutor pool(taggedPool("when", 2, 2, WorkQueue::bounded(64)));
  const auto run = [&]() -> Task<std::tuple<int, std::monostate, std::string, std::monostate, int>> {
    Future<int> a = pool.submit([] { return 1; });
    Future<void> b = pool.submit([] {});
    co_return co_await whenAll(a, b, greet("coexec"), touch(touched), doubled(pool, 21));
  };
  const auto [a, b, c, d, e] = syncWait(run());
  CHECK(a == 1);
  CHECK(b == std::monostate{});
  CHECK(c == "hello coexec");
  CHECK(d == std::monostate{});
  CHECK(e == 42);
  CHECK(touched.load() == 1);
}

TEST_CASE("whenAll of Futures that have settled already returns at once", "[whenAll]") {
  ThreadPoolExecutor pool(taggedPool("when", 1, 1, WorkQueue::bounded(8)));
  Future<int> a = pool.submit([] { return 3; });
  Future<int> b = pool.submit([] { return 4; });
  a.wait();
  b.wait();
  const auto run = [&]() -> Task<int> {
    const auto [x, y] = co_await whenAll(a, b);
    co_return x* y;
  };
  CHECK(syncWait(run()) == 12);
  CHECK(throwsA<std::logic_error>([&] { (void)a.get(); }));  // consumed by whenAll
}

TEST_CASE_METHOD(RunningChildSetup,
                 "whenAll's first failure cancels the other children and is rethrown once they have settled",
                 "[whenAll][failure]") {
  Future<std::string> outer = driver.submit([&]() -> Task<std::string> {
    try {
      // The sleeping Task starts first (Tasks start in argument order): the
      // failing one may run on without suspending if its hop is quick.
      (void)co_await whenAll(slow, sleepsAnHour(sleeping, sleepCancelled), failsAfter(pool, sleeping, 1));
    } catch (const std::runtime_error& e) {
      co_return std::string(e.what());
    }
    co_return std::string("no failure");
  });
  REQUIRE(children.cancelled.waitFor(1));  // the Future's task saw the cancellation
  CHECK_FALSE(outer.isDone());             // and has not returned
  children.release.open();
  CHECK(outer.get() == "the Task failed");
  CHECK(sleepCancelled.load());  // the sleeping Task woke through whenAll's token
}

TEST_CASE("whenAll starts no Task once a Future argument has failed", "[whenAll][failure]") {
  std::atomic<int> touched{0};
  ThreadPoolExecutor pool(taggedPool("when", 1, 1, WorkQueue::bounded(8)));
  Future<int> failed = pool.submit([]() -> int { throw std::runtime_error("failed before"); });
  failed.wait();
  const auto run = [&]() -> Task<void> { (void)co_await whenAll(failed, touch(touched)); };
  CHECK(throwsA<std::runtime_error>([&] { syncWait(run()); }));
  CHECK(touched.load() == 0);
}

TEST_CASE_METHOD(
    RunningChildSetup,
    "cancelling the awaiting coroutine's task cancels whenAll's children, OperationCancelled once they settled",
    "[whenAll][cancel]") {
  std::atomic<bool> reachedEnd{false};
  Future<int> outer = driver.submit([&]() -> Task<int> {
    const auto [a, b] = co_await whenAll(slow, sleepsAnHour(sleeping, sleepCancelled));
    reachedEnd = true;
    co_return a + b;
  });
  REQUIRE(sleeping.waitFor(1));  // the outer coroutine awaits whenAll/whenAny
  CHECK(outer.cancel());
  REQUIRE(children.cancelled.waitFor(1));
  CHECK_FALSE(outer.isDone());
  children.release.open();
  CHECK(throwsA<OperationCancelled>([&] { (void)outer.get(); }));
  CHECK(sleepCancelled.load());
  CHECK_FALSE(reachedEnd.load());
}

TEST_CASE("whenAll awaited by a task cancelled already cancels its running Futures and throws once they settled",
          "[whenAll][cancel][reliability]") {
  Counter childStarted;
  Counter outerStarted;
  Counter stopped;  // the child saw its cancellation, or whenAll threw: whichever came first
  std::atomic<bool> childSawCancel{false};
  std::atomic<bool> childEnded{false};
  std::atomic<bool> threwWhileChildRan{false};
  Gate release;
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("when", 1, 1, WorkQueue::bounded(8)));
  OpenOnExit guard{release};
  Future<int> child = pool.submit([&](const CancellationToken& token) {
    childStarted.arrive();
    const CancellationRegistration seen(token, [&] {
      childSawCancel = true;
      stopped.arrive();
    });
    release.wait();
    childEnded = true;
    return 1;
  });
  REQUIRE(childStarted.waitFor(1));
  Future<int> outer = driver.submit([&]() -> Task<int> {
    const CancellationToken token = co_await currentToken();
    outerStarted.arrive();
    waitForCancellation(token);  // the task is cancelled before it awaits whenAll
    try {
      const auto [value] = co_await whenAll(child);
      co_return value;
    } catch (const OperationCancelled&) {
      threwWhileChildRan = !childEnded.load();
      stopped.arrive();
      throw;
    }
  });
  REQUIRE(outerStarted.waitFor(1));
  CHECK(outer.cancel());
  REQUIRE(stopped.waitFor(1));
  CHECK(childSawCancel.load());  // whenAll cancelled the Future's task, which runs already
  CHECK_FALSE(outer.isDone());   // and waits for it to settle
  release.open();
  CHECK(throwsA<OperationCancelled>([&] { (void)outer.get(); }));
  CHECK_FALSE(threwWhileChildRan.load());
}

TEST_CASE("whenAll's Task children may each await a Future at the same time", "[whenAll]") {
  // The Task children run inline under the combinator's own context: two of
  // them suspended on Futures at once must not share anything but its token.
  Gate first;
  Gate second;
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("when", 2, 2, WorkQueue::bounded(64)));
  OpenOnExit guardFirst(first);
  OpenOnExit guardSecond(second);
  Counter started;
  auto awaitGated = [&](Gate& gate, int value) -> Task<int> {
    Future<int> f = pool.submit([&gate, &started, value] {
      started.arrive();
      gate.wait();
      return value;
    });
    co_return co_await f;
  };
  Future<int> outer = driver.submit([&]() -> Task<int> {
    const auto [a, b] = co_await whenAll(awaitGated(first, 1), awaitGated(second, 2));
    co_return a * 10 + b;
  });
  REQUIRE(started.waitFor(2));  // both children are suspended on their Futures
  second.open();
  first.open();
  CHECK(outer.get() == 12);
}

TEST_CASE("whenAll composes with invokeAll, and works from a plain thread through syncWait", "[whenAll][compose]") {
  ThreadPoolExecutor pool(taggedPool("when", 2, 2, WorkQueue::bounded(64)));
  std::vector<std::function<int()>> ones(10, [] { return 1; });
  std::vector<std::function<int()>> tens(5, [] { return 10; });
  const auto run = [&]() -> Task<int> {
    const auto [a, b] = co_await whenAll(sumOfAll(pool, ones), sumOfAll(pool, tens));
    co_return a + b;
  };
  CHECK(syncWait(run()) == 60);
}

TEST_CASE("whenAll refuses an empty Future or a started Task before touching anything", "[whenAll][input]") {
  std::atomic<int> touched{0};
  ThreadPoolExecutor pool(taggedPool("when", 1, 1, WorkQueue::bounded(8)));
  Future<int> ok = pool.submit([] { return 1; });
  Future<int> empty;
  const auto run = [&]() -> Task<void> { (void)co_await whenAll(ok, empty, touch(touched)); };
  CHECK(throwsA<std::logic_error>([&] { syncWait(run()); }));
  CHECK(touched.load() == 0);
  CHECK(ok.get() == 1);  // untouched
}

TEST_CASE("a named whenAll awaitable is awaited once, whenAll resumes where the coroutine was running", "[whenAll]") {
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("when", 1, 1, WorkQueue::bounded(8)));
  Future<std::string> where = driver.submit([&]() -> Task<std::string> {
    Future<int> a = pool.submit([] { return 1; });
    auto both = whenAll(a, doubled(pool, 2));
    const auto [x, y] = co_await both;
    if (x + y != 5) co_return std::string("wrong values");
    try {
      (void)co_await both;
    } catch (const std::logic_error&) {
      co_return std::string(currentTag);
    }
    co_return std::string("awaited twice");
  });
  CHECK(where.get() == "driver");
}

TEST_CASE("whenAll of Future temporaries of capture-less lambdas, on every compiler (GCC 12 included)", "[whenAll]") {
  ThreadPoolExecutor pool(taggedPool("when", 1, 1, WorkQueue::bounded(8)));
  const auto run = [&]() -> Task<int> {
    const auto [a, b] = co_await whenAll(pool.submit([] { return 5; }), pool.submit([] { return 6; }));
    co_return a + b;
  };
  CHECK(syncWait(run()) == 11);
}

TEST_CASE("whenAll of Futures moved into a named awaitable, on every compiler", "[whenAll]") {
  ThreadPoolExecutor pool(taggedPool("when", 1, 1, WorkQueue::bounded(8)));
  const auto run = [&]() -> Task<int> {
    auto both = whenAll(pool.submit([] { return 5; }), pool.submit([] { return 6; }));
    const auto [a, b] = co_await both;
    co_return a + b;
  };
  CHECK(syncWait(run()) == 11);
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE(
    "whenAll refuses an empty Future, an empty Task or a started Task with a message naming it, and nothing is touched",
    "[whenAll][input][bad-input]") {
  ThreadPoolExecutor pool(taggedPool("when", 1, 1, WorkQueue::bounded(8)));
  Future<int> ok = pool.submit([] { return 1; });
  const auto whatOf = [](auto&& run) -> std::string {
    try {
      (void)syncWait(run());
    } catch (const std::exception& e) {
      return e.what();
    }
    return "no exception";
  };
  Future<int> empty;
  CHECK(whatOf([&]() -> Task<void> { (void)co_await whenAll(ok, empty); }) ==
        "coexec::whenAll: a Future argument is empty (default-constructed or moved from)");
  CHECK(whatOf([&]() -> Task<void> { (void)co_await whenAll(ok, Task<int>()); }) ==
        "coexec::whenAll: the Task is empty (default-constructed or moved from), so there is no coroutine to start.");
  CHECK(throwsA<std::invalid_argument>(
      [&] { syncWait([&]() -> Task<void> { (void)co_await whenAll(ok, Task<int>()); }()); }));
  Task<int> started = []() -> Task<int> { co_return 2; }();
  (void)syncWait([&]() -> Task<int> { co_return co_await started; }());
  CHECK_THAT(whatOf([&]() -> Task<void> { (void)co_await whenAll(ok, std::move(started)); }),
             Catch::StartsWith("coexec::whenAll: the Task was already started"));
  CHECK(ok.get() == 1);  // untouched by the refused awaits
}

TEST_CASE("a named whenAll awaitable awaited a second time throws std::logic_error saying it runs once",
          "[whenAll][bad-input]") {
  ThreadPoolExecutor pool(taggedPool("when", 1, 1, WorkQueue::bounded(8)));
  Future<int> a = pool.submit([] { return 1; });
  const std::string message = syncWait([&]() -> Task<std::string> {
    auto awaitable = whenAll(a);
    (void)co_await awaitable;
    try {
      (void)co_await awaitable;
    } catch (const std::logic_error& e) {
      co_return e.what();
    }
    co_return "no exception";
  }());
  CHECK(message ==
        "coexec::whenAll: this awaitable was already awaited (it watches its Futures and runs its Tasks once)");
  CHECK_THROWS_AS(a.get(), std::logic_error);  // consumed by the first await
}
