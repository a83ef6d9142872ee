// SPDX-License-Identifier: BSL-1.0
#include "coexec/CancellationToken.h"

// std::stop_token and coexec's cancellation (docs/cancellation.md,
// "std::stop_token, std::jthread and Asio"), part two (StopTokenTest.cpp has
// the conversions and pool tasks taking a std::stop_token):
// - pool.submit(f, stopToken) / execute(f, stopToken) (with a priority): the
//   task is linked to the stop token as to a CancellationToken, including a
//   std::jthread's;
// - co_await currentStopToken() in a coroutine task and under syncWait().
//
// Ordering is by gates, counters and the stop tokens themselves (a task waits
// for its stop with a condition_variable_any bounded by kLong); no sleep
// decides an outcome.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "CoroutineTestSupport.h"
#include "StopTokenTestSupport.h"
#include "TestSupport.h"
#include "coexec/CurrentToken.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/FaultInjection.h"

using coexec::CancellationRegistration;
using coexec::CancellationToken;
using coexec::currentStopToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::PoolStats;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::detail::FaultInjection;
using coexec::detail::registrationCount;
using coexec::test::bridges;
using coexec::test::checkLedgerAddsUp;
using coexec::test::Counter;
using coexec::test::executeBlocked;
using coexec::test::finalStats;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::OpenOnExit;
using coexec::test::taggedPool;
using coexec::test::throwsA;
using coexec::test::waitForStop;
using namespace std::chrono_literals;

// ---- pool.submit(f, stopToken) ------------------------------------------------------------

TEST_CASE("a stop requested while the task is queued: it never runs and its Future settles at once",
          "[stoptoken][link]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(taggedPool("lq", 1, 1, WorkQueue::bounded(8)));
  OpenOnExit release(gate);
  executeBlocked(pool, 1, started, gate);  // holds the only thread: the task stays queued
  REQUIRE(started.waitFor(1));
  std::stop_source source;
  std::atomic<int> ran{0};
  Future<int> future = pool.submit(
      [&ran] {
        ran.fetch_add(1);
        return 1;
      },
      source.get_token());
  CHECK_FALSE(future.isDone());
  CHECK(source.request_stop());
  CHECK(future.isDone());  // at once, on this thread
  CHECK(future.isCancelled());
  CHECK(throwsA<OperationCancelled>([&] { future.get(); }));
  gate.open();
  const PoolStats stats = finalStats(pool);
  CHECK(ran.load() == 0);
  CHECK(stats.taskCount == 2);
  CHECK(stats.cancelledCount == 1);
  CHECK(stats.completedTaskCount == 1);  // the blocker
  CHECK(stats.rejectedCount == 0);
  checkLedgerAddsUp(stats);
}

TEST_CASE("a stop_token stopped already: the task never runs, counts as cancelled, is not admitted, also after shutdown",
          "[stoptoken][link]") {
  std::stop_source source;
  source.request_stop();
  std::atomic<int> ran{0};
  auto work = [&ran] {
    ran.fetch_add(1);
    return 1;
  };
  ThreadPoolExecutor pool(taggedPool("ls", 1, 1, WorkQueue::bounded(8)));
  Future<int> plain = pool.submit(work, source.get_token());
  Future<int> prioritised = pool.submit(work, source.get_token(), 5);
  pool.execute(work, source.get_token());
  pool.execute(work, source.get_token(), 5);
  CHECK(plain.isCancelled());
  CHECK(prioritised.isCancelled());
  CHECK(throwsA<OperationCancelled>([&] { plain.get(); }));
  CHECK(throwsA<OperationCancelled>([&] { prioritised.get(); }));
  pool.shutdown();
  Future<int> afterShutdown = pool.submit(work, source.get_token());  // no RejectedExecution under abort()
  pool.execute(work, source.get_token());
  CHECK(throwsA<OperationCancelled>([&] { afterShutdown.get(); }));
  REQUIRE(pool.awaitTermination(kLong));
  const PoolStats stats = pool.stats();
  CHECK(ran.load() == 0);
  CHECK(stats.taskCount == 6);
  CHECK(stats.cancelledCount == 6);
  CHECK(stats.rejectedCount == 0);
  CHECK(stats.completedTaskCount == 0);
  CHECK(stats.largestPoolSize == 0);  // nothing was admitted: no thread ever started
  checkLedgerAddsUp(stats);
}

