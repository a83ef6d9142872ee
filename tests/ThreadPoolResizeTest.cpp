// SPDX-License-Identifier: BSL-1.0
// Dynamic resizing (RSZ) and keep-alive (KA) of ThreadPoolExecutor: prestarting core threads, core
// and maximum sizes changed at run time, idle threads timing out, core time-out.
#include "coexec/ThreadPoolExecutor.h"

// Ported from ../shared/reference/jdk-executor-behaviours.md with its numbers.
// Ordering is by gates and counters; sleeps only bound waits or leave room for
// a wrong implementation to show itself.

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "Assertions.h"

#include "TestSupport.h"
#include "ThreadPoolLifecycleTestSupport.h"

using namespace std::chrono_literals;

using coexec::CancellationToken;
using coexec::PoolStats;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::checkTerminated;
using coexec::test::Counter;
using coexec::test::eventually;
using coexec::test::executeBlocked;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::StopOnExit;

// ---- RSZ: dynamic resizing ---------------------------------------------------

TEST_CASE("prestartCoreThread starts one idle core thread at a time up to corePoolSize (RSZ-01)",
          "[executor][resize][prestart]") {
  ThreadPoolExecutor pool(2, 6, 60s, WorkQueue::bounded(10));
  CHECK(pool.stats().poolSize == 0u);
  CHECK(pool.prestartCoreThread());
  CHECK(pool.stats().poolSize == 1u);
  CHECK(pool.prestartCoreThread());
  CHECK(pool.stats().poolSize == 2u);
  CHECK_FALSE(pool.prestartCoreThread());
  CHECK(pool.stats().poolSize == 2u);
  pool.setCorePoolSize(4);
  CHECK(pool.prestartCoreThread());
  CHECK(pool.stats().poolSize == 3u);
  CHECK(pool.prestartCoreThread());
  CHECK(pool.stats().poolSize == 4u);
  CHECK_FALSE(pool.prestartCoreThread());
  const PoolStats s = pool.stats();
  CHECK(s.poolSize == 4u);
  CHECK(s.largestPoolSize == 4u);
  CHECK(s.activeCount == 0u);
  CHECK(s.taskCount == 0u);
}

TEST_CASE("prestartAllCoreThreads starts the missing core threads and says how many (RSZ-02)",
          "[executor][resize][prestart]") {
  ThreadPoolExecutor pool(2, 6, 60s, WorkQueue::bounded(10));
  CHECK(pool.prestartAllCoreThreads() == 2u);
  CHECK(pool.stats().poolSize == 2u);
  CHECK(pool.prestartAllCoreThreads() == 0u);
  CHECK(pool.stats().poolSize == 2u);
  pool.setCorePoolSize(4);
  CHECK(pool.prestartAllCoreThreads() == 2u);
  CHECK(pool.stats().poolSize == 4u);
  CHECK(pool.prestartAllCoreThreads() == 0u);
  CHECK(pool.stats().poolSize == 4u);
  // Prestarted threads run queued work like any other.
  CHECK(pool.submit([] { return 5; }).get() == 5);
  CHECK(pool.stats().poolSize == 4u);
}

TEST_CASE("maximumPoolSize reads back what was set (RSZ-03)", "[executor][resize]") {
  ThreadPoolExecutor pool(2, 3, 60s, WorkQueue::bounded(10));
  CHECK(pool.maximumPoolSize() == 3u);
  pool.setMaximumPoolSize(5);
  CHECK(pool.maximumPoolSize() == 5u);
  CHECK(pool.stats().maximumPoolSize == 5u);
  pool.setMaximumPoolSize(4);
  CHECK(pool.maximumPoolSize() == 4u);
  pool.setCorePoolSize(3);
  CHECK(pool.corePoolSize() == 3u);
  CHECK(pool.stats().corePoolSize == 3u);
}

