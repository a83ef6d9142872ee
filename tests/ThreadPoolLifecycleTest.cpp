#include "coexec/ThreadPoolExecutor.h"

// Lifecycle (LIF), dynamic resizing (RSZ) and keep-alive (KA) of
// ThreadPoolExecutor, ported from ../shared/reference/jdk-executor-behaviours.md
// with its numbers. Ordering is by gates and counters; sleeps only bound waits
// or leave room for a wrong implementation to show itself.
//
// LIF-12 (closing thread interrupted -> close escalates to shutdownNow) is not
// ported: C++ threads have no interrupts, so there is nothing to escalate on.
// The cooperative counterpart, shutdownNow() cancelling the running tasks'
// tokens, is covered by LIF-04 below.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "TestSupport.h"
#include "coexec/ResumeOn.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/detail/FaultInjection.h"

using namespace std::chrono_literals;

using coexec::BrokenPromise;
using coexec::CancellationRegistration;
using coexec::CancellationToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::PendingTask;
using coexec::PoolState;
using coexec::PoolStats;
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

/// Blocks the calling task until its token is cancelled (bounded by Gate).
void waitForCancellation(const CancellationToken& token) {
  Gate cancelled;
  CancellationRegistration registration(token, [&cancelled] { cancelled.open(); });
  cancelled.wait();
}

/// LIF-06: the state of a terminated pool.
void checkTerminated(ThreadPoolExecutor& pool) {
  CHECK(pool.awaitTermination(0ns));
  CHECK(pool.isShutdown());
  CHECK(pool.isTerminated());
  CHECK_FALSE(pool.isTerminating());
  const PoolStats s = pool.stats();
  CHECK(s.state == PoolState::terminated);
  CHECK(s.queueSize == 0u);
  CHECK(s.activeCount == 0u);
  CHECK(s.poolSize == 0u);
  checkLedgerAddsUp(s);
}

/// A pool shape the same contract runs over.
struct Shape {
  const char* label;
  std::size_t threads;  // core == max
  WorkQueue queue;
};

Shape queueingShape() {
  return GENERATE(values<Shape>({
      {"one thread, bounded queue", 1, WorkQueue::bounded(16)},
      {"two threads, bounded queue", 2, WorkQueue::bounded(16)},
      {"two threads, unbounded queue", 2, WorkQueue::unbounded()},
      {"one thread, priority queue, equal priorities", 1, WorkQueue::priority(16)},
  }));
}

}  // namespace

// ---- LIF: lifecycle ----------------------------------------------------------

TEST_CASE("isShutdown isTerminating and isTerminated follow a busy pool through shutdown (LIF-01 LIF-03 LIF-06)",
          "[executor][lifecycle]") {
  const auto queue = GENERATE(values<WorkQueue>(
      {WorkQueue::bounded(10), WorkQueue::synchronous(), WorkQueue::unbounded(), WorkQueue::priority(10)}));
  INFO("queue " << queue.describe());
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, queue);
  StopOnExit stop(gate, pool);

  CHECK_FALSE(pool.isShutdown());
  CHECK_FALSE(pool.isTerminating());
  CHECK_FALSE(pool.isTerminated());

  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  CHECK_FALSE(pool.isShutdown());
  CHECK_FALSE(pool.isTerminating());
  CHECK(pool.stats().state == PoolState::running);

  pool.shutdown();
  CHECK(pool.isShutdown());
  CHECK(pool.isTerminating());
  CHECK_FALSE(pool.isTerminated());
  CHECK(pool.stats().state == PoolState::shutdown);
  CHECK_FALSE(pool.awaitTermination(0ns));

  gate.open();
  REQUIRE(pool.awaitTermination(kLong));
  checkTerminated(pool);
  CHECK(pool.stats().completedTaskCount == 1u);
}

