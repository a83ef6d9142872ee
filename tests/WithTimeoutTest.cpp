// SPDX-License-Identifier: BSL-1.0
#include "coexec/WithTimeout.h"

// withTimeout(task, d) and withTimeout(future, d): the value before the
// deadline; at the deadline the work is cancelled and TimeoutError is
// thrown once it has settled (structured: an uncooperative task delays it);
// the work's own exception rethrown as is; the deadline on the awaiting
// coroutine's scheduler's clock (a ManualClock pool's timeouts fire inside
// advance(), so those tests need no real time); the awaiting task's
// cancellation reaching the work.
//
// On a ManualClock pool, a test must know that the deadline was read (the
// timer armed) before it advances the clock: for a Task, the Task's first
// statement runs after the timer is armed; for a Future, a probe task on
// the pool's only thread runs once the coroutine has suspended
// (requireSuspended), which it does after arming.

#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include "Assertions.h"

#include "CoroutinePoolTestSupport.h"
#include "CoroutineTestSupport.h"
#include "coexec/CancellationToken.h"
#include "coexec/Clock.h"
#include "coexec/CurrentToken.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/Sleep.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using coexec::CancellationToken;
using coexec::currentToken;
using coexec::Future;
using coexec::ManualClock;
using coexec::OperationCancelled;
using coexec::PoolStats;
using coexec::sleepFor;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::TimeoutError;
using coexec::withTimeout;
using coexec::WorkQueue;
using coexec::test::checkLedgerAddsUp;
using coexec::test::Counter;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::Lifetimes;
using coexec::test::OpenOnExit;
using coexec::test::throwsA;
using coexec::test::timedOut;
using coexec::test::Tracker;
using namespace std::chrono_literals;

namespace {

/// A pool of one thread on `clock`.
ThreadPoolOptions manualPool(const char* name, ManualClock& clock) {
  ThreadPoolOptions options;
  options.name = name;
  options.corePoolSize = 1;
  options.maximumPoolSize = 1;
  options.workQueue = WorkQueue::bounded(16);
  options.clock = &clock;
  return options;
}

/// Sleeps for `d` after arriving at `started`; records a cancellation.
Task<int> sleepy(std::chrono::nanoseconds d, Counter& started, std::atomic<bool>& cancelled, int value) {
  started.arrive();
  try {
    co_await sleepFor(d);
  } catch (const OperationCancelled&) {
    cancelled = true;
    throw;
  }
  co_return value;
}

Task<int> throwsBoom() {
  throw std::runtime_error("boom");
  co_return 0;
}

Task<int> answer(Tracker tracker) {
  (void)tracker;
  co_return 42;
}

}  // namespace

// ---- a Task ------------------------------------------------------------------------

TEST_CASE("withTimeout returns the Task's value when it finishes before the deadline", "[timeout][task]") {
  SECTION("under syncWait, on the steady clock") {
    const int value = syncWait([]() -> Task<int> {
      auto timed = withTimeout([]() -> Task<int> { co_return 7; }(), 1h);
      co_return co_await timed;
    }());
    CHECK(value == 7);
  }
  SECTION("on a pool with a ManualClock that never advances") {
    ManualClock clock;
    ThreadPoolExecutor pool(manualPool("tv", clock));
    Future<int> result = pool.submit([]() -> Task<int> {
      auto timed = withTimeout([]() -> Task<int> { co_return 8; }(), 50ms);
      co_return co_await timed;
    });
    CHECK(result.get() == 8);
  }
}

TEST_CASE("withTimeout throws TimeoutError at the deadline on a ManualClock pool, once the Task has settled",
          "[timeout][task][manual]") {
  ManualClock clock;
  ThreadPoolExecutor pool(manualPool("td", clock));
  Counter started;
  std::atomic<bool> childCancelled{false};
  std::atomic<bool> timedOut{false};
  Future<int> result = pool.submit([&]() -> Task<int> {
    auto timed = withTimeout(sleepy(1h, started, childCancelled, 1), 50ms);
    try {
      co_return co_await timed;
    } catch (const TimeoutError&) {
      timedOut = true;
      throw;
    }
  });
  REQUIRE(started.waitFor(1));  // the child runs: the deadline (now + 50ms) is set
  clock.advance(49ms);
  CHECK_FALSE(result.isDone());
  CHECK_FALSE(childCancelled.load());
  clock.advance(1ms);  // the deadline: the child is cancelled, inside this call (its sleep resumes on the pool)
  REQUIRE(result.waitFor(kLong));
  CHECK(childCancelled.load());
  CHECK(timedOut.load());
  CHECK(throwsA<TimeoutError>([&] { result.get(); }));
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  const PoolStats stats = pool.stats();
  CHECK(stats.failedCount == 1);  // TimeoutError is a failure of the awaiting task, not a cancellation
  checkLedgerAddsUp(stats);
}