TEST_CASE("a stop requested while the task runs cancels the task's own token and std::stop_token",
          "[stoptoken][link]") {
  Counter started;
  Counter sawCancellation;
  std::thread::id callbackThread;
  ThreadPoolExecutor pool(taggedPool("lr", 2, 2, WorkQueue::bounded(8)));
  std::stop_source source;
  Future<int> withToken = pool.submit(
      [&](CancellationToken own) {
        CancellationRegistration registration(own, [&] {
          callbackThread = std::this_thread::get_id();
          sawCancellation.arrive();
        });
        started.arrive();
        return waitForStop(own.stopToken()) ? 1 : 0;
      },
      source.get_token());
  Future<int> withStop = pool.submit([&](std::stop_token own) {
    started.arrive();
    return waitForStop(own) ? 2 : 0;
  }, source.get_token(), /*priority=*/3);
  REQUIRE(started.waitFor(2));
  std::thread::id requester;
  std::thread requesting([&] {
    requester = std::this_thread::get_id();
    source.request_stop();
  });
  requesting.join();
  CHECK(sawCancellation.count() == 1);  // inside request_stop()
  CHECK(callbackThread == requester);
  // Linked and cancelled: the Futures report OperationCancelled whatever the tasks returned.
  CHECK(throwsA<OperationCancelled>([&] { withToken.get(); }));
  CHECK(throwsA<OperationCancelled>([&] { withStop.get(); }));
  const PoolStats stats = finalStats(pool);
  CHECK(stats.taskCount == 2);
  checkLedgerAddsUp(stats);
}

TEST_CASE("execute(f, stopToken): a stop request reaches the running task", "[stoptoken][link]") {
  Counter started;
  Counter stopped;
  ThreadPoolExecutor pool(taggedPool("le", 1, 1, WorkQueue::bounded(8)));
  std::stop_source source;
  pool.execute(
      [&](std::stop_token own) {
        started.arrive();
        if (waitForStop(own)) stopped.arrive();
      },
      source.get_token());
  REQUIRE(started.waitFor(1));
  source.request_stop();
  REQUIRE(stopped.waitFor(1));
  const PoolStats stats = finalStats(pool);
  CHECK(stats.taskCount == 1);
  checkLedgerAddsUp(stats);
}

TEST_CASE("a std::jthread's stop token handed to the pool: request_stop() and the destructor cancel the task",
          "[stoptoken][link][jthread]") {
  ThreadPoolExecutor pool(taggedPool("lj", 2, 2, WorkQueue::bounded(8)));
  const auto waitUntilStopped = [](std::stop_token own) { (void)waitForStop(own); };
  Counter started;
  auto task = [&](std::stop_token own) {
    started.arrive();
    return waitForStop(own) ? 1 : 0;
  };

  SECTION("request_stop()") {
    std::jthread worker(waitUntilStopped);
    Future<int> future = pool.submit(task, worker.get_stop_token());
    REQUIRE(started.waitFor(1));
    CHECK_FALSE(future.isDone());
    CHECK(worker.request_stop());
    CHECK(throwsA<OperationCancelled>([&] { future.get(); }));
  }
  SECTION("the destructor") {
    std::optional<Future<int>> future;
    {
      std::jthread worker(waitUntilStopped);
      future = pool.submit(task, worker.get_stop_token());
      REQUIRE(started.waitFor(1));
    }  // requests stop, then joins
    CHECK(throwsA<OperationCancelled>([&] { future->get(); }));
  }
  const PoolStats stats = finalStats(pool);
  CHECK(stats.taskCount == 1);
  checkLedgerAddsUp(stats);
}

