// SPDX-License-Identifier: BSL-1.0
// Shutting a pool down: isShutdown, isTerminating, isTerminated and awaitTermination, shutdown()
// letting the tasks finish, shutdownNow() returning the queued ones and cancelling the running ones.
#include "coexec/ThreadPoolExecutor.h"

// Lifecycle (LIF) of ThreadPoolExecutor, ported from
// ../shared/reference/jdk-executor-behaviours.md with its numbers. Ordering is
// by gates and counters; sleeps only bound waits or leave room for a wrong
// implementation to show itself.
//
// LIF-12 (closing thread interrupted -> close escalates to shutdownNow) is not
// ported: C++ threads have no interrupts, so there is nothing to escalate on.
// The cooperative counterpart, shutdownNow() cancelling the running tasks'
// tokens, is covered by LIF-04 below.
//
// Termination, close() and the destructor are in ThreadPoolTerminationTest.cpp;
// resizing (RSZ) and keep-alive (KA) in ThreadPoolResizeTest.cpp.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "TestSupport.h"
#include "ThreadPoolLifecycleTestSupport.h"
#include "coexec/detail/FaultInjection.h"

using namespace std::chrono_literals;

using coexec::BrokenPromise;
using coexec::CancellationRegistration;
using coexec::CancellationToken;
using coexec::Future;
using coexec::PendingTask;
using coexec::PoolState;
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

namespace {

/// Blocks the calling task until its token is cancelled (bounded by Gate).
void waitForCancellation(const CancellationToken& token) {
  Gate cancelled;
  CancellationRegistration registration(token, [&cancelled] { cancelled.open(); });
  cancelled.wait();
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

// ---- shutdownNow racing a submission ----------------------------------------

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