TEST_CASE(
    "raising maximumPoolSize is used at once and lowering it retires surplus threads as they finish (RSZ-04 RSZ-05)",
    "[executor][resize]") {
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 2, 60s, WorkQueue::bounded(2));
  StopOnExit stop(gate, pool);
  auto blocker = [&] {
    started.arrive();
    gate.wait();
  };
  for (int i = 0; i < 4; ++i)
    pool.execute(blocker);  // core thread, 2 queued, 1 extra thread
  REQUIRE(started.waitFor(2));
  PoolStats s = pool.stats();
  CHECK(s.poolSize == 2u);
  CHECK(s.activeCount == 2u);
  CHECK(s.queueSize == 2u);
  CHECK(s.taskCount == 4u);

  pool.setMaximumPoolSize(4);
  for (int i = 0; i < 2; ++i)
    pool.execute(blocker);  // the queue is full: two more threads at once
  REQUIRE(started.waitFor(4));
  s = pool.stats();
  CHECK(s.poolSize == 4u);
  CHECK(s.activeCount == 4u);
  CHECK(s.largestPoolSize == 4u);
  CHECK(s.taskCount == 6u);
  CHECK(s.completedTaskCount == 0u);

  pool.setMaximumPoolSize(2);
  CHECK(pool.stats().poolSize == 4u);  // busy threads are not stopped
  gate.open();
  REQUIRE(started.waitFor(6));
  REQUIRE(eventually([&] {
    s = pool.stats();
    return s.completedTaskCount == 6 && s.activeCount == 0 && s.poolSize <= 2;
  }));
  s = pool.stats();
  CHECK(s.poolSize == 2u);  // never fewer than the new maximum (keep-alive is 60 s)
  CHECK(s.maximumPoolSize == 2u);
  CHECK(s.largestPoolSize == 4u);
  CHECK(s.queueSize == 0u);
}

TEST_CASE("lowering keepAliveTime makes idle surplus threads exit with the new value (RSZ-06)",
          "[executor][resize][keepalive][timing]") {
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 3, 60s, WorkQueue::synchronous());
  StopOnExit stop(gate, pool);
  CHECK(pool.keepAliveTime() == 60s);
  executeBlocked(pool, 3, started, gate);
  REQUIRE(started.waitFor(3));
  gate.open();
  REQUIRE(eventually([&] { return pool.stats().completedTaskCount == 3 && pool.stats().activeCount == 0; }));
  CHECK(pool.stats().poolSize == 3u);  // idle, but the keep-alive is 60 s

  pool.setKeepAliveTime(7ms);
  CHECK(pool.keepAliveTime() == 7ms);
  CHECK(eventually([&] { return pool.stats().poolSize == 1; }));
}

TEST_CASE("raising corePoolSize starts threads for the tasks already queued", "[executor][resize]") {
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 4, 60s, WorkQueue::bounded(10));
  StopOnExit stop(gate, pool);
  executeBlocked(pool, 4, started, gate);
  REQUIRE(started.waitFor(1));
  CHECK(pool.stats().queueSize == 3u);

  pool.setCorePoolSize(4);
  REQUIRE(started.waitFor(4));
  const PoolStats s = pool.stats();
  CHECK(s.poolSize == 4u);
  CHECK(s.activeCount == 4u);
  CHECK(s.queueSize == 0u);
}

TEST_CASE("lowering corePoolSize lets surplus idle threads exit but never below the new core",
          "[executor][resize][keepalive][timing]") {
  ThreadPoolExecutor pool(4, 4, 20ms, WorkQueue::bounded(10));
  CHECK(pool.prestartAllCoreThreads() == 4u);
  CHECK(pool.stats().poolSize == 4u);
  pool.setCorePoolSize(1);
  CHECK(pool.corePoolSize() == 1u);
  REQUIRE(eventually([&] { return pool.stats().poolSize == 1; }));
  std::this_thread::sleep_for(60ms);  // room for a wrong implementation to go below core
  CHECK(pool.stats().poolSize == 1u);
  CHECK(pool.submit([] { return 3; }).get() == 3);
}

TEST_CASE("a task that resizes its own pool is not cancelled and keeps its thread (RSZ-07)", "[executor][resize]") {
  Counter started;
  std::atomic<int> cancelSeen{0};
  Gate gate;
  ThreadPoolExecutor pool(4, 4, 1ns, WorkQueue::synchronous());
  StopOnExit stop(gate, pool);
  for (int i = 0; i < 4; ++i) {
    pool.execute([&](CancellationToken token) {
      pool.setCorePoolSize(4);
      pool.setCorePoolSize(1);
      started.arrive();
      gate.wait();
      if (token.isCancellationRequested()) ++cancelSeen;
    });
  }
  REQUIRE(started.waitFor(4));
  CHECK(pool.stats().poolSize == 4u);  // all busy: nobody exits
  CHECK(pool.stats().activeCount == 4u);
  gate.open();
  CHECK(eventually([&] { return pool.stats().poolSize == 1; }));
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(cancelSeen == 0);
  checkTerminated(pool);
}

// ---- KA: keep-alive and core time-out ------------------------------------------

