// SPDX-License-Identifier: BSL-1.0
// How a pool reaches TERMINATED: with no thread, once terminated (LIF-07), past cancelled tasks
// (LIF-10), through close() and the destructor (LIF-11), and only after a guest coroutine has left.
#include "coexec/ThreadPoolExecutor.h"

// Lifecycle (LIF) of ThreadPoolExecutor, ported from
// ../shared/reference/jdk-executor-behaviours.md with its numbers. Ordering is
// by gates and counters; sleeps only bound waits or leave room for a wrong
// implementation to show itself. The shutdown states, awaitTermination,
// shutdown() and shutdownNow() are in ThreadPoolShutdownTest.cpp.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "Assertions.h"

#include "TestSupport.h"
#include "ThreadPoolLifecycleTestSupport.h"
#include "coexec/ResumeOn.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"

using namespace std::chrono_literals;

using coexec::Future;
using coexec::OperationCancelled;
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
using coexec::test::queueingShape;
using coexec::test::Shape;
using coexec::test::StopOnExit;

// ---- LIF: lifecycle ----------------------------------------------------------

TEST_CASE("a pool with no thread terminates inside shutdown shutdownNow or close", "[executor][lifecycle]") {
  const int how = GENERATE(0, 1, 2);
  INFO((how == 0 ? "shutdown()" : how == 1 ? "shutdownNow()" : "close()"));
  std::atomic<int> terminatedCalls{0};
  ThreadPoolOptions options;
  options.corePoolSize = 2;
  options.maximumPoolSize = 2;
  options.hooks.terminated = [&] { ++terminatedCalls; };
  ThreadPoolExecutor pool(std::move(options));

  if (how == 0) pool.shutdown();
  if (how == 1) CHECK(pool.shutdownNow().empty());
  if (how == 2) pool.close();
  CHECK(pool.isTerminated());
  CHECK(terminatedCalls == 1);
  checkTerminated(pool);
}

TEST_CASE("shutdown shutdownNow and close on a terminated pool change nothing (LIF-07)", "[executor][lifecycle]") {
  std::atomic<int> terminatedCalls{0};
  ThreadPoolOptions options;
  options.corePoolSize = 2;
  options.maximumPoolSize = 2;
  options.hooks.terminated = [&] { ++terminatedCalls; };
  ThreadPoolExecutor pool(std::move(options));
  CHECK(pool.submit([] { return 1; }).get() == 1);
  CHECK(pool.submit([] { return 2; }).get() == 2);

  pool.shutdown();
  pool.shutdown();  // idempotent while terminating, too
  REQUIRE(pool.awaitTermination(kLong));
  const PoolStats before = pool.stats();

  pool.shutdown();
  CHECK(pool.shutdownNow().empty());
  pool.close();
  CHECK(pool.shutdownNow().empty());
  CHECK(terminatedCalls == 1);
  checkTerminated(pool);
  const PoolStats after = pool.stats();
  CHECK(after.taskCount == before.taskCount);
  CHECK(after.completedTaskCount == 2u);
  CHECK(after.largestPoolSize == before.largestPoolSize);
}

TEST_CASE("a queued task cancelled before shutdown never runs and does not stall termination (LIF-10)",
          "[executor][lifecycle][cancel]") {
  Counter started;
  std::atomic<int> ran{0};
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(4));
  StopOnExit stop(gate, pool);
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  auto cancelled = pool.submit([&] { ++ran; });
  REQUIRE(cancelled.cancel());
  pool.shutdown();
  gate.open();
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(ran == 0);
  CHECK_THROWS_AS(cancelled.get(), OperationCancelled);
  checkTerminated(pool);
  CHECK(pool.stats().cancelledCount == 1u);
  CHECK(pool.stats().completedTaskCount == 1u);
}

TEST_CASE("a task cancelled right after submit to an idle worker does not stall shutdown (LIF-10)",
          "[executor][lifecycle][cancel]") {
  // Room for all 50: a cancelled task keeps its queue slot until a worker skips it.
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(64));
  CHECK(pool.submit([] { return 1; }).get() == 1);
  for (int i = 0; i < 50; ++i) {
    auto future = pool.submit([] { return 2; });
    (void)future.cancel();  // races the worker taking the task
    REQUIRE(future.waitFor(kLong));
  }
  pool.shutdown();
  CHECK(pool.awaitTermination(kLong));
  checkTerminated(pool);
  CHECK(pool.stats().taskCount == 51u);
}

TEST_CASE("close waits for running and queued tasks and leaves the pool terminated (LIF-11)",
          "[executor][lifecycle][close]") {
  Counter started;
  std::atomic<bool> queuedFinished{false};
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(4));
  StopOnExit stop(gate, pool);
  executeBlocked(pool, 1, started, gate);
  pool.execute([&] { queuedFinished = true; });
  REQUIRE(started.waitFor(1));
  {
    // Whether the gate opens before or during close(), close must wait for both.
    std::jthread opener([&] {
      std::this_thread::sleep_for(20ms);
      gate.open();
    });
    pool.close();
    CHECK(queuedFinished);
  }
  CHECK(pool.isShutdown());
  CHECK(pool.isTerminated());
  CHECK(pool.awaitTermination(10ms));
  checkTerminated(pool);
}

