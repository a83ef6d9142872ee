// SPDX-License-Identifier: BSL-1.0
#include "coexec/Future.h"

// Future<R>, the blocking side: get / get(timeout) / wait / waitFor, single
// consumption, cancel() of queued and running tasks, and cancel racing
// completion.

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "Assertions.h"

#include "TestSupport.h"
#include "coexec/CancellationToken.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/WhenAll.h"

using namespace std::chrono_literals;

using coexec::CancellationRegistration;
using coexec::CancellationToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::PoolStats;
using coexec::ThreadPoolExecutor;
using coexec::TimeoutError;
using coexec::WorkQueue;
using coexec::test::Counter;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::OpenOnExit;

static_assert(!std::is_copy_constructible_v<Future<int>>);
static_assert(!std::is_copy_assignable_v<Future<int>>);
static_assert(std::is_nothrow_move_constructible_v<Future<int>>);
static_assert(std::is_nothrow_move_assignable_v<Future<int>>);

namespace {

struct TaskError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Blocks the calling task until its token is cancelled (bounded by Gate).
void waitForCancellation(const CancellationToken& token) {
  Gate cancelled;
  CancellationRegistration registration(token, [&cancelled] { cancelled.open(); });
  cancelled.wait();
}

}  // namespace

TEST_CASE("get returns the value the task produced", "[future]") {
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(8));
  CHECK(pool.submit([] { return 42; }).get() == 42);
  CHECK(pool.submit([] { return std::string("text"); }).get() == "text");
  auto owned = pool.submit([] { return std::make_unique<int>(9); }).get();  // move-only result
  REQUIRE(owned);
  CHECK(*owned == 9);
  static int shared = 0;
  int& ref = pool.submit([]() -> int& { return shared; }).get();
  CHECK(&ref == &shared);
  std::atomic<bool> ran{false};
  auto done = pool.submit([&] { ran = true; });
  static_assert(std::is_same_v<decltype(done), Future<void>>);
  done.get();
  CHECK(ran);
}

TEST_CASE("get rethrows the exception the task threw", "[future][exceptions]") {
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(8));
  auto future = pool.submit([]() -> int { throw TaskError("task failed"); });
  CHECK_THROWS_AS(future.get(), TaskError);
  auto other = pool.submit([] { throw 5; });
  CHECK_THROWS_AS(other.get(), int);
}

TEST_CASE("get with a timeout throws TimeoutError and leaves the result for a later get", "[future][timeout]") {
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(8));
  OpenOnExit release{gate};
  auto future = pool.submit([&] {
    started.arrive();
    gate.wait();
    return 7;
  });
  REQUIRE(started.waitFor(1));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(future.get(20ms), TimeoutError);
  CHECK(std::chrono::steady_clock::now() - t0 >= 20ms);
  CHECK_THROWS_AS(future.get(0ms), TimeoutError);
  CHECK_THROWS_AS(future.get(-5s), TimeoutError);
  CHECK_FALSE(future.isDone());
  gate.open();
  CHECK(future.get(kLong) == 7);
  CHECK_THROWS_AS(future.get(), std::logic_error);

  auto ready = pool.submit([] { return 8; });
  ready.wait();
  CHECK(ready.get(0ms) == 8);  // a zero timeout still returns a settled result
}

TEST_CASE("wait waitFor isDone and isCancelled may be called any number of times", "[future]") {
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(8));
  OpenOnExit release{gate};
  auto future = pool.submit([&] {
    started.arrive();
    gate.wait();
    return 3;
  });
  REQUIRE(started.waitFor(1));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(future.waitFor(10ms));
  CHECK(std::chrono::steady_clock::now() - t0 >= 10ms);
  CHECK_FALSE(future.waitFor(0ms));
  CHECK_FALSE(future.waitFor(-1ms));
  CHECK_FALSE(future.isDone());
  CHECK_FALSE(future.isDone());
  gate.open();
  future.wait();
  future.wait();
  CHECK(future.waitFor(0ms));
  CHECK(future.waitFor(std::chrono::hours::max()));
  CHECK(future.waitFor(std::chrono::nanoseconds::max()));
  CHECK(future.isDone());
  CHECK(future.isDone());
  CHECK_FALSE(future.isCancelled());
  CHECK_FALSE(future.isCancelled());
  CHECK(future.get() == 3);
  // Observers still work after the result was consumed.
  CHECK(future.isDone());
  future.wait();
  CHECK(future.waitFor(0ms));
}