TEST_CASE("idle threads above core exit after keepAliveTime and the pool stays at core (KA-01)",
          "[executor][keepalive][timing]") {
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(2, 4, 20ms, WorkQueue::synchronous());
  StopOnExit stop(gate, pool);
  executeBlocked(pool, 4, started, gate);
  REQUIRE(started.waitFor(4));
  CHECK(pool.stats().poolSize == 4u);
  CHECK(pool.corePoolSize() == 2u);
  CHECK(pool.maximumPoolSize() == 4u);
  gate.open();
  REQUIRE(eventually([&] { return pool.stats().poolSize == 2; }));
  std::this_thread::sleep_for(60ms);  // three more keep-alive periods
  CHECK(pool.stats().poolSize == 2u);
}

TEST_CASE("a keepAliveTime of zero retires surplus threads as soon as they find no work",
          "[executor][keepalive][timing]") {
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 3, 0ns, WorkQueue::synchronous());
  StopOnExit stop(gate, pool);
  executeBlocked(pool, 3, started, gate);
  REQUIRE(started.waitFor(3));
  gate.open();
  CHECK(eventually([&] { return pool.stats().poolSize == 1; }));
  CHECK(pool.submit([] { return 1; }).get() == 1);
}

TEST_CASE("core threads time out only with allowCoreThreadTimeOut (KA-02 KA-03)", "[executor][keepalive][timing]") {
  const bool allow = GENERATE(true, false);
  INFO("allowCoreThreadTimeOut " << allow);
  ThreadPoolExecutor pool(2, 10, 10ms, WorkQueue::bounded(10));
  CHECK_FALSE(pool.allowsCoreThreadTimeOut());
  pool.allowCoreThreadTimeOut(allow);
  CHECK(pool.allowsCoreThreadTimeOut() == allow);
  CHECK(pool.submit([] { return 1; }).get() == 1);
  if (allow) {
    CHECK(eventually([&] { return pool.stats().poolSize == 0; }));
    // A pool whose threads all timed out still runs new work.
    CHECK(pool.submit([] { return 2; }).get() == 2);
    CHECK(eventually([&] { return pool.stats().poolSize == 0; }));
  } else {
    std::this_thread::sleep_for(40ms);  // four keep-alive periods
    CHECK(pool.stats().poolSize == 1u);
  }
}

TEST_CASE("core time-out set in the options lets every core thread exit (KA-04)", "[executor][keepalive][timing]") {
  Counter started;
  Gate gate;
  ThreadPoolOptions options;
  options.corePoolSize = 4;
  options.maximumPoolSize = 4;
  options.keepAliveTime = 20ms;
  options.allowCoreThreadTimeOut = true;
  options.workQueue = WorkQueue::bounded(20);
  ThreadPoolExecutor pool(std::move(options));
  StopOnExit stop(gate, pool);
  CHECK(pool.allowsCoreThreadTimeOut());
  executeBlocked(pool, 4, started, gate);
  REQUIRE(started.waitFor(4));
  CHECK(pool.stats().poolSize == 4u);
  const auto released = std::chrono::steady_clock::now();
  gate.open();
  REQUIRE(eventually([&] { return pool.stats().poolSize == 0; }));
  CHECK(std::chrono::steady_clock::now() - released >= 20ms);
  pool.shutdown();
  CHECK(pool.isTerminated());  // no thread left: terminates inside shutdown()
  CHECK(pool.allowsCoreThreadTimeOut());
  checkTerminated(pool);
}

TEST_CASE("turning on core time-out shrinks an idle pool to zero threads (KA-05)", "[executor][keepalive][timing]") {
  ThreadPoolExecutor pool(3, 3, 7ms, WorkQueue::bounded(10));
  CHECK(pool.prestartAllCoreThreads() == 3u);
  std::this_thread::sleep_for(30ms);  // core threads do not time out yet
  CHECK(pool.stats().poolSize == 3u);
  pool.allowCoreThreadTimeOut(true);
  REQUIRE(eventually([&] { return pool.stats().poolSize == 0; }));
  pool.shutdown();
  CHECK(pool.isTerminated());
  checkTerminated(pool);
  CHECK(pool.stats().largestPoolSize == 3u);
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("prestartCoreThread and prestartAllCoreThreads after shutdown start no thread",
          "[executor][lifecycle][prestart][shutdown][bad-input]") {
  const bool now = GENERATE(false, true);
  INFO((now ? "shutdownNow()" : "shutdown()"));
  ThreadPoolExecutor pool(2, 2, 60s, WorkQueue::bounded(4));
  if (now) {
    CHECK(pool.shutdownNow().empty());
  } else {
    pool.shutdown();
  }
  CHECK_FALSE(pool.prestartCoreThread());
  CHECK(pool.prestartAllCoreThreads() == 0);
  CHECK(pool.stats().poolSize == 0);
  CHECK(pool.isTerminated());
}