TEST_CASE("close on an idle or shut-down or terminated pool leaves it terminated (LIF-11)",
          "[executor][lifecycle][close]") {
  const int before = GENERATE(0, 1, 2, 3);
  INFO((before == 0 ? "never used" : before == 1 ? "idle with a thread" : before == 2 ? "shut down" : "terminated"));
  ThreadPoolExecutor pool(1, 2, 60s, WorkQueue::bounded(4));
  if (before >= 1) CHECK(pool.submit([] { return 1; }).get() == 1);
  if (before >= 2) pool.shutdown();
  if (before >= 3) REQUIRE(pool.awaitTermination(kLong));
  pool.close();
  checkTerminated(pool);
  pool.close();
  checkTerminated(pool);
}

TEST_CASE("the destructor runs every queued task before it returns (LIF-08 LIF-11)", "[executor][lifecycle][close]") {
  const Shape shape = queueingShape();
  INFO(shape.label);
  std::atomic<int> ran{0};
  Gate gate;
  {
    ThreadPoolExecutor pool(shape.threads, shape.threads, 60s, shape.queue);
    for (std::size_t i = 0; i < shape.threads; ++i)
      pool.execute([&] { gate.wait(); });
    for (int i = 0; i < 12; ++i)
      pool.execute([&] { ++ran; });
    std::jthread opener([&] {
      std::this_thread::sleep_for(20ms);
      gate.open();
    });
  }  // the opener joins first, then the pool's destructor waits
  CHECK(ran == 12);
}

TEST_CASE("close and awaitTermination called from a pool thread throw std::logic_error",
          "[executor][lifecycle][close]") {
  std::atomic<int> closeThrew{0};
  std::atomic<int> awaitThrew{0};
  std::string closeMessage;
  std::string awaitMessage;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(4));
  auto future = pool.submit([&] {
    try {
      pool.close();
    } catch (const std::logic_error& e) {
      ++closeThrew;
      closeMessage = e.what();
    }
    try {
      (void)pool.awaitTermination(1ms);
    } catch (const std::logic_error& e) {
      ++awaitThrew;
      awaitMessage = e.what();
    }
  });
  REQUIRE(future.waitFor(kLong));
  future.get();
  CHECK(closeThrew == 1);
  CHECK(awaitThrew == 1);
  CHECK(closeMessage ==
        "coexec::ThreadPoolExecutor::close (or the destructor) called from a thread of pool 'coexec' itself: a pool "
        "cannot wait for its own threads");
  CHECK(awaitMessage ==
        "coexec::ThreadPoolExecutor::awaitTermination called from a thread of pool 'coexec' itself: the pool cannot "
        "terminate while this thread runs a task");
  CHECK_FALSE(pool.isShutdown());  // the refused close() did not shut the pool down
}

// ---- a guest coroutine holds the pool from TERMINATED ------------------------

TEST_CASE("a guest coroutine suspended on a pool holds it from TERMINATED: the terminated hook runs after the guest "
          "has left, and no thread outlives the pool",
          "[lifecycle][terminated][coroutine]") {
  // A coroutine that hopped onto the pool (a guest: its hop is a plain task,
  // done once the coroutine suspends) awaits a Future of another pool. The
  // pool, shut down meanwhile, must neither terminate under it (its
  // continuation would be posted to a pool that may be gone, and a worker
  // started for it would park forever in a TERMINATED pool) nor lose it: the
  // guest resumes on the pool, finishes there, and only then does the pool
  // terminate and run its hook.
  Gate hookGate;
  Gate otherGate;
  Gate afterResume;
  Counter hookEntered;
  Counter resumed;
  ThreadPoolOptions options;
  options.name = "hooked";
  options.hooks.terminated = [&] {
    hookEntered.arrive();
    hookGate.wait();
  };
  auto pool = std::make_unique<ThreadPoolExecutor>(options);
  ThreadPoolExecutor other(1, 1, 60s, WorkQueue::bounded(4));
  coexec::test::OpenOnExit releaseHook(hookGate);
  coexec::test::OpenOnExit releaseOther(otherGate);
  coexec::test::OpenOnExit releaseAfter(afterResume);
  Counter awaiting;
  std::thread coroutineThread([&] {
    coexec::syncWait([&]() -> coexec::Task<void> {
      co_await coexec::resumeOn(*pool);  // a hop: a plain task of `pool`, done once the coroutine suspends below
      Future<void> f = other.submit([&] { otherGate.wait(); });
      awaiting.arrive();
      co_await f;  // resumes on `pool` (posted from `other`'s thread)
      resumed.arrive();
      afterResume.wait();
    }());
  });
  REQUIRE(awaiting.waitFor(1));
  REQUIRE(eventually([&] { return pool->stats().activeCount == 0; }));  // the hop has returned
  pool->shutdown();                                                     // the guest still waits on the pool
  CHECK_FALSE(pool->awaitTermination(50ms));
  CHECK(hookEntered.count() == 0);
  otherGate.open();  // the guest resumes on `pool`, shut down but not terminated
  REQUIRE(resumed.waitFor(1));
  CHECK(hookEntered.count() == 0);
  CHECK_FALSE(pool->isTerminated());
  afterResume.open();  // the guest finishes: the pool may terminate now
  REQUIRE(hookEntered.waitFor(1));
  hookGate.open();
  REQUIRE(pool->awaitTermination(kLong));
  coroutineThread.join();
  CHECK(eventually([&] { return pool->stats().poolSize == 0; }));
}
