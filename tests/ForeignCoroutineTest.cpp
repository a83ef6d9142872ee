// SPDX-License-Identifier: BSL-1.0
#include "coexec/ThreadPoolExecutor.h"

// Coroutines of a type foreign to coexec (a fire-and-forget coroutine whose
// promise coexec knows nothing of) awaiting coexec's awaitables: whatever
// thread they suspend on, the scheduler they will resume on is held for them
// (the hold is decided from the coroutine, not from the thread's current
// task), so a pool is never freed under a coroutine suspended on it; and a
// scheduler-less one is never resumed where it would deadlock the pool it
// destroys.

#include <atomic>
#include <chrono>
#include <coroutine>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "TestSupport.h"
#include "coexec/AsCompleted.h"
#include "coexec/Clock.h"
#include "coexec/Future.h"
#include "coexec/Sleep.h"
#include "coexec/Task.h"
#include "coexec/WhenAll.h"
#include "coexec/WithTimeout.h"

using namespace std::chrono_literals;

using coexec::Future;
using coexec::ManualClock;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::Gate;
using coexec::test::kLong;

namespace {

/// A coroutine type of the user's own: starts at once, never suspends at its
/// end (its frame frees itself), knows nothing of coexec.
struct DetachedTask {
  struct promise_type {
    DetachedTask get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

ThreadPoolOptions foreignPool(const char* name, std::size_t threads, coexec::Clock* clock = nullptr) {
  ThreadPoolOptions options;
  options.name = name;
  options.corePoolSize = threads;
  options.maximumPoolSize = threads;
  options.workQueue = WorkQueue::unbounded();
  options.clock = clock;
  return options;
}

/// What a suspended foreign coroutine reports when it goes on.
struct Outcome {
  std::atomic<int> value{-1};
  std::atomic<bool> done{false};
};

DetachedTask awaitFuture(Future<int>& future, Outcome& out) {
  out.value = co_await future;
  out.done = true;
}

DetachedTask awaitWhenAll(Future<int>& future, Outcome& out) {
  auto all = coexec::whenAll(future);
  auto [value] = co_await all;
  out.value = value;
  out.done = true;
}

DetachedTask awaitWithTimeout(Future<int>& future, Outcome& out) {
  auto timed = coexec::withTimeout(future, 1h);
  out.value = co_await timed;
  out.done = true;
}

DetachedTask awaitAsCompleted(std::vector<Future<int>>& futures, Outcome& out) {
  auto completions = coexec::asCompleted(std::move(futures));
  auto next = completions.next();
  std::optional<Future<int>> settled = co_await next;
  out.value = settled ? settled->get() : -2;
  out.done = true;
}

DetachedTask sleepThenReport(Outcome& out) {
  auto nap = coexec::sleepFor(1h);
  co_await nap;
  out.value = 1;
  out.done = true;
}

}  // namespace

TEST_CASE("a foreign coroutine started by a pool task and suspended on another pool's Future holds its pool until it "
          "resumes",
          "[coroutine][foreign][lifetime]") {
  // Each awaiter that records a scheduler: Future, whenAll (fan-in),
  // withTimeout, asCompleted (a parked coroutine); started by a callable
  // task or by a coroutine task of the pool (which is in flight while it
  // runs: the thread's current task then holds the pool, the coroutine's
  // own does not).
  const auto form = GENERATE(as<std::string>{}, "Future", "whenAll", "withTimeout", "asCompleted");
  const bool fromCoroutineTask = GENERATE(false, true);
  INFO(form << (fromCoroutineTask ? ", started by a coroutine task" : ", started by a callable task"));
  ThreadPoolExecutor other(foreignPool("other", 1));
  Gate release;
  std::vector<Future<int>> futures;
  futures.push_back(other.submit([&release] {
    release.wait();
    return 42;
  }));
  Outcome out;
  auto pool = std::make_unique<ThreadPoolExecutor>(foreignPool("home", 1));
  // The pool task starts the coroutine, which suspends; the task returns.
  const auto start = [&] {
    if (form == "Future") awaitFuture(futures[0], out);
    if (form == "whenAll") awaitWhenAll(futures[0], out);
    if (form == "withTimeout") awaitWithTimeout(futures[0], out);
    if (form == "asCompleted") awaitAsCompleted(futures, out);
  };
  if (fromCoroutineTask) {
    pool->submit([&start]() -> coexec::Task<void> {
          start();
          co_return;
        })
        .get();
  } else {
    pool->submit(start).get();
  }
  REQUIRE_FALSE(out.done);
  pool->shutdown();
  // The suspended coroutine will go on on this pool: it keeps the pool from
  // terminating (before the fix the pool terminated here, and was freed
  // under the coroutine).
  CHECK_FALSE(pool->awaitTermination(100ms));
  release.open();
  CHECK(pool->awaitTermination(kLong));
  CHECK(out.done);
  CHECK(out.value == 42);
  pool.reset();
}

TEST_CASE("a foreign coroutine sleeping on a pool's clock holds the pool until the sleep ends",
          "[coroutine][foreign][lifetime][sleep]") {
  ManualClock clock(coexec::steadyClock().now());
  Outcome out;
  auto pool = std::make_unique<ThreadPoolExecutor>(foreignPool("sleeper", 1, &clock));
  pool->submit([&out]() -> coexec::Task<void> {
        sleepThenReport(out);
        co_return;
      })
      .get();
  REQUIRE_FALSE(out.done);
  pool->shutdown();
  CHECK_FALSE(pool->awaitTermination(100ms));
  clock.advance(2h);
  CHECK(pool->awaitTermination(kLong));
  CHECK(out.done);
  pool.reset();
}

TEST_CASE("a foreign coroutine of no scheduler that awaits whenTerminated and then destroys the pool does not deadlock",
          "[coroutine][foreign][lifetime][termination]") {
  auto pool = std::make_unique<ThreadPoolExecutor>(foreignPool("ending", 1));
  Gate destroyed;
  std::atomic<bool> terminated{false};
  // Started on this thread (no scheduler): it suspends in whenTerminated().
  [](std::unique_ptr<ThreadPoolExecutor>& owned, std::atomic<bool>& sawTermination, Gate& done) -> DetachedTask {
    auto wait = owned->whenTerminated();
    co_await wait;
    sawTermination = owned->isTerminated();
    owned.reset();  // close() must not wait for a hold its own resumer has
    done.open();
  }(pool, terminated, destroyed);
  pool->shutdown();  // an idle pool terminates here, and resumes the awaiter
  destroyed.wait();
  CHECK(terminated);
  CHECK(pool == nullptr);
}
