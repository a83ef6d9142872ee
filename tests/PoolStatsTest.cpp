// SPDX-License-Identifier: BSL-1.0
#include "coexec/PoolStats.h"

// Metrics (MET), ported from ../shared/reference/jdk-executor-behaviours.md
// with their numbers, plus coexec's outcome counters and the fmt formatter.
// coexec splits the JDK's completedTaskCount into completed / failed /
// cancelled / discarded / drained, so "taskCount == completedTaskCount" from
// the JDK becomes the ledger over all of them.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "Assertions.h"
#include <fmt/format.h>

#include "TestSupport.h"
#include "coexec/Sleep.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using namespace std::chrono_literals;

using coexec::CancellationToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::PoolState;
using coexec::PoolStats;
using coexec::RejectedExecution;
using coexec::RejectionPolicy;
using coexec::sleepFor;
using coexec::syncWait;
using coexec::Task;
using coexec::TaskInfo;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::checkLedgerAddsUp;
using coexec::test::Counter;
using coexec::test::eventually;
using coexec::test::executeBlocked;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::StopOnExit;

namespace {

bool mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

// ---- formatting ------------------------------------------------------------------

TEST_CASE("PoolStats formats on one line as documented", "[stats][format]") {
  PoolStats s;
  s.name = "io";
  s.state = PoolState::running;
  s.corePoolSize = 1;
  s.maximumPoolSize = 2;
  s.poolSize = 2;
  s.activeCount = 2;
  s.largestPoolSize = 2;
  s.taskCount = 7;
  s.completedTaskCount = 3;
  s.queueSize = 1;
  s.queueCapacity = 1;
  s.rejectedCount = 2;
  s.failedCount = 1;
  CHECK(fmt::format("{}", s) ==
        "pool 'io' RUNNING: size 2 (core 1, max 2, largest 2), active 2, queued 1/1, "
        "tasks 7 (completed 3, failed 1, cancelled 0, discarded 0, drained 0), rejected 2");
  s.scheduledCount = 3;  // shown only while timers are pending
  CHECK(fmt::format("{}", s) ==
        "pool 'io' RUNNING: size 2 (core 1, max 2, largest 2), active 2, queued 1/1, "
        "tasks 7 (completed 3, failed 1, cancelled 0, discarded 0, drained 0), rejected 2, scheduled 3");
}

TEST_CASE("the formatted stats of a live pool name the pool and its state", "[stats][format]") {
  ThreadPoolOptions options;
  options.name = "stats-pool";
  options.corePoolSize = 2;
  options.maximumPoolSize = 3;
  options.workQueue = WorkQueue::bounded(5);
  ThreadPoolExecutor pool(std::move(options));
  CHECK(pool.submit([] { return 1; }).get() == 1);

  const std::string running = fmt::format("{}", pool.stats());
  INFO(running);
  CHECK(mentions(running, "'stats-pool'"));
  CHECK(mentions(running, "RUNNING"));
  CHECK(mentions(running, "core 2"));
  CHECK(mentions(running, "max 3"));
  CHECK(mentions(running, "/5"));
  CHECK(running.find('\n') == std::string::npos);

  pool.close();
  const std::string terminated = fmt::format("{}", pool.stats());
  INFO(terminated);
  CHECK(mentions(terminated, "'stats-pool'"));
  CHECK(mentions(terminated, "TERMINATED"));
  CHECK(mentions(terminated, "completed 1"));
}

TEST_CASE("toString names every pool state", "[stats][format]") {
  CHECK(coexec::toString(PoolState::running) == "RUNNING");
  CHECK(coexec::toString(PoolState::shutdown) == "SHUTDOWN");
  CHECK(coexec::toString(PoolState::stop) == "STOP");
  CHECK(coexec::toString(PoolState::terminated) == "TERMINATED");
}

TEST_CASE("fmt formats every pool state by its name, with string format specs", "[stats][format]") {
  for (const PoolState state : {PoolState::running, PoolState::shutdown, PoolState::stop, PoolState::terminated}) {
    CAPTURE(coexec::toString(state));
    CHECK(fmt::format("{}", state) == coexec::toString(state));
  }
  CHECK(fmt::format("[{:>10}]", PoolState::stop) == "[      STOP]");
  CHECK(fmt::format("[{:<9}]", PoolState::running) == "[RUNNING  ]");
  CHECK(fmt::format("[{:^12}]", PoolState::shutdown) == "[  SHUTDOWN  ]");
}

// ---- configuration and state -----------------------------------------------------

TEST_CASE("stats of a new pool echo its configuration and count nothing", "[stats]") {
  ThreadPoolOptions options;
  options.name = "cfg";
  options.corePoolSize = 2;
  options.maximumPoolSize = 3;
  options.workQueue = WorkQueue::bounded(7);
  ThreadPoolExecutor pool(std::move(options));
  const PoolStats s = pool.stats();
  CHECK(s.name == "cfg");
  CHECK(s.state == PoolState::running);
  CHECK(s.corePoolSize == 2u);
  CHECK(s.maximumPoolSize == 3u);
  CHECK(s.queueCapacity == 7u);
  CHECK(s.poolSize == 0u);
  CHECK(s.activeCount == 0u);
  CHECK(s.largestPoolSize == 0u);
  CHECK(s.taskCount == 0u);
  CHECK(s.queueSize == 0u);
  CHECK(s.rejectedCount == 0u);
  CHECK(s.completedTaskCount == 0u);
  CHECK(s.failedCount == 0u);
  CHECK(s.cancelledCount == 0u);
  CHECK(s.discardedCount == 0u);
  CHECK(s.drainedCount == 0u);
  checkLedgerAddsUp(s);
}

TEST_CASE("stats report each lifecycle state", "[stats][lifecycle]") {
  const bool now = GENERATE(false, true);
  INFO((now ? "shutdownNow()" : "shutdown()"));
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(4));
  StopOnExit stop(gate, pool);
  CHECK(pool.stats().state == PoolState::running);
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  if (now) {
    (void)pool.shutdownNow();
    CHECK(pool.stats().state == PoolState::stop);
  } else {
    pool.shutdown();
    CHECK(pool.stats().state == PoolState::shutdown);
  }
  gate.open();
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(pool.stats().state == PoolState::terminated);
}

