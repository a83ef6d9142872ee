// SPDX-License-Identifier: BSL-1.0
#include "coexec/LatencyHistogram.h"

// The run time of coroutine tasks (ThreadPoolOptions::recordLatency): the sum
// of their segments, across suspensions, hops to other pools and back, joins,
// and a finish on another pool's thread; never the time spent suspended. On a
// ManualClock the tasks advance the clock themselves, so every expected sum
// is exact.

#include <atomic>
#include <chrono>
#include <coroutine>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "TestSupport.h"
#include "coexec/ResumeOn.h"
#include "coexec/Sleep.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using namespace std::chrono_literals;

using coexec::ManualClock;
using coexec::PoolStats;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::eventually;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::StopOnExit;

namespace {

/// A pool of `threads` threads that records latency, on `clock` if given.
ThreadPoolOptions recording(ManualClock* clock, std::size_t threads = 1) {
  ThreadPoolOptions options;
  options.name = "corolat";
  options.corePoolSize = threads;
  options.maximumPoolSize = threads;
  options.workQueue = WorkQueue::unbounded();
  options.clock = clock;
  options.recordLatency = true;
  return options;
}

/// True once the coroutine has reached `phase` (stored just before a
/// co_await, while its thread counts as active) and the pool's threads are
/// all idle again: it has suspended.
bool suspendedAt(const std::atomic<int>& phase, int expected, ThreadPoolExecutor& pool) {
  return eventually([&] { return phase.load() == expected && pool.stats().activeCount == 0; });
}

/// An awaitable that is not coexec's: a plain thread resumes the coroutine
/// once `gate` opens.
struct ForeignAwaitable {
  Gate& gate;
  std::thread& resumer;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> handle) {
    resumer = std::thread([this, handle] {
      gate.wait();
      handle.resume();
    });
  }
  void await_resume() const noexcept {}
};

}  // namespace

TEST_CASE("A coroutine task's run time is the sum of its segments, not the time it spends suspended",
          "[latency][pool][coroutine]") {
  ManualClock clock;
  Gate gate;
  ThreadPoolExecutor other(recording(nullptr));
  ThreadPoolExecutor pool(recording(&clock));
  StopOnExit stopOther(gate, other);
  StopOnExit stop(gate, pool);
  auto gated = other.submit([&] { gate.wait(); });
  std::atomic<int> phase{0};
  auto task = pool.submit([&]() -> Task<int> {
    clock.advance(2ms);  // segment 1: 2 ms
    phase.store(1);
    co_await gated;      // suspended while the test advances 100 ms
    clock.advance(3ms);  // segment 2: 3 ms
    phase.store(2);
    co_await coexec::sleepFor(10ms);  // on the pool's clock: suspended 10 ms
    clock.advance(4ms);               // segment 3: 4 ms
    co_return 7;
  });
  REQUIRE(suspendedAt(phase, 1, pool));
  clock.advance(100ms);
  gate.open();
  REQUIRE(suspendedAt(phase, 2, pool));
  clock.advance(10ms);  // the sleep ends
  REQUIRE(task.get() == 7);
  REQUIRE(eventually([&] { return pool.stats().runTime.count == 1; }));
  const PoolStats s = pool.stats();
  REQUIRE(s.queueWait.count == 1);
  REQUIRE(s.queueWait.max == 0ns);
  REQUIRE(s.runTime.max == 9ms);  // 2 + 3 + 4; the 110 ms suspended are not run time
  REQUIRE(s.runTime.histogram.sum() == 9ms);
}

TEST_CASE("A coroutine task's segments on other pools count, and so does a finish there", "[latency][pool][coroutine]") {
  ManualClock clock;
  ThreadPoolExecutor other(recording(nullptr));  // its own clock: the task is timed on its pool's
  ThreadPoolExecutor pool(recording(&clock));
  bool hopRecorded = false;
  auto task = pool.submit([&]() -> Task<void> {
    clock.advance(1ms);
    co_await coexec::resumeOn(other);
    clock.advance(2ms);
    co_await coexec::resumeOn(pool);  // a hop onto the pool: a task of the pool (below)
    clock.advance(4ms);
    co_await coexec::resumeOn(other);
    // The pool's thread ends the hop's run once the hop's body returns, which
    // may be after this thread goes on: wait for its sample, so that the
    // clock's next advance is not inside it.
    hopRecorded = eventually([&] { return pool.stats().runTime.count == 1; });
    clock.advance(8ms);  // finishes on the other pool's thread
  });
  task.get();
  REQUIRE(hopRecorded);
  REQUIRE(eventually([&] { return pool.stats().runTime.count == 2; }));
  const PoolStats s = pool.stats();
  REQUIRE(s.runTime.max == 15ms);  // the task: 1 + 2 + 4 + 8
  // The hop back is a task of the pool (it counts in completedTaskCount): its
  // run is the 4 ms segment it resumed.
  REQUIRE(s.runTime.histogram.sum() == 19ms);
  REQUIRE(s.queueWait.count == 2);
  // The other pool ran two hops of a task that is not its own: their runs
  // are its samples, the task's segments are not.
  other.shutdown();
  REQUIRE(other.awaitTermination(kLong));
  const PoolStats o = other.stats();
  REQUIRE(o.runTime.count == 2);
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
}