TEST_CASE("a second get throws std::logic_error whatever the first returned", "[future]") {
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(8));
  OpenOnExit release{gate};

  auto value = pool.submit([] { return 1; });
  CHECK(value.get() == 1);
  CHECK_THROWS_AS(value.get(), std::logic_error);
  CHECK_THROWS_AS(value.get(kLong), std::logic_error);
  CHECK_THROWS_WITH(value.get(),
                    "coexec::Future: the result was already consumed (get() or co_await may take a "
                    "Future's result only once)");

  auto timed = pool.submit([] { return 2; });
  CHECK(timed.get(kLong) == 2);
  CHECK_THROWS_AS(timed.get(), std::logic_error);

  auto failed = pool.submit([]() -> int { throw TaskError("once"); });
  CHECK_THROWS_AS(failed.get(), TaskError);
  CHECK_THROWS_AS(failed.get(), std::logic_error);

  pool.execute([&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  auto cancelled = pool.submit([] { return 4; });
  REQUIRE(cancelled.cancel());
  CHECK_THROWS_AS(cancelled.get(), OperationCancelled);
  CHECK_THROWS_AS(cancelled.get(), std::logic_error);
}

TEST_CASE("cancel of a queued task settles its Future at once with OperationCancelled and it never runs",
          "[future][cancel]") {
  Counter started;
  std::atomic<int> ran{0};
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(8));
  OpenOnExit release{gate};
  pool.execute([&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  auto future = pool.submit([&] { return ++ran; });
  CHECK_FALSE(future.isDone());
  CHECK_FALSE(future.isCancelled());

  CHECK(future.cancel());
  CHECK(future.isDone());
  CHECK(future.isCancelled());
  CHECK(future.waitFor(0ms));
  CHECK_FALSE(future.cancel());  // already settled
  CHECK(future.isCancelled());
  CHECK_THROWS_AS(future.get(), OperationCancelled);

  gate.open();
  pool.close();
  CHECK(ran == 0);
  CHECK(pool.stats().cancelledCount == 1u);
}

TEST_CASE("cancel of a running task cancels its token and settles the Future when the callable returns",
          "[future][cancel]") {
  Counter started;
  std::atomic<bool> sawCancel{false};
  std::atomic<bool> returned{false};
  std::atomic<std::thread::id> callbackThread{};
  Gate finish;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(8));
  OpenOnExit release{finish};
  auto future = pool.submit([&](CancellationToken token) {
    CancellationRegistration onCancel(token, [&] { callbackThread = std::this_thread::get_id(); });
    started.arrive();
    waitForCancellation(token);
    sawCancel = token.isCancellationRequested();
    finish.wait();
    returned = true;
    return 42;
  });
  REQUIRE(started.waitFor(1));

  CHECK(future.cancel());
  CHECK(future.isCancelled());
  // Callbacks registered on the task's token ran on this thread, inside cancel().
  CHECK(callbackThread.load() == std::this_thread::get_id());
  CHECK_FALSE(future.isDone());  // the callable has not returned yet
  CHECK_FALSE(future.waitFor(10ms));

  finish.open();
  CHECK_THROWS_AS(future.get(), OperationCancelled);  // the value 42 is discarded
  CHECK(sawCancel);
  CHECK(returned);
}

TEST_CASE("cancel of a running task that ignores its token still reports OperationCancelled", "[future][cancel]") {
  Counter started;
  std::atomic<bool> returned{false};
  Gate finish;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(8));
  OpenOnExit release{finish};
  auto future = pool.submit([&] {
    started.arrive();
    finish.wait();
    returned = true;
    return std::string("discarded");
  });
  REQUIRE(started.waitFor(1));
  CHECK(future.cancel());
  CHECK(future.isCancelled());
  CHECK_FALSE(future.isDone());
  finish.open();
  CHECK_THROWS_AS(future.get(), OperationCancelled);
  CHECK(returned);
}