// ---- MET ---------------------------------------------------------------------------

TEST_CASE("activeCount counts the threads running a task (MET-01)", "[stats]") {
  Counter started;
  std::atomic<std::size_t> activeInside{0};
  Gate gate;
  ThreadPoolExecutor pool(2, 2, 60s, WorkQueue::bounded(10));
  StopOnExit stop(gate, pool);
  CHECK(pool.stats().activeCount == 0u);
  pool.execute([&] {
    activeInside = pool.stats().activeCount;
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  CHECK(activeInside == 1u);
  CHECK(pool.stats().activeCount == 1u);
  gate.open();
  CHECK(eventually([&] { return pool.stats().activeCount == 0; }));
}

TEST_CASE("poolSize is 0 before the first task and 1 while it runs (MET-02)", "[stats]") {
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(10));
  StopOnExit stop(gate, pool);
  CHECK(pool.stats().poolSize == 0u);
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  CHECK(pool.stats().poolSize == 1u);
}

TEST_CASE("largestPoolSize keeps the peak after the pool terminates (MET-03)", "[stats]") {
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(3, 3, 60s, WorkQueue::bounded(10));
  StopOnExit stop(gate, pool);
  CHECK(pool.stats().largestPoolSize == 0u);
  executeBlocked(pool, 3, started, gate);
  REQUIRE(started.waitFor(3));
  CHECK(pool.stats().largestPoolSize == 3u);
  gate.open();
  pool.close();
  const PoolStats s = pool.stats();
  CHECK(s.largestPoolSize == 3u);
  CHECK(s.poolSize == 0u);
}

TEST_CASE("taskCount counts admitted tasks at once and completedTaskCount when they end (MET-04)", "[stats]") {
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(10));
  StopOnExit stop(gate, pool);
  CHECK(pool.stats().taskCount == 0u);
  CHECK(pool.stats().completedTaskCount == 0u);
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  CHECK(pool.stats().taskCount == 1u);
  CHECK(pool.stats().completedTaskCount == 0u);
  for (std::uint64_t i = 0; i < 3; ++i) {
    CHECK(pool.stats().taskCount == 1 + i);
    pool.execute([] {});
  }
  CHECK(pool.stats().taskCount == 4u);
  CHECK(pool.stats().completedTaskCount == 0u);
  CHECK(pool.stats().queueSize == 3u);
  gate.open();
  pool.close();
  CHECK(pool.stats().taskCount == 4u);
  CHECK(pool.stats().completedTaskCount == 4u);
}