TEST_CASE("awaitTermination on a live pool returns false after at least its timeout (LIF-02)",
          "[executor][lifecycle][timing]") {
  const bool busy = GENERATE(false, true);
  INFO((busy ? "a thread is running a task" : "the pool never ran anything"));
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(10));
  StopOnExit stop(gate, pool);
  if (busy) {
    executeBlocked(pool, 1, started, gate);
    REQUIRE(started.waitFor(1));
  }

  CHECK_FALSE(pool.awaitTermination(0ns));
  CHECK_FALSE(pool.awaitTermination(-1ns));
  CHECK_FALSE(pool.awaitTermination(std::chrono::nanoseconds::min()));

  auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(pool.awaitTermination(999'999ns));
  CHECK(std::chrono::steady_clock::now() - t0 >= 999'999ns);

  t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(pool.awaitTermination(12ms));
  CHECK(std::chrono::steady_clock::now() - t0 >= 12ms);
  CHECK_FALSE(pool.isTerminated());

  pool.shutdown();
  gate.open();
  CHECK(pool.awaitTermination(kLong));
  checkTerminated(pool);
}

TEST_CASE("awaitTermination with the largest timeout waits for termination instead of overflowing",
          "[executor][lifecycle]") {
  Counter started;
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(10));
  StopOnExit stop(gate, pool);
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  pool.shutdown();
  bool terminated = false;
  {
    // Whether the gate opens before or during the wait, the answer is true.
    std::jthread opener([&] {
      std::this_thread::sleep_for(20ms);
      gate.open();
    });
    terminated = pool.awaitTermination(std::chrono::nanoseconds::max());
  }
  CHECK(terminated);
  CHECK(pool.isTerminated());
}

TEST_CASE("shutdown lets running and queued tasks finish without cancelling them (LIF-08)",
          "[executor][lifecycle][shutdown]") {
  const Shape shape = queueingShape();
  INFO(shape.label);
  Counter started;
  std::atomic<int> cancelSeen{0};
  std::atomic<int> queuedRan{0};
  Gate gate;
  ThreadPoolExecutor pool(shape.threads, shape.threads, 60s, shape.queue);
  StopOnExit stop(gate, pool);

  for (std::size_t i = 0; i < shape.threads; ++i) {
    pool.execute([&](CancellationToken token) {
      started.arrive();
      gate.wait();
      if (token.isCancellationRequested()) ++cancelSeen;
    });
  }
  REQUIRE(started.waitFor(shape.threads));
  std::vector<Future<int>> futures;
  for (int i = 0; i < 8; ++i) {
    futures.push_back(pool.submit([&queuedRan, i] {
      ++queuedRan;
      return i * 10;
    }));
  }

  pool.shutdown();
  CHECK(pool.isTerminating());
  CHECK(pool.stats().queueSize == 8u);
  CHECK_FALSE(pool.awaitTermination(20ms));  // every thread is still blocked
  CHECK(queuedRan == 0);

  gate.open();
  REQUIRE(pool.awaitTermination(kLong));
  for (int i = 0; i < 8; ++i)
    CHECK(futures[static_cast<std::size_t>(i)].get() == i * 10);
  CHECK(queuedRan == 8);
  CHECK(cancelSeen == 0);
  checkTerminated(pool);
  const PoolStats s = pool.stats();
  CHECK(s.taskCount == shape.threads + 8);
  CHECK(s.completedTaskCount == shape.threads + 8);
  CHECK(s.drainedCount == 0u);
}

TEST_CASE("shutdownNow returns the never-started tasks in queue order and cancels the running ones (LIF-04)",
          "[executor][lifecycle][shutdown]") {
  const Shape shape = queueingShape();
  const bool shutdownFirst = GENERATE(false, true);
  INFO(shape.label << (shutdownFirst ? ", after shutdown()" : ", on a running pool"));
  Counter started;
  std::atomic<int> cancelSeen{0};
  std::atomic<int> queuedRan{0};
  std::mutex orderMutex;
  std::vector<int> order;
  Gate gate;
  ThreadPoolExecutor pool(shape.threads, shape.threads, 60s, shape.queue);
  StopOnExit stop(gate, pool);

  for (std::size_t i = 0; i < shape.threads; ++i) {
    pool.execute([&](CancellationToken token) {
      started.arrive();
      waitForCancellation(token);
      ++cancelSeen;
    });
  }
  REQUIRE(started.waitFor(shape.threads));
  CHECK(pool.stats().activeCount == shape.threads);
  CHECK(pool.stats().completedTaskCount == 0u);

  std::vector<Future<int>> futures;
  for (int i = 0; i < 5; ++i) {
    futures.push_back(pool.submit([&, i] {
      ++queuedRan;
      std::lock_guard lock(orderMutex);
      order.push_back(i);
      return i;
    }));
  }
  if (shutdownFirst) pool.shutdown();

  std::vector<PendingTask> drained = pool.shutdownNow();
  REQUIRE(drained.size() == 5u);
  CHECK(pool.isShutdown());
  CHECK(pool.stats().queueSize == 0u);
  CHECK(pool.stats().drainedCount == 5u);
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(cancelSeen == static_cast<int>(shape.threads));
  CHECK(queuedRan == 0);

  // The returned tasks are the caller's: not settled until run or dropped.
  for (auto& future : futures)
    CHECK_FALSE(future.isDone());
  for (auto& task : drained) {
    CHECK(task.valid());
    CHECK(task.hasFuture());
    task.run();
  }
  {
    std::lock_guard lock(orderMutex);
    CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
  }
  for (int i = 0; i < 5; ++i)
    CHECK(futures[static_cast<std::size_t>(i)].get() == i);

  checkTerminated(pool);
  const PoolStats s = pool.stats();
  CHECK(s.taskCount == shape.threads + 5);
  CHECK(s.completedTaskCount == shape.threads);  // they returned normally after seeing the token
  CHECK(s.drainedCount == 5u);
}

TEST_CASE("shutdownNow on a priority queue returns the highest priority first and FIFO among equals",
          "[executor][lifecycle][shutdown]") {
  Counter started;
  std::mutex orderMutex;
  std::vector<int> order;
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::priority(16));
  StopOnExit stop(gate, pool);
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));

  const int priorities[] = {1, 5, 3, 5, 2};
  for (int id = 0; id < 5; ++id) {
    pool.execute(
        [&, id] {
          std::lock_guard lock(orderMutex);
          order.push_back(id);
        },
        priorities[id]);
  }
  std::vector<PendingTask> drained = pool.shutdownNow();
  REQUIRE(drained.size() == 5u);
  std::vector<int> drainedPriorities;
  for (auto& task : drained)
    drainedPriorities.push_back(task.priority());
  CHECK(drainedPriorities == std::vector<int>{5, 5, 3, 2, 1});
  for (auto& task : drained)
    task.run();
  std::lock_guard lock(orderMutex);
  CHECK(order == std::vector<int>{1, 3, 2, 4, 0});
}

