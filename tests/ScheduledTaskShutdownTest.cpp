// SPDX-License-Identifier: BSL-1.0
// Scheduled tasks and shutdown: delayed one-shot tasks run on, periodic schedules end, shutdownNow
// cancels the timers (LIF-05, LIF-13), and every schedule form is refused afterwards (REJ-12).
#include "coexec/ThreadPoolExecutor.h"

// On a ManualClock (deterministic: timers fire inside advance(); what a test
// may rely on after advance() returns is in ScheduledTaskTestSupport.h).

#include <atomic>
#include <chrono>
#include <vector>

#include "Assertions.h"

#include "ScheduledTaskTestSupport.h"
#include "TestSupport.h"
#include "coexec/Clock.h"
#include "coexec/PeriodicHandle.h"
#include "coexec/ScheduledFuture.h"

using namespace std::chrono_literals;
using coexec::Clock;
using coexec::ManualClock;
using coexec::OperationCancelled;
using coexec::PeriodicHandle;
using coexec::PoolStats;
using coexec::RejectedExecution;
using coexec::RejectionPolicy;
using coexec::ScheduledFuture;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::test::armed;
using coexec::test::checkLedgerAddsUp;
using coexec::test::Counter;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::manualPool;
using coexec::test::OpenOnExit;

// ---- shutdown ---------------------------------------------------------------------------

TEST_CASE("after shutdown, delayed one-shot tasks still run and periodic schedules end (Java's defaults)",
          "[schedule][periodic][manual][shutdown]") {
  ManualClock clock;
  ThreadPoolExecutor pool(manualPool(clock));
  std::atomic<int> oneShotRuns{0};
  std::atomic<int> periodicRuns{0};
  ScheduledFuture<void> oneShot = pool.schedule([&] { ++oneShotRuns; }, 50ms);
  PeriodicHandle periodic = pool.scheduleAtFixedRate([&] { ++periodicRuns; }, 10ms, 10ms);
  pool.shutdown();
  CHECK(periodic.isDone());
  CHECK_THROWS_AS(periodic.get(), OperationCancelled);
  CHECK(pool.stats().scheduledCount == 1);
  CHECK_FALSE(pool.awaitTermination(0ms));  // the delayed task keeps it
  CHECK_THROWS_AS(pool.schedule([] {}, 1ms), RejectedExecution);
  clock.advance(50ms);
  oneShot.get();
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(oneShotRuns.load() == 1);
  CHECK(periodicRuns.load() == 0);
  checkLedgerAddsUp(pool.stats());
}

TEST_CASE("runDelayedTasksAfterShutdown = false: shutdown cancels the delayed tasks and the pool terminates",
          "[schedule][manual][shutdown]") {
  ManualClock clock;
  ThreadPoolOptions options = manualPool(clock);
  options.runDelayedTasksAfterShutdown = false;
  ThreadPoolExecutor pool(options);
  std::atomic<int> runs{0};
  ScheduledFuture<void> f = pool.schedule([&] { ++runs; }, 1h);
  pool.shutdown();
  CHECK_THROWS_AS(f.get(), OperationCancelled);
  REQUIRE(pool.awaitTermination(kLong));
  clock.advance(2h);
  CHECK(runs.load() == 0);
  CHECK(pool.stats().scheduledCount == 0);
}

TEST_CASE("continuePeriodicTasksAfterShutdown = true: a schedule runs on after shutdown until cancelled",
          "[periodic][manual][shutdown]") {
  ManualClock clock;
  ThreadPoolOptions options = manualPool(clock);
  options.continuePeriodicTasksAfterShutdown = true;
  ThreadPoolExecutor pool(options);
  std::atomic<int> runs{0};
  PeriodicHandle handle = pool.scheduleWithFixedDelay([&] { ++runs; }, 1ms, 1ms);
  pool.shutdown();
  for (int i = 0; i < 3; ++i) {
    REQUIRE(armed(pool));
    clock.advance(1ms);
  }
  REQUIRE(armed(pool));
  CHECK(runs.load() == 3);
  CHECK_FALSE(pool.isTerminated());
  handle.cancel();
  handle.get();
  REQUIRE(pool.awaitTermination(kLong));
}