TEST_CASE("cancel after the task is done returns false and keeps the result", "[future][cancel]") {
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(8));
  auto value = pool.submit([] { return 11; });
  value.wait();
  CHECK_FALSE(value.cancel());
  CHECK_FALSE(value.isCancelled());
  CHECK(value.get() == 11);
  CHECK_FALSE(value.cancel());  // consumed: still false, no throw

  auto failed = pool.submit([]() -> int { throw TaskError("kept"); });
  failed.wait();
  CHECK_FALSE(failed.cancel());
  CHECK_FALSE(failed.isCancelled());
  CHECK_THROWS_AS(failed.get(), TaskError);
}

TEST_CASE("an empty or moved-from Future is not valid and throws std::logic_error", "[future]") {
  Future<int> empty;
  CHECK_FALSE(empty.valid());
  CHECK_THROWS_AS(empty.get(), std::logic_error);
  CHECK_THROWS_AS(empty.get(1ms), std::logic_error);
  CHECK_THROWS_AS(empty.wait(), std::logic_error);
  CHECK_THROWS_AS(empty.waitFor(1ms), std::logic_error);
  CHECK_THROWS_AS(empty.cancel(), std::logic_error);
  CHECK_THROWS_AS(empty.isDone(), std::logic_error);
  CHECK_THROWS_AS(empty.isCancelled(), std::logic_error);
  CHECK_THROWS_WITH(empty.get(), "coexec::Future: this Future is empty (default-constructed or moved from)");
  CHECK_THROWS_WITH(empty.cancel(), "coexec::Future: this Future is empty (default-constructed or moved from)");

  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(8));
  auto original = pool.submit([] { return 6; });
  CHECK(original.valid());
  Future<int> moved = std::move(original);
  CHECK_FALSE(original.valid());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  CHECK_THROWS_AS(original.get(), std::logic_error);
  CHECK(moved.valid());
  Future<int> assigned;
  assigned = std::move(moved);
  CHECK(assigned.get() == 6);
}

TEST_CASE("cancel racing completion leaves every Future and the counters consistent", "[future][cancel][race]") {
  const bool checksToken = GENERATE(false, true);
  INFO((checksToken ? "tasks throw OperationCancelled when they see the token" : "tasks ignore the token"));
  constexpr int kTasks = 400;
  std::mt19937 random(12345);
  ThreadPoolExecutor pool(2, 2, 60s, WorkQueue::bounded(kTasks));
  std::vector<Future<int>> futures;
  std::vector<bool> cancelled;
  for (int i = 0; i < kTasks; ++i) {
    futures.push_back(pool.submit([i, checksToken](CancellationToken token) {
      for (int spin = 0; spin < (i % 7) * 50; ++spin) {
        if (checksToken) token.throwIfCancellationRequested();
      }
      return i;
    }));
    // Cancel some at once, some a little later, some never.
    if (random() % 3 == 0)
      cancelled.push_back(futures.back().cancel());
    else
      cancelled.push_back(false);
    if (i >= 3 && random() % 3 == 0) {
      const auto j = static_cast<std::size_t>(i - 3);
      if (!cancelled[j]) cancelled[j] = futures[j].cancel();
    }
  }
  pool.close();
  int cancelledCount = 0;
  for (std::size_t i = 0; i < futures.size(); ++i) {
    REQUIRE(futures[i].isDone());
    CHECK(futures[i].isCancelled() == cancelled[i]);
    if (cancelled[i]) {
      ++cancelledCount;
      CHECK_THROWS_AS(futures[i].get(), OperationCancelled);
    } else {
      CHECK(futures[i].get() == static_cast<int>(i));
    }
  }
  CHECK(cancelledCount > 0);
  const PoolStats s = pool.stats();
  CHECK(s.taskCount == static_cast<std::uint64_t>(kTasks));
  CHECK(s.failedCount == 0u);
  CHECK(s.completedTaskCount + s.cancelledCount == static_cast<std::uint64_t>(kTasks));
  CHECK(s.cancelledCount <= static_cast<std::uint64_t>(cancelledCount));
}