TEST_CASE("children of a task linked to a stop token are cancelled when the stop is requested",
          "[stoptoken][link][children]") {
  Counter started;
  std::atomic<int> childRuns{0};
  std::atomic<bool> parentSawStop{false};
  std::optional<Future<int>> queuedChild;
  std::optional<Future<int>> runningChild;
  Counter childStarted;
  ThreadPoolExecutor pool(taggedPool("lc", 2, 2, WorkQueue::bounded(16)));
  ThreadPoolExecutor other(taggedPool("lo", 1, 1, WorkQueue::bounded(16)));
  Gate otherBusy;
  Counter otherStarted;
  OpenOnExit releaseOther(otherBusy);
  executeBlocked(other, 1, otherStarted, otherBusy);  // its child there stays queued
  REQUIRE(otherStarted.waitFor(1));
  std::stop_source source;
  Future<int> parent = pool.submit(
      [&](std::stop_token own) {
        queuedChild = other.submit([&childRuns] { return childRuns.fetch_add(1); });
        runningChild = pool.submit([&](std::stop_token childOwn) {
          childStarted.arrive();
          return waitForStop(childOwn) ? 2 : 0;
        });
        if (!childStarted.waitFor(1)) return -1;  // (no Catch2 on a pool thread; the test checks the parent's end)
        started.arrive();
        parentSawStop = waitForStop(own);
        return 1;
      },
      source.get_token());
  REQUIRE(started.waitFor(1));
  CHECK_FALSE(queuedChild->isDone());
  source.request_stop();
  CHECK(queuedChild->isDone());  // settled at once, on this thread
  CHECK(queuedChild->isCancelled());
  CHECK(throwsA<OperationCancelled>([&] { queuedChild->get(); }));
  CHECK(throwsA<OperationCancelled>([&] { runningChild->get(); }));
  CHECK(throwsA<OperationCancelled>([&] { parent.get(); }));
  CHECK(parentSawStop.load());
  otherBusy.open();
  const PoolStats otherStats = finalStats(other);
  CHECK(childRuns.load() == 0);
  CHECK(otherStats.cancelledCount == 1);
  checkLedgerAddsUp(otherStats);
  const PoolStats stats = finalStats(pool);
  CHECK(stats.taskCount == 2);
  checkLedgerAddsUp(stats);
}

TEST_CASE("a long-lived stop_source handed to 1000 tasks keeps nothing of them once they have settled",
          "[stoptoken][link][leak]") {
  const std::size_t before = bridges();
  std::stop_source longLived;
  const CancellationToken converted = longLived.get_token();
  ThreadPoolExecutor pool(taggedPool("ll", 2, 2, WorkQueue::bounded(2048)));
  std::vector<Future<int>> futures;
  futures.reserve(2000);
  for (int i = 0; i < 1000; ++i) {
    futures.push_back(pool.submit([i](std::stop_token own) { return own.stop_requested() ? -1 : i; }, converted));
    futures.push_back(pool.submit([i] { return i; }, longLived.get_token()));  // a bridge of its own each
  }
  long sum = 0;
  for (Future<int>& future : futures) sum += future.get();
  CHECK(sum == 2 * (999L * 1000 / 2));
  const PoolStats stats = finalStats(pool);  // every link is released by the time the pool has terminated
  CHECK(stats.completedTaskCount == 2000);
  checkLedgerAddsUp(stats);
  CHECK(registrationCount(converted) == 0);
  if (FaultInjection::available()) CHECK(bridges() == before + 1);  // `converted` alone
}

// ---- currentStopToken() ----------------------------------------------------------------------

namespace {

struct StopProbe {
  std::mutex mutex;
  std::optional<std::stop_token> stop;
  bool stopRequestedAfterResume = false;
};

Task<int> awaitBlocked(Future<int>& blocked, StopProbe& probe, Counter& reached) {
  {
    auto named = currentStopToken();  // the named form
    std::stop_token stop = co_await named;
    std::lock_guard lock(probe.mutex);
    probe.stop = std::move(stop);
  }
  reached.arrive();
  try {
    co_return co_await blocked;
  } catch (const OperationCancelled&) {
    // (No co_await inside a handler: below.)
  }
  const std::stop_token stop = co_await currentStopToken();  // the temporary form
  {
    std::lock_guard lock(probe.mutex);
    probe.stopRequestedAfterResume = stop.stop_requested();
  }
  throw OperationCancelled();
}

Task<bool> stopPossibleHere() {
  const std::stop_token stop = co_await currentStopToken();
  co_return stop.stop_possible();
}

}  // namespace

