// SPDX-License-Identifier: BSL-1.0
#include "coexec/WhenAny.h"

// co_await whenAny(t1, t2, ...): the first child to settle wins (its index
// and value, or its exception), the others are cancelled and awaited before
// it returns; void children as std::monostate; the awaiting task's
// cancellation flowing in.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <variant>

#include "Assertions.h"

#include "CombinatorTestSupport.h"
#include "coexec/CancellationToken.h"
#include "coexec/CurrentToken.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
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
using coexec::whenAny;
using coexec::WhenAnyResult;
using coexec::WorkQueue;
using coexec::test::Children;
using coexec::test::Counter;
using coexec::test::Gate;
using coexec::test::OpenOnExit;
using coexec::test::RunningChildSetup;
using coexec::test::sleepsAnHour;
using coexec::test::taggedPool;
using coexec::test::throwsA;
using coexec::test::waitForCancellation;
using namespace std::chrono_literals;

namespace {

Task<std::string> word(std::string w) { co_return w; }

Task<void> bump(std::atomic<int>& counter) {
  counter.fetch_add(1);
  co_return;
}

}  // namespace

TEST_CASE_METHOD(RunningChildSetup,
                 "whenAny returns the first child to settle, the others are cancelled and awaited first", "[whenAny]") {
  Future<std::size_t> outer = driver.submit([&]() -> Task<std::size_t> {
    Future<std::string> fast = pool.submit([&sleeping = sleeping] {
      if (!sleeping.waitFor(1)) throw std::logic_error("the sleeping Task did not start");
      return std::string("fast");
    });
    const auto result = co_await whenAny(slow, sleepsAnHour(sleeping, sleepCancelled), fast);
    if (std::get<2>(result.value) != "fast") co_return 99;
    co_return result.index;
  });
  REQUIRE(children.cancelled.waitFor(1));
  CHECK_FALSE(outer.isDone());  // the slow Future's task has not returned yet
  children.release.open();
  CHECK(outer.get() == 2);
  CHECK(sleepCancelled.load());
}

TEST_CASE("whenAny awaited by a task cancelled already cancels its running Futures and throws once they settled",
          "[whenAny][cancel][reliability]") {
  Counter childStarted;
  Counter outerStarted;
  Counter stopped;  // the child saw its cancellation, or whenAny threw: whichever came first
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
  std::atomic<int> touched{0};
  Future<std::size_t> outer = driver.submit([&]() -> Task<std::size_t> {
    const CancellationToken token = co_await currentToken();
    outerStarted.arrive();
    waitForCancellation(token);  // the task is cancelled before it awaits whenAny
    try {
      const auto result = co_await whenAny(child, bump(touched));
      co_return result.index;
    } catch (const OperationCancelled&) {
      threwWhileChildRan = !childEnded.load();
      stopped.arrive();
      throw;
    }
  });
  REQUIRE(outerStarted.waitFor(1));
  CHECK(outer.cancel());
  REQUIRE(stopped.waitFor(1));
  CHECK(childSawCancel.load());  // whenAny cancelled the Future's task, which runs already
  CHECK_FALSE(outer.isDone());   // and waits for it to settle
  release.open();
  CHECK(throwsA<OperationCancelled>([&] { (void)outer.get(); }));
  CHECK_FALSE(threwWhileChildRan.load());
  CHECK(touched.load() == 0);  // the Task never started
}

TEST_CASE("whenAny of void children reports the winner as std::monostate", "[whenAny]") {
  std::atomic<int> touched{0};
  ThreadPoolExecutor pool(taggedPool("when", 1, 1, WorkQueue::bounded(8)));
  const auto run = [&]() -> Task<WhenAnyResult<void, std::string>> {
    co_return co_await whenAny(bump(touched), word("never started"));
  };
  const WhenAnyResult<void, std::string> result = syncWait(run());
  CHECK(result.index == 0);
  CHECK(std::holds_alternative<std::monostate>(result.value));
  CHECK(touched.load() == 1);
}