TEST_CASE("completedTaskCount changes only after the task has ended (MET-05)", "[stats]") {
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(2, 2, 60s, WorkQueue::bounded(10));
  StopOnExit stop(gate, pool);
  auto future = pool.submit([&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  CHECK(pool.stats().completedTaskCount == 0u);
  gate.open();
  future.get();
  CHECK(eventually([&] { return pool.stats().completedTaskCount == 1; }));
}

TEST_CASE("largestPoolSize keeps the historical peak after maximumPoolSize is lowered (MET-06)", "[stats][resize]") {
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 4, 60s, WorkQueue::synchronous());
  StopOnExit stop(gate, pool);
  executeBlocked(pool, 4, started, gate);
  REQUIRE(started.waitFor(4));
  CHECK(pool.stats().largestPoolSize == 4u);
  pool.setMaximumPoolSize(2);
  gate.open();
  REQUIRE(eventually([&] { return pool.stats().poolSize <= 2; }));
  CHECK(pool.stats().largestPoolSize == 4u);
  CHECK(pool.stats().maximumPoolSize == 2u);
}

// ---- outcome counters and the ledger -------------------------------------------

TEST_CASE("each outcome has its own counter and together they add up to taskCount", "[stats][ledger]") {
  Counter started;
  Gate gate;
  ThreadPoolOptions options;
  options.workQueue = WorkQueue::bounded(4);
  options.rejectionPolicy = RejectionPolicy::discardOldest();
  options.uncaughtExceptionHandler = [](std::exception_ptr, const TaskInfo&) {};
  ThreadPoolExecutor pool(std::move(options));
  StopOnExit stop(gate, pool);

  auto running = pool.submit([&] {  // completed
    started.arrive();
    gate.wait();
    return 1;
  });
  REQUIRE(started.waitFor(1));
  auto evicted = pool.submit([] { return 2; });                                    // discarded by discardOldest
  auto cancelled = pool.submit([] { return 3; });                                  // cancelled while queued
  auto failing = pool.submit([]() -> int { throw std::runtime_error("fails"); });  // failed
  pool.execute([] { throw std::runtime_error("execute fails too"); });             // failed
  CHECK(pool.stats().queueSize == 4u);
  auto readmitted = pool.submit([] { return 5; });  // rejected, evicts `evicted`, admitted, completed
  CHECK_THROWS_AS(evicted.get(), RejectedExecution);
  REQUIRE(cancelled.cancel());

  gate.open();
  pool.close();
  CHECK(running.get() == 1);
  CHECK_THROWS_AS(cancelled.get(), OperationCancelled);
  CHECK_THROWS_AS(failing.get(), std::runtime_error);
  CHECK(readmitted.get() == 5);

  const PoolStats s = pool.stats();
  INFO(fmt::format("{}", s));
  CHECK(s.taskCount == 6u);
  CHECK(s.completedTaskCount == 2u);
  CHECK(s.failedCount == 2u);
  CHECK(s.cancelledCount == 1u);
  CHECK(s.discardedCount == 1u);
  CHECK(s.rejectedCount == 1u);
  CHECK(s.drainedCount == 0u);
  CHECK(s.queueSize == 0u);
  checkLedgerAddsUp(s);
}

TEST_CASE("a task cancelled while running counts by how it ends", "[stats][cancel]") {
  enum class Ending { returns, throwsCancelled, throwsOwnError };
  const Ending ending = GENERATE(Ending::returns, Ending::throwsCancelled, Ending::throwsOwnError);
  INFO("ending " << static_cast<int>(ending));
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(4));
  StopOnExit stop(gate, pool);
  auto future = pool.submit([&](CancellationToken token) {
    started.arrive();
    gate.wait();
    if (ending == Ending::throwsCancelled) token.throwIfCancellationRequested();
    if (ending == Ending::throwsOwnError) throw std::runtime_error("own error");
    return 1;
  });
  REQUIRE(started.waitFor(1));
  REQUIRE(future.cancel());
  gate.open();
  pool.close();
  CHECK(future.isCancelled());
  CHECK_THROWS_AS(future.get(), OperationCancelled);
  const PoolStats s = pool.stats();
  CHECK(s.taskCount == 1u);
  CHECK(s.completedTaskCount == (ending == Ending::returns ? 1u : 0u));
  CHECK(s.cancelledCount == (ending == Ending::throwsCancelled ? 1u : 0u));
  CHECK(s.failedCount == (ending == Ending::throwsOwnError ? 1u : 0u));
}