TEST_CASE("withTimeout rethrows the Task's own exception as is", "[timeout][task]") {
  const bool boom = syncWait([]() -> Task<bool> {
    auto timed = withTimeout(throwsBoom(), 1h);
    try {
      (void)co_await timed;
    } catch (const std::runtime_error& e) {
      co_return std::string(e.what()) == "boom";
    }
    co_return false;
  }());
  CHECK(boom);
}

TEST_CASE("an uncooperative Task delays the TimeoutError until it returns", "[timeout][task][manual]") {
  // The child blocks its thread (it never looks at its token): at the
  // deadline its token is cancelled, and the awaiting coroutine goes on only
  // once the child has returned.
  ManualClock clock;
  ThreadPoolExecutor pool(manualPool("tu", clock));
  Gate release;
  OpenOnExit open(release);
  Counter started;
  std::atomic<bool> sawToken{false};
  Future<int> result = pool.submit([&]() -> Task<int> {
    auto stubborn = [&]() -> Task<int> {
      const CancellationToken token = co_await currentToken();
      started.arrive();
      release.wait();  // blocks the pool's thread, ignoring the token
      sawToken = token.isCancellationRequested();
      co_return 5;
    };
    auto timed = withTimeout(stubborn(), 10ms);
    co_return co_await timed;
  });
  REQUIRE(started.waitFor(1));
  clock.advance(10ms);  // cancels the child's token, here
  CHECK_FALSE(result.isDone());
  release.open();
  CHECK(throwsA<TimeoutError>([&] { result.get(); }));
  CHECK(sawToken.load());
}

TEST_CASE("withTimeout of zero never starts the Task", "[timeout][task]") {
  std::atomic<int> ran{0};
  const bool threwTimeout = syncWait([&]() -> Task<bool> {
    auto task = [&]() -> Task<int> {
      ran.fetch_add(1);
      co_return 1;
    };
    auto timed = withTimeout(task(), 0ms);
    co_return co_await timedOut(timed);
  }());
  CHECK(threwTimeout);
  CHECK(ran.load() == 0);
}

TEST_CASE("withTimeout under syncWait times out on the steady clock", "[timeout][task]") {
  // Real time, but no sleep decides anything: the child sleeps for an hour
  // and only the 20 ms deadline can end it.
  Counter started;
  std::atomic<bool> childCancelled{false};
  const auto begin = std::chrono::steady_clock::now();
  const bool threwTimeout = syncWait([&]() -> Task<bool> {
    auto timed = withTimeout(sleepy(1h, started, childCancelled, 1), 20ms);
    co_return co_await timedOut(timed);
  }());
  CHECK(threwTimeout);
  CHECK(childCancelled.load());
  CHECK(std::chrono::steady_clock::now() - begin >= 20ms);
}

TEST_CASE("the Task under withTimeout has a token of its own, linked to the awaiting task's",
          "[timeout][task][cancel]") {
  // Cancelling the awaiting task cancels the child, and the co_await
  // rethrows what the child settled with (OperationCancelled), not
  // TimeoutError; the child's token is not the parent's.
  ThreadPoolExecutor pool({.name = "tl", .corePoolSize = 1, .maximumPoolSize = 1});
  Counter started;
  std::atomic<bool> childCancelled{false};
  std::atomic<bool> distinctTokens{false};
  std::atomic<bool> parentSawCancellation{false};
  Future<int> result = pool.submit([&]() -> Task<int> {
    const CancellationToken parent = co_await currentToken();
    auto child = [&]() -> Task<int> {
      const CancellationToken own = co_await currentToken();
      distinctTokens = own.canBeCancelled() && !own.isCancellationRequested();
      co_return co_await sleepy(1h, started, childCancelled, 1);
    };
    auto timed = withTimeout(child(), 1h);
    try {
      co_return co_await timed;
    } catch (const OperationCancelled&) {
      parentSawCancellation = parent.isCancellationRequested();
      throw;
    }
  });
  REQUIRE(started.waitFor(1));
  CHECK(result.cancel());
  REQUIRE(result.waitFor(kLong));
  CHECK(throwsA<OperationCancelled>([&] { result.get(); }));
  CHECK(childCancelled.load());
  CHECK(distinctTokens.load());
  CHECK(parentSawCancellation.load());
}

TEST_CASE("the temporary form of withTimeout on a Task is safe on every compiler", "[timeout][task][gcc12]") {
  // co_await withTimeout(task(args), d): the argument's temporaries have
  // constructors, which GCC 12 handles; the Tracker counts say so.
  Lifetimes lifetimes;
  const int value = syncWait([&]() -> Task<int> { co_return co_await withTimeout(answer(Tracker(lifetimes)), 1h); }());
  CHECK(value == 42);
  CHECK(lifetimes.alive() == 0);
  CHECK(lifetimes.constructed.load() == lifetimes.destroyed.load());
}