TEST_CASE_METHOD(RunningChildSetup, "whenAny rethrows the first child's exception after the others have settled",
                 "[whenAny][failure]") {
  Future<std::string> outer = driver.submit([&]() -> Task<std::string> {
    Future<int> failing = pool.submit([&children = children]() -> int {
      if (!children.started.waitFor(1)) throw std::logic_error("the slow task did not start");
      throw std::runtime_error("first to settle");
    });
    try {
      (void)co_await whenAny(slow, failing);
    } catch (const std::runtime_error& e) {
      co_return std::string(e.what());
    }
    co_return std::string("no exception");
  });
  REQUIRE(children.cancelled.waitFor(1));
  CHECK_FALSE(outer.isDone());
  children.release.open();
  CHECK(outer.get() == "first to settle");
}

TEST_CASE("whenAny: a Future that has settled already wins, and no Task starts", "[whenAny]") {
  std::atomic<int> touched{0};
  ThreadPoolExecutor pool(taggedPool("when", 1, 1, WorkQueue::bounded(8)));
  Future<int> done = pool.submit([] { return 8; });
  done.wait();
  const auto run = [&]() -> Task<int> {
    const auto result = co_await whenAny(bump(touched), done);
    co_return static_cast<int>(result.index) * 100 + std::get<1>(result.value);
  };
  CHECK(syncWait(run()) == 108);
  CHECK(touched.load() == 0);
}

TEST_CASE_METHOD(
    RunningChildSetup,
    "cancelling the awaiting coroutine's task cancels whenAny's children, OperationCancelled once they settled",
    "[whenAny][cancel]") {
  Future<std::size_t> outer = driver.submit([&]() -> Task<std::size_t> {
    const auto result = co_await whenAny(slow, sleepsAnHour(sleeping, sleepCancelled));
    co_return result.index;
  });
  REQUIRE(sleeping.waitFor(1));  // the outer coroutine awaits whenAll/whenAny
  CHECK(outer.cancel());
  REQUIRE(children.cancelled.waitFor(1));
  CHECK_FALSE(outer.isDone());
  children.release.open();
  CHECK(throwsA<OperationCancelled>([&] { (void)outer.get(); }));
  CHECK(sleepCancelled.load());
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE(
    "whenAny refuses an empty Future, an empty Task or a started Task with a message naming it, and nothing is touched",
    "[whenAny][input][bad-input]") {
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
  CHECK(whatOf([&]() -> Task<void> { (void)co_await whenAny(ok, empty); }) ==
        "coexec::whenAny: a Future argument is empty (default-constructed or moved from)");
  CHECK(whatOf([&]() -> Task<void> { (void)co_await whenAny(ok, Task<int>()); }) ==
        "coexec::whenAny: the Task is empty (default-constructed or moved from), so there is no coroutine to start.");
  CHECK(throwsA<std::invalid_argument>(
      [&] { syncWait([&]() -> Task<void> { (void)co_await whenAny(ok, Task<int>()); }()); }));
  Task<int> started = []() -> Task<int> { co_return 2; }();
  (void)syncWait([&]() -> Task<int> { co_return co_await started; }());
  CHECK_THAT(whatOf([&]() -> Task<void> { (void)co_await whenAny(ok, std::move(started)); }),
             Catch::StartsWith("coexec::whenAny: the Task was already started"));
  CHECK(ok.get() == 1);  // untouched by the refused awaits
}

TEST_CASE("a named whenAny awaitable awaited a second time throws std::logic_error saying it runs once",
          "[whenAny][bad-input]") {
  ThreadPoolExecutor pool(taggedPool("when", 1, 1, WorkQueue::bounded(8)));
  Future<int> a = pool.submit([] { return 1; });
  const std::string message = syncWait([&]() -> Task<std::string> {
    auto awaitable = whenAny(a);
    (void)co_await awaitable;
    try {
      (void)co_await awaitable;
    } catch (const std::logic_error& e) {
      co_return e.what();
    }
    co_return "no exception";
  }());
  CHECK(message ==
        "coexec::whenAny: this awaitable was already awaited (it watches its Futures and runs its Tasks once)");
  CHECK_THROWS_AS(a.get(), std::logic_error);  // consumed by the first await
}