TEST_CASE("shutdownNow cancels every pending timer, returns none of them, and the pool terminates at once (LIF-05)",
          "[schedule][periodic][manual][shutdown]") {
  // Java's shutdownNow returns the 9 delayed tasks, neither done nor
  // cancelled; coexec returns only tasks that were ready to run, and settles
  // every delayed one with OperationCancelled.
  ManualClock clock;
  ThreadPoolExecutor pool(manualPool(clock, 1));
  std::vector<ScheduledFuture<void>> delayed;
  std::vector<PeriodicHandle> periodic;
  for (int i = 0; i < 3; ++i) {
    delayed.push_back(pool.schedule([] {}, 9s));
    periodic.push_back(pool.scheduleAtFixedRate([] {}, 9s, 9s));
    periodic.push_back(pool.scheduleWithFixedDelay([] {}, 9s, 9s));
  }
  CHECK(pool.stats().scheduledCount == 9);
  const std::vector<coexec::PendingTask> returned = pool.shutdownNow();
  CHECK(returned.empty());
  REQUIRE(pool.awaitTermination(kLong));
  for (auto& f : delayed) {
    CHECK(f.isCancelled());
    CHECK_THROWS_AS(f.get(), OperationCancelled);
  }
  for (auto& h : periodic)
    CHECK_THROWS_AS(h.get(), OperationCancelled);
  CHECK(pool.stats().scheduledCount == 0);
}

TEST_CASE("shutdownNow returns a due one-shot task that has not started, and ends a queued periodic run",
          "[schedule][periodic][manual][shutdown]") {
  ManualClock clock;
  Gate gate;
  ThreadPoolExecutor pool(manualPool(clock, 1));
  OpenOnExit opener(gate);
  Counter started;
  pool.execute([&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  std::atomic<int> runs{0};
  ScheduledFuture<int> due = pool.schedule([&] { return ++runs; }, 1ms);
  PeriodicHandle periodic = pool.scheduleAtFixedRate([&] { ++runs; }, 1ms, 1ms);
  clock.advance(1ms);  // both due, both queued behind the blocked thread
  std::vector<coexec::PendingTask> returned = pool.shutdownNow();
  REQUIRE(returned.size() == 1);
  CHECK_THROWS_AS(periodic.get(), OperationCancelled);
  gate.open();
  REQUIRE(pool.awaitTermination(kLong));
  returned.front().run();
  CHECK(due.get() == 1);
  const PoolStats s = pool.stats();
  CHECK(s.drainedCount == 1);
  CHECK(s.cancelledCount == 1);  // the periodic schedule, counted when first due
  checkLedgerAddsUp(s);
}

TEST_CASE("a pool with no core thread still runs a task delayed past shutdown, and terminates after it (LIF-13)",
          "[schedule][manual][shutdown]") {
  ManualClock clock;
  ThreadPoolExecutor pool({.name = "core0", .corePoolSize = 0, .maximumPoolSize = 1, .clock = &clock});
  std::atomic<bool> ran{false};
  ScheduledFuture<void> f = pool.schedule([&] { ran = true; }, 12ms);
  pool.shutdown();
  CHECK_FALSE(pool.awaitTermination(0ms));
  clock.advance(12ms);
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(ran.load());
  CHECK(pool.corePoolSize() == 0);
}

TEST_CASE("after shutdown or shutdownNow, every schedule form is refused and counted (REJ-12)",
          "[schedule][periodic][rejection]") {
  const bool now = GENERATE(false, true);
  std::atomic<int> handled{0};
  ThreadPoolExecutor pool({.name = "rej",
                           .rejectionPolicy = RejectionPolicy([&](coexec::PendingTask&, ThreadPoolExecutor&) { ++handled; })});
  pool.submit([] {}).get();
  if (now) {
    (void)pool.shutdownNow();
  } else {
    pool.shutdown();
  }
  pool.execute([] {});  // execute and submit go to the policy
  (void)pool.submit([] {});
  CHECK(handled.load() == 2);
  // A task due later cannot be run by the caller or dropped quietly: the
  // schedule forms throw, whatever the policy.
  CHECK_THROWS_AS(pool.schedule([] {}, 1ms), RejectedExecution);
  CHECK_THROWS_AS(pool.scheduleAtFixedRate([] {}, 1ms, 1ms), RejectedExecution);
  CHECK_THROWS_AS(pool.scheduleWithFixedDelay([] {}, 1ms, 1ms), RejectedExecution);
  REQUIRE(pool.awaitTermination(kLong));
  const PoolStats s = pool.stats();
  CHECK(s.rejectedCount == 5);
  CHECK(s.completedTaskCount == 1);
  CHECK(s.scheduledCount == 0);
}