TEST_CASE("withTimeout refuses an empty or already started Task", "[timeout][task]") {
  CHECK(throwsA<std::invalid_argument>([] { (void)withTimeout(Task<int>(), 1s); }));
  CHECK(throwsA<std::logic_error>([] {
    Task<int> task = []() -> Task<int> { co_return 1; }();
    (void)syncWait([&]() -> Task<int> { co_return co_await task; }());
    (void)withTimeout(std::move(task), 1s);
  }));
}

// ---- a Future ----------------------------------------------------------------------

TEST_CASE("withTimeout of a Future returns its value, or rethrows its exception as is", "[timeout][future]") {
  ThreadPoolExecutor pool({.name = "fv", .corePoolSize = 1, .maximumPoolSize = 1});
  Future<int> value = pool.submit([] { return 3; });
  Future<int> failure = pool.submit([]() -> int { throw std::runtime_error("bad"); });
  const std::string seen = syncWait([&]() -> Task<std::string> {
    auto first = withTimeout(value, 1h);  // borrows the Future
    const int three = co_await first;
    auto second = withTimeout(std::move(failure), 1h);  // owns it
    try {
      (void)co_await second;
    } catch (const std::runtime_error& e) {
      co_return std::to_string(three) + e.what();
    }
    co_return "no exception";
  }());
  CHECK(seen == "3bad");
}

TEST_CASE("withTimeout of a Future: at the deadline the task is cancelled, and TimeoutError comes once it has settled",
          "[timeout][future][manual]") {
  // The awaited task runs on another pool and ignores its token: the
  // TimeoutError waits for it to return.
  ManualClock clock;
  ThreadPoolExecutor remote({.name = "fr", .corePoolSize = 1, .maximumPoolSize = 1});
  ThreadPoolExecutor pool(manualPool("fm", clock));
  Gate release;
  OpenOnExit open(release);
  Counter remoteRuns;
  Counter reached;
  Future<int> work = remote.submit([&] {
    remoteRuns.arrive();
    release.wait();
    return 9;
  });
  REQUIRE(remoteRuns.waitFor(1));
  Future<int> result = pool.submit([&]() -> Task<int> {
    reached.arrive();
    auto timed = withTimeout(work, 30ms);
    co_return co_await timed;
  });
  requireSuspended(pool, reached);  // suspended: the timer is armed
  clock.advance(29ms);
  CHECK_FALSE(work.isCancelled());
  clock.advance(1ms);
  CHECK(work.isCancelled());  // as by work.cancel(), inside advance()
  CHECK_FALSE(result.isDone());
  release.open();
  CHECK(throwsA<TimeoutError>([&] { result.get(); }));
  remote.shutdown();
  REQUIRE(remote.awaitTermination(kLong));
  CHECK(remote.stats().completedTaskCount == 1);
}

TEST_CASE("withTimeout of a Future whose task is queued: at the deadline it never runs", "[timeout][future][manual]") {
  ManualClock clock;
  ThreadPoolExecutor remote({.name = "fq", .corePoolSize = 1, .maximumPoolSize = 1});
  ThreadPoolExecutor pool(manualPool("fw", clock));
  Gate gate;
  OpenOnExit open(gate);
  Counter started;
  Counter reached;
  coexec::test::executeBlocked(remote, 1, started, gate);
  REQUIRE(started.waitFor(1));
  std::atomic<int> ran{0};
  Future<int> queued = remote.submit([&ran] { return ran.fetch_add(1); });
  Future<int> result = pool.submit([&]() -> Task<int> {
    reached.arrive();
    auto timed = withTimeout(queued, 5ms);
    co_return co_await timed;
  });
  requireSuspended(pool, reached);
  clock.advance(5ms);
  CHECK(queued.isCancelled());
  CHECK(throwsA<TimeoutError>([&] { result.get(); }));
  gate.open();
  remote.shutdown();
  REQUIRE(remote.awaitTermination(kLong));
  CHECK(ran.load() == 0);
  checkLedgerAddsUp(remote.stats());
}

