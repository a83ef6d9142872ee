// SPDX-License-Identifier: BSL-1.0
#include "coexec/SerialExecutor.h"

// SerialExecutor: FIFO, one task at a time, on a pool; coroutine tasks hold
// the lane until they finish; resumeOn(lane) takes a turn in the lane; a task
// the pool refuses fails with RejectedExecution and the lane goes on; a task
// cancelled in the lane never runs; the destructor waits for the lane.

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "CoroutineTestSupport.h"
#include "DeathTestSupport.h"
#include "SerialExecutorTestSupport.h"
#include "TestSupport.h"
#include "coexec/ResumeOn.h"
#include "coexec/Sleep.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/ThisThread.h"

using coexec::CancellationSource;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::RejectedExecution;
using coexec::resumeOn;
using coexec::SerialExecutor;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::Counter;
using coexec::test::eventually;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::OpenOnExit;
using coexec::test::serialPool;
using coexec::test::stressSize;
using coexec::test::throwsA;

namespace {

/// Records the order tasks ran in and whether two ever overlapped.
struct OrderLog {
  std::atomic<int> inFlight{0};
  std::atomic<int> overlaps{0};
  std::mutex mutex;
  std::vector<int> order;

  void enter(int i) {
    if (inFlight.fetch_add(1) != 0) overlaps.fetch_add(1);
    std::lock_guard lock(mutex);
    order.push_back(i);
  }
  void leave() { inFlight.fetch_sub(1); }
  std::vector<int> snapshot() {
    std::lock_guard lock(mutex);
    return order;
  }
};

std::vector<int> iota(int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i)
    v.push_back(i);
  return v;
}

}  // namespace