TEST_CASE("get from a thread of the pool that runs the unfinished task throws std::logic_error", "[future][deadlock]") {
  Counter innerStarted;
  std::atomic<int> threw{0};
  std::atomic<bool> innerWasRunning{false};
  Gate gate;
  ThreadPoolExecutor pool(2, 2, 60s, WorkQueue::bounded(8));
  OpenOnExit release{gate};
  Future<int> inner;
  auto outer = pool.submit([&] {
    inner = pool.submit([&] {
      innerStarted.arrive();
      gate.wait();
      return 5;
    });
    innerWasRunning = innerStarted.waitFor(1);  // checked below: get() must meet a running task
    try {
      (void)inner.get();  // would wait on its own pool
    } catch (const std::logic_error&) {
      ++threw;
    }
  });
  // If get() wrongly blocks, it blocks only until the gate opens below.
  const bool outerFinished = outer.waitFor(kLong);
  gate.open();
  REQUIRE(outer.waitFor(kLong));
  outer.get();
  CHECK(outerFinished);
  CHECK(innerWasRunning);
  CHECK(threw == 1);
  CHECK(inner.get() == 5);  // the Future is still usable from outside the pool
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("co_await of an empty or moved-from Future throws std::logic_error saying it is empty",
          "[future][bad-input]") {
  Future<int> empty;
  const std::string message = coexec::syncWait([&]() -> coexec::Task<std::string> {
    try {
      (void)co_await empty;
    } catch (const std::logic_error& e) {
      co_return e.what();
    }
    co_return "no exception";
  }());
  CHECK(message == "coexec::Future: awaiting an empty Future (default-constructed or moved from)");
}

TEST_CASE("a second co_await of a Future throws std::logic_error: its result was already consumed",
          "[future][bad-input]") {
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(8));
  Future<int> future = pool.submit([] { return 9; });
  const std::string outcome = coexec::syncWait([&]() -> coexec::Task<std::string> {
    const int first = co_await future;
    try {
      (void)co_await future;
    } catch (const std::logic_error& e) {
      co_return std::to_string(first) + " then " + e.what();
    }
    co_return "no exception";
  }());
  CHECK(outcome ==
        "9 then coexec::Future: the result was already consumed (get() or co_await may take a Future's result only "
        "once)");
  CHECK_THROWS_AS(future.get(), std::logic_error);  // get() after co_await: consumed too
}

TEST_CASE("get with a timeout on a thread of the task's own pool is not refused: it times out with TimeoutError",
          "[future][deadlock][bad-input]") {
  // get() there throws std::logic_error (it could wait forever); a bounded
  // wait cannot deadlock, so it waits and times out.
  Gate gate;
  Counter innerStarted;
  ThreadPoolExecutor pool(2, 2, 60s, WorkQueue::bounded(8));
  OpenOnExit release{gate};
  Future<int> inner;
  Future<std::string> outer = pool.submit([&]() -> std::string {
    inner = pool.submit([&] {
      innerStarted.arrive();
      gate.wait();
      return 5;
    });
    if (!innerStarted.waitFor(1)) return "the inner task did not start";
    try {
      (void)inner.get(1ms);
    } catch (const TimeoutError& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("another exception: ") + e.what();
    }
    return "no exception";
  });
  REQUIRE(outer.waitFor(kLong));
  CHECK(outer.get() == "Future::get(timeout): the task did not finish within the timeout");
  gate.open();
  CHECK(inner.get() == 5);  // not consumed by the timed-out get
}