TEST_CASE("tasks dropped after shutdownNow report BrokenPromise to their Futures", "[executor][lifecycle][shutdown]") {
  Counter started;
  std::atomic<int> ran{0};
  Gate gate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(8));
  StopOnExit stop(gate, pool);
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  std::vector<Future<int>> futures;
  for (int i = 0; i < 3; ++i)
    futures.push_back(pool.submit([&] { return ++ran; }));

  std::vector<PendingTask> drained = pool.shutdownNow();
  REQUIRE(drained.size() == 3u);
  drained.clear();
  for (auto& future : futures) {
    CHECK(future.isDone());
    CHECK_FALSE(future.isCancelled());
    CHECK_THROWS_AS(future.get(), BrokenPromise);
  }
  gate.open();
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(ran == 0);
  checkTerminated(pool);
}

TEST_CASE("shutdownNow leaves a task that ignores its token running until it returns",
          "[executor][lifecycle][shutdown]") {
  Counter started;
  std::atomic<int> finished{0};
  Gate gate;
  ThreadPoolExecutor pool(2, 2, 60s, WorkQueue::bounded(8));
  StopOnExit stop(gate, pool);
  for (int i = 0; i < 2; ++i) {
    pool.execute([&] {
      started.arrive();
      gate.wait();
      ++finished;
    });
  }
  REQUIRE(started.waitFor(2));

  CHECK(pool.shutdownNow().empty());
  CHECK(pool.isTerminating());
  CHECK(pool.stats().state == PoolState::stop);
  CHECK_FALSE(pool.awaitTermination(20ms));
  CHECK(finished == 0);

  gate.open();
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(finished == 2);
  checkTerminated(pool);
  CHECK(pool.stats().completedTaskCount == 2u);
}

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