TEST_CASE("a lane runs its tasks one at a time in submission order on a pool of several threads", "[lanes][order]") {
  ThreadPoolExecutor pool(serialPool(4));
  OrderLog log;
  const int n = static_cast<int>(stressSize(20'000, 10));
  std::vector<Future<int>> futures;
  {
    SerialExecutor lane(pool);
    for (int i = 0; i < n; ++i) {
      futures.push_back(lane.submit([&log, i] {
        log.enter(i);
        log.leave();
        return i * 2;
      }));
    }
  }  // the destructor waits for the lane
  CHECK(log.overlaps.load() == 0);
  CHECK(log.snapshot() == iota(n));
  for (int i = 0; i < n; ++i)
    REQUIRE(futures[static_cast<std::size_t>(i)].get() == i * 2);
}

TEST_CASE("a lane task's Future carries its value or its exception, and the lane goes on after a failure",
          "[lanes][future]") {
  ThreadPoolExecutor pool(serialPool(2));
  SerialExecutor lane(pool);
  Future<std::string> text = lane.submit([] { return std::string("lane"); });
  Future<int> failing = lane.submit([]() -> int { throw std::runtime_error("boom"); });
  Future<void> after = lane.submit([] {});
  CHECK(text.get() == "lane");
  CHECK(throwsA<std::runtime_error>([&] { failing.get(); }));
  after.get();
  CHECK(after.isDone());
  CHECK(&lane.pool() == &pool);
}

TEST_CASE("a coroutine task holds its lane until it finishes, across its suspensions", "[lanes][coroutine]") {
  Gate gate;
  ThreadPoolExecutor pool(serialPool(4));
  ThreadPoolExecutor other(serialPool(1));
  OpenOnExit opener(gate);
  SerialExecutor lane(pool);
  std::atomic<bool> firstFinished{false};
  std::atomic<bool> secondSawFirstFinished{false};
  Counter suspended;

  Future<int> first = lane.submit([&]() -> Task<int> {
    Future<int> slow = other.submit([&] {
      suspended.arrive();
      gate.wait();
      return 7;
    });
    const int v = co_await slow;
    firstFinished = true;
    co_return v;
  });
  REQUIRE(suspended.waitFor(1));  // the first task is suspended on `slow`
  Future<void> second = lane.submit([&] { secondSawFirstFinished = firstFinished.load(); });
  // Three pool threads are idle, yet the second task waits in the lane.
  CHECK(lane.queued() == 1);
  CHECK_FALSE(second.isDone());
  gate.open();
  CHECK(first.get() == 7);
  second.get();
  CHECK(secondSawFirstFinished.load());
}

TEST_CASE("resumeOn(lane) continues the coroutine in order with the lane's tasks, on a pool thread",
          "[lanes][resumeOn]") {
  Gate gate;
  ThreadPoolExecutor pool(coexec::test::taggedPool("lanes", 2, 2, WorkQueue::bounded(64)));
  ThreadPoolExecutor outside(serialPool(1));
  OpenOnExit opener(gate);
  SerialExecutor lane(pool);
  std::mutex mutex;
  std::vector<std::string> order;
  auto note = [&](std::string what) {
    std::lock_guard lock(mutex);
    order.push_back(std::move(what));
  };
  Counter blocking;
  Future<void> blocker = lane.submit([&] {
    blocking.arrive();
    gate.wait();
    note("blocker");
  });
  REQUIRE(blocking.waitFor(1));
  std::atomic<bool> onPool{false};
  Future<void> hopper = outside.submit([&]() -> Task<void> {
    co_await resumeOn(lane);
    onPool = coexec::test::currentTag == "lanes";
    note("hop");
  });
  REQUIRE(eventually([&] { return lane.queued() == 1; }));  // the hop waits its turn
  Future<void> after = lane.submit([&] { note("after"); });
  gate.open();
  blocker.get();
  hopper.get();
  after.get();
  CHECK(order == std::vector<std::string>{"blocker", "hop", "after"});
  CHECK(onPool.load());
}

TEST_CASE("resumeOn(lane) from the lane's own coroutine task does not suspend", "[lanes][resumeOn]") {
  ThreadPoolExecutor pool(serialPool(2));
  SerialExecutor lane(pool);
  Future<int> task = lane.submit([&]() -> Task<int> {
    co_await resumeOn(lane);  // holds the lane already: waiting for a turn would wait for itself
    co_await resumeOn(lane);
    co_return 3;
  });
  CHECK(task.get(kLong) == 3);
}

TEST_CASE("a task cancelled while it waits in the lane never runs, and the lane goes on", "[lanes][cancel]") {
  Gate gate;
  ThreadPoolExecutor pool(serialPool(2));
  OpenOnExit opener(gate);
  SerialExecutor lane(pool);
  Counter started;
  Future<void> blocker = lane.submit([&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  std::atomic<bool> cancelledRan{false};
  Future<int> cancelled = lane.submit([&] {
    cancelledRan = true;
    return 1;
  });
  CancellationSource source;
  Future<int> byToken = lane.submit(
      [&] {
        cancelledRan = true;
        return 2;
      },
      source.token());
  Future<int> last = lane.submit([] { return 3; });
  CHECK(lane.queued() == 3);
  CHECK(cancelled.cancel());
  CHECK(cancelled.isDone());  // at once, while the lane is still blocked
  source.requestCancellation();
  CHECK(byToken.isDone());
  gate.open();
  CHECK(last.get() == 3);
  blocker.get();
  CHECK_FALSE(cancelledRan.load());
  CHECK(throwsA<OperationCancelled>([&] { (void)cancelled.get(); }));
  CHECK(throwsA<OperationCancelled>([&] { (void)byToken.get(); }));
}

TEST_CASE("cancelling a running lane task cancels its token and the lane waits for it to return", "[lanes][cancel]") {
  ThreadPoolExecutor pool(serialPool(2));
  SerialExecutor lane(pool);
  Counter started;
  std::atomic<bool> returned{false};
  Future<void> running = lane.submit([&](coexec::CancellationToken token) {
    started.arrive();
    while (!token.isCancellationRequested())
      std::this_thread::yield();
    returned = true;
  });
  std::atomic<bool> nextSawReturned{false};
  Future<void> next = lane.submit([&] { nextSawReturned = returned.load(); });
  REQUIRE(started.waitFor(1));
  CHECK(running.cancel());
  CHECK(throwsA<OperationCancelled>([&] { running.get(); }));
  next.get();
  CHECK(nextSawReturned.load());
}

TEST_CASE("a lane task the saturated pool refuses fails with RejectedExecution and the lane goes on",
          "[lanes][rejection]") {
  Gate gate;
  ThreadPoolExecutor pool(serialPool(1, WorkQueue::bounded(1)));
  OpenOnExit opener(gate);
  Counter started;
  coexec::test::executeBlocked(pool, 1, started, gate);  // the one thread
  REQUIRE(started.waitFor(1));
  Counter queuedDone;
  pool.execute([&] {  // the one place in the queue
    gate.wait();
    queuedDone.arrive();
  });
  SerialExecutor lane(pool);
  std::atomic<int> ran{0};
  Future<int> refused = lane.submit([&] {
    ++ran;
    return 1;
  });
  Future<int> refusedToo = lane.submit([&] {
    ++ran;
    return 2;
  });
  // Refused on this thread, at submission: neither waits, nothing is wedged.
  CHECK(refused.isDone());
  CHECK(refusedToo.isDone());
  CHECK(throwsA<RejectedExecution>([&] { (void)refused.get(); }));
  CHECK(throwsA<RejectedExecution>([&] { (void)refusedToo.get(); }));
  CHECK(pool.stats().rejectedCount == 2);
  gate.open();
  REQUIRE(queuedDone.waitFor(1));  // the queue has room again
  Future<int> later = lane.submit([&] {
    ++ran;
    return 3;
  });
  CHECK(later.get() == 3);
  CHECK(ran.load() == 1);
}

TEST_CASE("lane tasks waiting when the pool shuts down fail with RejectedExecution and the destructor returns",
          "[lanes][rejection][shutdown]") {
  Gate gate;
  ThreadPoolExecutor pool(serialPool(2));
  OpenOnExit opener(gate);
  Counter started;
  std::atomic<int> ran{0};
  Future<void> first;
  Future<void> second;
  Future<void> third;
  {
    SerialExecutor lane(pool);
    first = lane.submit([&] {
      started.arrive();
      gate.wait();
      ++ran;
    });
    second = lane.submit([&] { ++ran; });
    lane.execute([&] { ++ran; });  // its refusal goes to the uncaught handler
    REQUIRE(started.waitFor(1));
    pool.shutdown();
    third = lane.submit([&] { ++ran; });
    gate.open();
  }  // every task settled: the destructor returned
  first.get();
  CHECK(throwsA<RejectedExecution>([&] { second.get(); }));
  CHECK(throwsA<RejectedExecution>([&] { third.get(); }));
  CHECK(ran.load() == 1);
}

TEST_CASE("an execute()d lane task's failure goes to the pool's uncaught-exception handler once", "[lanes][execute]") {
  std::atomic<int> reported{0};
  ThreadPoolOptions options = serialPool(2);
  options.uncaughtExceptionHandler = [&](std::exception_ptr error, const coexec::TaskInfo&) {
    if (coexec::test::holdsA<std::runtime_error>(error)) ++reported;
  };
  ThreadPoolExecutor pool(options);
  {
    SerialExecutor lane(pool);
    lane.execute([] { throw std::runtime_error("lost?"); });
    lane.execute([]() -> Task<void> {
      co_await coexec::sleepFor(std::chrono::milliseconds(1));
      throw std::runtime_error("lost too?");
    });
  }
  CHECK(reported.load() == 2);
}

TEST_CASE("the destructor of a SerialExecutor blocks until its queued tasks have run", "[lanes][lifetime]") {
  ThreadPoolExecutor pool(serialPool(2));
  std::atomic<int> ran{0};
  {
    SerialExecutor lane(pool);
    for (int i = 0; i < 200; ++i)
      lane.execute([&] { ran.fetch_add(1); });
  }
  CHECK(ran.load() == 200);
}

TEST_CASE("work a lane task submits is its child: cancelling the task cancels it", "[lanes][cancel]") {
  ThreadPoolExecutor pool(serialPool(2));
  SerialExecutor lane(pool);
  Counter childStarted;
  Future<void> parent = lane.submit([&]() -> Task<void> {
    Future<void> child = pool.submit([&](coexec::CancellationToken token) {
      childStarted.arrive();
      while (!token.isCancellationRequested())
        std::this_thread::yield();
      token.throwIfCancellationRequested();
    });
    co_await child;
  });
  REQUIRE(childStarted.waitFor(1));
  parent.cancel();
  CHECK(throwsA<OperationCancelled>([&] { parent.get(); }));
  // The lane went on: the child ended through its token, so the parent finished.
  Future<int> next = lane.submit([] { return 1; });
  CHECK(next.get(kLong) == 1);
}