TEST_CASE("co_await currentStopToken() follows the coroutine task's token", "[stoptoken][coroutine]") {
  Gate gate;
  Counter blockedStarted;
  Counter reached;
  StopProbe probe;
  ThreadPoolExecutor pool(taggedPool("cs", 2, 2, WorkQueue::bounded(8)));
  OpenOnExit release(gate);
  Future<int> blocked = pool.submit([&] {
    blockedStarted.arrive();
    gate.wait();
    return 5;
  });
  REQUIRE(blockedStarted.waitFor(1));
  Future<int> coroutine = pool.submit(awaitBlocked(blocked, probe, reached));
  REQUIRE(reached.waitFor(1));
  // The other thread is held by `blocked`: a probe task runs only once the
  // coroutine has given its thread back (it is suspended on `blocked`).
  Future<void> suspendedProbe = pool.submit([] {});
  REQUIRE(suspendedProbe.waitFor(kLong));
  std::stop_token stop;
  {
    std::lock_guard lock(probe.mutex);
    REQUIRE(probe.stop.has_value());
    stop = *probe.stop;
  }
  CHECK(stop.stop_possible());
  CHECK_FALSE(stop.stop_requested());
  CHECK(coroutine.cancel());
  CHECK(stop.stop_requested());  // at once, inside cancel()
  gate.open();                   // the awaited task settles; the coroutine goes on
  CHECK(throwsA<OperationCancelled>([&] { coroutine.get(); }));
  {
    std::lock_guard lock(probe.mutex);
    CHECK(probe.stopRequestedAfterResume);
  }
  const PoolStats stats = finalStats(pool);
  checkLedgerAddsUp(stats);
}

TEST_CASE("co_await currentStopToken() outside any pool task gives a token that can never stop",
          "[stoptoken][coroutine]") {
  CHECK_FALSE(syncWait(stopPossibleHere()));
  ThreadPoolExecutor pool(taggedPool("cp", 1, 1, WorkQueue::bounded(8)));
  Future<bool> onPool = pool.submit(stopPossibleHere());
  CHECK(onPool.get());
}

// ---- the example of docs/cancellation.md -------------------------------------------------------

namespace {

// The example of docs/cancellation.md, "std::stop_token, std::jthread and
// Asio" (there with a real workload): a jthread that feeds a pool hands it
// its own stop token, so stopping the jthread cancels the work it started.
// `crunch` reports each step it takes to *crunchSteps and stops at the stop
// request.
Counter* crunchSteps = nullptr;

int crunch(std::stop_token stop) {
  const auto giveUp = std::chrono::steady_clock::now() + kLong;  // bounds the wait only
  while (!stop.stop_requested()) {
    crunchSteps->arrive();
    if (std::chrono::steady_clock::now() > giveUp) return -1;
  }
  throw OperationCancelled();
}

}  // namespace

TEST_CASE("the docs example: a jthread's stop token cancels the pool work it started", "[stoptoken][docs]") {
  ThreadPoolExecutor pool(taggedPool("dx", 2, 2, WorkQueue::bounded(8)));
  Counter steps;
  crunchSteps = &steps;
  std::optional<coexec::Future<int>> result;
  {
    std::jthread feeder([&](std::stop_token stop) {
      result = pool.submit(crunch, stop);  // linked: the jthread's stop cancels the task
      (void)waitForStop(stop);             // ... feed more work, until stopped
    });
    REQUIRE(steps.waitFor(1));  // the work runs
  }  // ~jthread: request_stop() cancels the task (crunch sees it), then join()
  CHECK(throwsA<OperationCancelled>([&] { result->get(); }));
  const PoolStats stats = finalStats(pool);
  CHECK(stats.cancelledCount == 1);
  checkLedgerAddsUp(stats);
  crunchSteps = nullptr;
}