TEST_CASE("cancelling the coroutine that awaits withTimeout of another task's Future cancels that task",
          "[timeout][future][cancel]") {
  ThreadPoolExecutor remote({.name = "fc", .corePoolSize = 1, .maximumPoolSize = 1});
  ThreadPoolExecutor pool({.name = "fd", .corePoolSize = 1, .maximumPoolSize = 1});
  Counter remoteRuns;
  Counter reached;
  Future<int> work = remote.submit([&](CancellationToken token) {
    remoteRuns.arrive();
    Gate cancelled;
    coexec::CancellationRegistration registration(token, [&cancelled] { cancelled.open(); });
    cancelled.wait();
    return 1;
  });
  REQUIRE(remoteRuns.waitFor(1));
  Future<int> result = pool.submit([&]() -> Task<int> {
    reached.arrive();
    auto timed = withTimeout(work, 1h);
    co_return co_await timed;
  });
  requireSuspended(pool, reached);
  CHECK(result.cancel());
  CHECK(work.isCancelled());
  CHECK(throwsA<OperationCancelled>([&] { result.get(); }));  // what the work settled with, not TimeoutError
}

TEST_CASE("the result of withTimeout is awaited once, an empty Future is refused at the co_await",
          "[timeout][future]") {
  ThreadPoolExecutor pool({.name = "fo", .corePoolSize = 1, .maximumPoolSize = 1});
  Future<int> value = pool.submit([] { return 1; });
  const bool twice = syncWait([&]() -> Task<bool> {
    auto timed = withTimeout(value, 1h);
    (void)co_await timed;
    try {
      (void)co_await timed;
    } catch (const std::logic_error&) {
      co_return true;
    }
    co_return false;
  }());
  CHECK(twice);
  Future<int> empty;
  const bool refused = syncWait([&]() -> Task<bool> {
    auto timed = withTimeout(empty, 1h);
    try {
      (void)co_await timed;
    } catch (const std::logic_error&) {
      co_return true;
    }
    co_return false;
  }());
  CHECK(refused);
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("the result of withTimeout(task) awaited a second time throws std::logic_error",
          "[timeout][task][bad-input]") {
  const std::string message = syncWait([]() -> Task<std::string> {
    auto timed = withTimeout([]() -> Task<int> { co_return 4; }(), 1h);
    const int four = co_await timed;
    try {
      (void)co_await timed;
    } catch (const std::logic_error& e) {
      co_return std::to_string(four) + " then " + e.what();
    }
    co_return "no exception";
  }());
  CHECK(message == "4 then coexec::withTimeout: the result of withTimeout() can be awaited only once");
}

TEST_CASE("withTimeout of an empty or already consumed Future throws std::logic_error from the co_await",
          "[timeout][future][bad-input]") {
  ThreadPoolExecutor pool({.name = "fc", .corePoolSize = 1, .maximumPoolSize = 1});
  Future<int> consumed = pool.submit([] { return 1; });
  CHECK(consumed.get() == 1);
  Future<int> empty;
  const auto whatOf = [](Future<int>& future) {
    return syncWait([&]() -> Task<std::string> {
      auto timed = withTimeout(future, 1h);  // nothing is checked yet
      try {
        (void)co_await timed;
      } catch (const std::logic_error& e) {
        co_return e.what();
      }
      co_return "no exception";
    }());
  };
  CHECK(whatOf(empty) == "coexec::withTimeout: awaiting an empty Future (default-constructed or moved from)");
  CHECK(whatOf(consumed) ==
        "coexec::Future: the result was already consumed (get() or co_await may take a Future's result only once)");
}

TEST_CASE("withTimeout with a negative timeout never starts the Task and throws TimeoutError",
          "[timeout][task][bad-input]") {
  std::atomic<int> ran{0};
  const std::string message = syncWait([&]() -> Task<std::string> {
    auto timed = withTimeout(
        [&]() -> Task<int> {
          ran.fetch_add(1);
          co_return 1;
        }(),
        -1ms);
    try {
      (void)co_await timed;
    } catch (const TimeoutError& e) {
      co_return e.what();
    }
    co_return "no exception";
  }());
  // A negative timeout counts as zero: the message names 0 (in microseconds).
  CHECK_THAT(message, Catch::StartsWith("coexec::withTimeout: the work did not finish within 0") &&
                          Catch::EndsWith("s (it was cancelled at the deadline and has settled)"));
  CHECK(ran.load() == 0);
}

TEST_CASE("withTimeout of a queued task's Future with a zero timeout cancels the task, which never runs",
          "[timeout][future][bad-input]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool({.name = "fz", .corePoolSize = 1, .maximumPoolSize = 1});
  OpenOnExit open(gate);
  coexec::test::executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  std::atomic<int> ran{0};
  Future<int> queued = pool.submit([&ran] { return ran.fetch_add(1); });
  const bool threwTimeout = syncWait([&]() -> Task<bool> {
    auto timed = withTimeout(queued, 0ms);
    co_return co_await timedOut(timed);
  }());
  CHECK(threwTimeout);
  CHECK(queued.isCancelled());
  gate.open();
  pool.close();
  CHECK(ran.load() == 0);
}