TEST_CASE("drainedCount counts the tasks shutdownNow returns and not those that ran", "[stats][ledger]") {
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(8));
  StopOnExit stop(gate, pool);
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  for (int i = 0; i < 4; ++i)
    pool.execute([] {});
  auto drained = pool.shutdownNow();
  REQUIRE(drained.size() == 4u);
  for (auto& task : drained)
    task.run();  // outside the pool: no counter changes
  gate.open();
  REQUIRE(pool.awaitTermination(kLong));
  const PoolStats s = pool.stats();
  CHECK(s.taskCount == 5u);
  CHECK(s.completedTaskCount == 1u);
  CHECK(s.drainedCount == 4u);
  checkLedgerAddsUp(s);
}

// ---- counted before the Future settles -----------------------------------------

TEST_CASE("stats() read after get() returned counts the task in its outcome", "[stats][race]") {
  // The worker that ran the task races the thread that get() wakes: the
  // count must come before the settlement, not after it.
  constexpr std::uint64_t kRounds = 3000;
  ThreadPoolExecutor pool(2, 2, 60s, WorkQueue::bounded(16));
  std::uint64_t uncounted = 0;
  std::uint64_t firstRound = 0;
  for (std::uint64_t round = 1; round <= kRounds; ++round) {
    auto ok = pool.submit([] { return 1; });
    REQUIRE(ok.get() == 1);
    auto bad = pool.submit([]() -> int { throw std::runtime_error("counted before settled"); });
    REQUIRE_THROWS_AS(bad.get(), std::runtime_error);
    auto cancelled = pool.submit([]() -> int { throw OperationCancelled(); });
    REQUIRE_THROWS_AS(cancelled.get(), OperationCancelled);
    const PoolStats s = pool.stats();
    if (s.completedTaskCount != round || s.failedCount != round || s.cancelledCount != round) {
      if (uncounted++ == 0) firstRound = round;
    }
  }
  INFO("first round with a settled task not yet counted: " << firstRound);
  CHECK(uncounted == 0);
  pool.close();
  checkLedgerAddsUp(pool.stats());
}

TEST_CASE("a coroutine resumed by a pool task's settlement reads stats() that count that task",
          "[stats][coroutine]") {
  // The child suspends (a short sleep), so the parent cannot run it where it
  // awaits it: the parent suspends, and the worker that finishes the child
  // resumes it inline, from inside the child's settlement.
  constexpr int kRounds = 200;
  ThreadPoolExecutor pool(2, 2, 60s, WorkQueue::bounded(16));
  auto parent = pool.submit([&pool]() -> Task<int> {
    int uncounted = 0;
    for (int round = 1; round <= kRounds; ++round) {
      auto child = pool.submit([]() -> Task<int> {
        co_await sleepFor(50us);
        co_return 1;
      });
      const int one = co_await child;
      if (one != 1 || pool.stats().completedTaskCount != static_cast<std::uint64_t>(round)) ++uncounted;
    }
    co_return uncounted;
  });
  CHECK(syncWait(parent) == 0);
  pool.close();
  CHECK(pool.stats().completedTaskCount == static_cast<std::uint64_t>(kRounds) + 1);
}