TEST_CASE("a task handed to a parked worker just before shutdownNow starts with its token cancelled",
          "[lifecycle][shutdownNow][token]") {
  // synchronous(): submit() hands the task to the parked worker, and
  // shutdownNow() follows at once, while the worker is still waking up. The
  // task is then neither queued (nothing to return) nor running (no token to
  // cancel yet): it must start with its token cancelled, not run after
  // shutdownNow() returned with a token that never fires.
  // At least `rounds` rounds, then more until the window was hit at least
  // once (a loaded machine may hit it rarely), up to `maxRounds`.
  const int rounds = coexec::test::kSanitized ? 100 : 400;
  const int maxRounds = 50 * rounds;
  int returned = 0;
  int startedCancelled = 0;
  int startedBefore = 0;
  for (int i = 0; i < maxRounds && (i < rounds || startedCancelled == 0); ++i) {
    ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::synchronous());
    REQUIRE(pool.prestartCoreThread());
    std::atomic<bool> shutdownNowReturned{false};
    std::atomic<int> seen{0};  // 1: started after shutdownNow returned, token not cancelled; 2: cancelled; 3: before
    // The worker must be parked for the hand-off: retry until it takes it.
    std::optional<Future<void>> task;
    REQUIRE(eventually([&] {
      try {
        task = pool.submit([&](CancellationToken token) {
          const bool after = shutdownNowReturned.load();
          seen = token.isCancellationRequested() ? 2 : after ? 1 : 3;
        });
        return true;
      } catch (const coexec::RejectedExecution&) {
        return false;
      }
    }));
    const std::vector<PendingTask> unrun = pool.shutdownNow();
    shutdownNowReturned = true;
    REQUIRE(pool.awaitTermination(kLong));
    if (!unrun.empty()) {
      ++returned;
      continue;
    }
    INFO("round " << i);
    REQUIRE(seen.load() != 0);
    CHECK(seen.load() != 1);
    (seen.load() == 2 ? startedCancelled : startedBefore) += 1;
  }
  INFO("returned " << returned << ", started cancelled " << startedCancelled << ", started before " << startedBefore);
  CHECK(startedCancelled > 0);  // the window this test is about was hit
}

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

TEST_CASE("a submission whose task shutdownNow drains before it starts a thread starts none on the terminated pool",
          "[executor][lifecycle][shutdownNow][reliability]") {
  // Caught by the model-based stress driver (a pool's destructor waited
  // forever for a worker parked on the TERMINATED pool): a submission's
  // lock-free push into the shared queue landed, then shutdownNow() drained
  // the task and the pool, which had no thread, terminated; the submission
  // then started a thread for its task. Here the admission pause point runs
  // shutdownNow() in that window, on the submitting thread.
  using coexec::detail::FaultInjection;
  if (!FaultInjection::available()) {
    WARN("this build has no fault points (COEXEC_FAULT_INJECTION=OFF): nothing to check");
    return;
  }
  struct Window {
    ThreadPoolExecutor* pool = nullptr;
    std::vector<PendingTask> drained;
    std::atomic<bool> terminated{false};
    int calls = 0;
  } window;
  struct Disarm {
    ~Disarm() { FaultInjection::setAfterLockFreePush(nullptr, nullptr); }
  } disarm;
  std::atomic<int> threadsAfterTermination{0};
  std::atomic<int> factoryErrors{0};
  ThreadPoolOptions options;
  options.name = "pushed";
  options.corePoolSize = 0;  // no thread until the first task: the push takes the lock-free path
  options.maximumPoolSize = 1;
  options.workQueue = WorkQueue::unbounded();
  // A thread asked for after the termination is refused (it would park on
  // the terminated pool, and the destructor would wait for it forever).
  options.threadFactory = [&](const std::string&, std::function<void()> body) -> std::thread {
    if (window.terminated.load()) {
      threadsAfterTermination.fetch_add(1);
      throw std::runtime_error("a thread for a terminated pool");
    }
    return std::thread(std::move(body));
  };
  options.uncaughtExceptionHandler = [&](const std::exception_ptr&, const coexec::TaskInfo&) {
    factoryErrors.fetch_add(1);
  };
  ThreadPoolExecutor pool(options);
  window.pool = &pool;
  FaultInjection::setAfterLockFreePush(
      [](void* arg) {
        auto& w = *static_cast<Window*>(arg);
        if (w.calls++ != 0) return;
        w.drained = w.pool->shutdownNow();
        w.terminated = w.pool->isTerminated();
      },
      &window);
  Future<int> future = pool.submit([] { return 1; });
  FaultInjection::setAfterLockFreePush(nullptr, nullptr);
  REQUIRE(window.calls == 1);
  REQUIRE(window.drained.size() == 1);  // the task, drained before it ran
  REQUIRE(window.terminated.load());    // no thread: terminated inside shutdownNow()
  CHECK(pool.stats().poolSize == 0);
  CHECK(pool.stats().state == PoolState::terminated);
  CHECK(threadsAfterTermination.load() == 0);
  CHECK(factoryErrors.load() == 0);
  window.drained.clear();  // dropped: its Future reports BrokenPromise
  CHECK_THROWS_AS(future.get(), BrokenPromise);
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