TEST_CASE("A join that runs the awaited child here is not the awaiting task's run time", "[latency][pool][coroutine]") {
  ManualClock clock;
  ThreadPoolExecutor pool(recording(&clock));
  auto task = pool.submit([&]() -> Task<void> {
    clock.advance(1ms);
    auto child = pool.submit([&] { clock.advance(10ms); });
    co_await child;  // joined here (or run by this thread once the task suspends)
    clock.advance(2ms);
  });
  task.get();
  REQUIRE(eventually([&] { return pool.stats().runTime.count == 2; }));
  const PoolStats s = pool.stats();
  REQUIRE(s.runTime.max == 10ms);                // the child
  REQUIRE(s.runTime.histogram.sum() == 13ms);   // and the task: 1 + 2
  REQUIRE(s.runTime.histogram.countAtOrBelow(4ms) == 1);  // the task's 3 ms (the bucket straddling 4 ms is above 3 ms)
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
}

TEST_CASE("Time around a foreign awaitable is not counted: neither the wait nor the segments it ends or starts",
          "[latency][pool][coroutine]") {
  ManualClock clock;
  Gate gate;
  std::thread resumer;
  coexec::test::JoinOnExit join(resumer, [&gate] { gate.open(); });
  ThreadPoolExecutor pool(recording(&clock));
  std::atomic<int> phase{0};
  auto task = pool.submit([&]() -> Task<void> {
    clock.advance(1ms);  // ends at a foreign awaitable: not counted
    phase.store(1);
    co_await ForeignAwaitable{gate, resumer};
    clock.advance(2ms);                // resumed by a foreign thread: not counted
    co_await coexec::resumeOn(pool);   // goes on on the pool: timed again from here
    clock.advance(4ms);
  });
  REQUIRE(suspendedAt(phase, 1, pool));
  clock.advance(50ms);
  gate.open();
  task.get();
  REQUIRE(eventually([&] { return pool.stats().runTime.count == 2; }));
  const PoolStats s = pool.stats();
  REQUIRE(s.runTime.max == 4ms);               // the task: only its last segment
  REQUIRE(s.runTime.histogram.sum() == 8ms);  // and the hop that ran that segment
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
}

TEST_CASE("Every coroutine task is recorded once across hops and joins, while stats() reads concurrently",
          "[latency][pool][coroutine][stress]") {
  ThreadPoolExecutor other(recording(nullptr, 2));
  ThreadPoolExecutor pool(recording(nullptr, 2));
  constexpr int kTasks = static_cast<int>(coexec::test::stressSize(2'000, 4));
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      const PoolStats s = pool.stats();
      (void)s.runTime.p99;
    }
  });
  coexec::test::JoinOnExit joinReader(reader, [&done] { done.store(true); });
  std::atomic<int> ran{0};
  std::vector<coexec::Future<void>> futures;
  futures.reserve(kTasks);
  for (int i = 0; i < kTasks; ++i) {
    futures.push_back(pool.submit([&, i]() -> Task<void> {
      co_await pool.submit([&ran] { ran.fetch_add(1); });  // a child, joined or awaited
      if (i % 2 == 0) {
        co_await coexec::resumeOn(other);  // some finish on the other pool
      } else {
        co_await coexec::sleepFor(i % 3 == 0 ? 1ms : 0ms);
      }
      ran.fetch_add(1);
    }));
  }
  for (auto& f : futures)
    f.get();
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  done.store(true);
  reader.join();
  REQUIRE(ran.load() == 2 * kTasks);
  const PoolStats s = pool.stats();
  // Every task of the pool, coroutine or child, has one sample of each.
  REQUIRE(s.completedTaskCount == 2 * static_cast<std::uint64_t>(kTasks));
  REQUIRE(s.queueWait.count == s.completedTaskCount);
  REQUIRE(s.runTime.count == s.completedTaskCount);
  REQUIRE(s.runTime.histogram.count() == s.runTime.count);
  other.shutdown();
  REQUIRE(other.awaitTermination(kLong));
}