TEST_CASE("a second coroutine awaiting a pending Future fails at once with std::logic_error, and the first still gets "
          "the value",
          "[future][coroutine][bad-input]") {
  ThreadPoolExecutor pool(2, 2, 60s, WorkQueue::bounded(8));
  Gate gate;
  OpenOnExit release{gate};
  Future<int> shared = pool.submit([&] {
    gate.wait();
    return 11;
  });
  std::atomic<int> firstGot{-1};
  Counter firstSuspended;
  // The first awaiter suspends on the shared Future (a pool task, so that
  // the pool keeps it and this test can wait for it).
  Future<void> first = pool.submit([&]() -> coexec::Task<void> {
    firstSuspended.arrive();
    firstGot = co_await shared;
  });
  REQUIRE(firstSuspended.waitFor(1));
  REQUIRE(coexec::test::eventually([&] { return pool.stats().activeCount <= 1; }));  // suspended, not running
  auto second = [](Future<int>& f) -> coexec::Task<std::string> {
    try {
      (void)co_await f;
    } catch (const std::logic_error& e) {
      co_return e.what();
    }
    co_return "no exception";
  };
  CHECK_THAT(coexec::syncWait(second(shared)),
             Catch::StartsWith("coexec::Future::operator co_await: the Future is already awaited by another "
                               "coroutine or combinator"));
  gate.open();
  first.get();
  CHECK(firstGot == 11);
  pool.shutdown();
  CHECK(pool.awaitTermination(kLong));  // nothing left suspended for ever
}

TEST_CASE("whenAll given the same Future twice fails with std::logic_error instead of losing an awaiter",
          "[future][combinators][bad-input]") {
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(8));
  Future<int> f = pool.submit([] { return 4; });
  auto both = [](Future<int>& future) -> coexec::Task<std::string> {
    try {
      auto all = coexec::whenAll(future, future);
      (void)co_await all;
    } catch (const std::logic_error& e) {
      co_return e.what();
    }
    co_return "no exception";
  };
  CHECK_THAT(coexec::syncWait(both(f)), Catch::StartsWith("coexec::whenAll: the Future is already awaited"));
  CHECK(f.get() == 4);  // untouched: still the caller's to take
}

TEST_CASE("Future::cancel() called on a thread of the awaiter's pool never resumes the awaiter inside the call",
          "[future][coroutine][cancel]") {
  // The canceller holds a lock while it cancels (a registry of in-flight
  // requests), and the awaiter takes the same lock when it goes on: resumed
  // inside cancel(), it would run on the canceller's stack with the lock held
  // (and block on it). Here the canceller marks the span of its call instead.
  ThreadPoolExecutor home(1, 1, 60s, WorkQueue::bounded(8));
  ThreadPoolExecutor busy(1, 1, 60s, WorkQueue::bounded(8));
  Gate blocker;
  OpenOnExit release{blocker};
  Future<void> occupying = busy.submit([&] { blocker.wait(); });
  Future<int> queued = busy.submit([] { return 1; });  // stays queued behind the blocker
  std::atomic<bool> insideCancel{false};
  std::atomic<int> seen{0};  // 1: resumed after cancel() returned; 2: inside it
  Counter suspended;
  Future<void> awaiter = home.submit([&]() -> coexec::Task<void> {
    suspended.arrive();
    try {
      (void)co_await queued;
    } catch (const OperationCancelled&) {
    }
    seen = insideCancel ? 2 : 1;
  });
  REQUIRE(suspended.waitFor(1));
  REQUIRE(coexec::test::eventually([&] { return home.stats().activeCount == 0; }));  // suspended on `queued`
  Future<bool> canceller = home.submit([&] {
    insideCancel = true;
    const bool cancelled = queued.cancel();
    insideCancel = false;
    return cancelled;
  });
  CHECK(canceller.get());
  awaiter.get();
  CHECK(seen == 1);
  blocker.open();
  occupying.get();
}
