// SPDX-License-Identifier: BSL-1.0
#include "coexec/detail/FrameAllocator.h"

// The promise of the coroutine layer and the pool that steady-state creation
// and awaiting of Tasks, and submit-and-await of coroutines on a pool, do not
// reach the global allocator, nor does the first blocking wait of a process
// or a steady-state execute() of a small callable. Part of the
// FrameAllocatorTest executable, whose global operator new/delete count
// (CountingGlobalNew.cpp).

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "FrameAllocatorTestSupport.h"
#include "TestSupport.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using coexec::detail::FrameAllocator;
using coexec::Future;
using coexec::PoolStats;
using coexec::syncWait;
using coexec::Task;
using coexec::test::AllocationCount;
using coexec::test::eventually;
using coexec::test::Gate;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;

namespace {

struct AllocationReport {
  std::size_t allocations = 0;
  std::string description;
};

Task<int> leaf(int value) { co_return value + 1; }

/// Awaits `warmUp` leaves, then `measured` more while `count` counts.
Task<long> awaitLeaves(int warmUp, int measured, std::size_t& allocations) {
  long sum = 0;
  for (int i = 0; i < warmUp; ++i)
    sum += co_await leaf(i);
  {
    AllocationCount count;
    for (int i = 0; i < measured; ++i)
      sum += co_await leaf(i);
    count.stop();
    allocations = count.allocations();
  }
  co_return sum;
}

/// Submits a coroutine to `pool` and awaits it, `warmUp` times, then
/// `measured` more times while counting allocations.
Task<long> submitAndAwait(ThreadPoolExecutor& pool, int warmUp, int measured, AllocationReport& report) {
  long sum = 0;
  for (int i = 0; i < warmUp; ++i) {
    Future<int> result = pool.submit([i]() -> Task<int> { co_return i; });
    sum += co_await result;
  }
  AllocationCount count;
  for (int i = 0; i < measured; ++i) {
    Future<int> result = pool.submit([i]() -> Task<int> { co_return i; });
    sum += co_await result;
  }
  count.stop();
  report.allocations = count.allocations();
  report.description = count.describe();
  co_return sum;
}

/// A callable of `Bytes` bytes (copies of one pointer) that counts its runs.
template <std::size_t Bytes>
struct CountingCallable {
  std::array<std::atomic<int>*, Bytes / sizeof(void*)> runs;
  void operator()() const { runs.back()->fetch_add(1, std::memory_order_release); }
};

/// Executes `warmUp` then `measured` windows of `window` CountingCallable<Bytes>
/// on `pool`, and counts the global allocations made on any thread while the
/// measured windows are submitted. Each window starts with one blocker per
/// thread, held until the whole window is queued, so every window reaches the
/// same peak of live tasks (a worker that happens to lag behind in one window
/// cannot raise it above what the warm-up reached); the next window starts
/// once the pool is idle again.
template <std::size_t Bytes>
AllocationReport countExecuteWindows(ThreadPoolExecutor& pool, int warmUp, int measured, int window) {
  const std::size_t threads = pool.maximumPoolSize();
  std::atomic<int> runs{0};
  CountingCallable<Bytes> task{};
  task.runs.fill(&runs);
  static_assert(sizeof(task) == Bytes);
  AllocationReport report;
  std::uint64_t completed = pool.stats().completedTaskCount;
  for (int w = 0; w < warmUp + measured; ++w) {
    Gate windowQueued;
    {
      std::optional<AllocationCount> count;
      if (w >= warmUp) count.emplace();
      for (std::size_t t = 0; t < threads; ++t)
        pool.execute([&windowQueued] { windowQueued.wait(); });
      for (int i = 0; i < window; ++i)
        pool.execute(task);
      if (count) {
        count->stop();
        report.allocations += count->allocations();
        if (count->allocations() > 0 && report.description.empty()) report.description = count->describe();
      }
    }
    windowQueued.open();
    completed += threads + static_cast<std::size_t>(window);
    REQUIRE(eventually([&pool, completed] {
      const PoolStats s = pool.stats();
      return s.completedTaskCount == completed && s.activeCount == 0;
    }));
  }
  REQUIRE(runs.load() == (warmUp + measured) * window);
  return report;
}

/// Like submitAndAwait, but meant to run on a thread of `pool` itself.
Task<long> submitAndAwaitOnPool(ThreadPoolExecutor& pool, int warmUp, int measured, AllocationReport& report) {
  co_return co_await submitAndAwait(pool, warmUp, measured, report);
}

}  // namespace

TEST_CASE("creating, awaiting and destroying Tasks in steady state makes no global allocation",
          "[frame][task][allocator]") {
  std::size_t allocations = 1;
  CHECK(syncWait(awaitLeaves(1000, 100'000, allocations)) > 0);
  CHECK(allocations == 0);
}

TEST_CASE("steady-state submit and await of coroutines on a pool makes no global allocation",
          "[frame][coroutine][allocator]") {
  constexpr int kWarmUp = 2000;
  constexpr int kMeasured = 10'000;
  ThreadPoolOptions options;
  options.name = "frames";
  options.corePoolSize = 1;
  options.maximumPoolSize = 1;
  options.workQueue = WorkQueue::bounded(64);
  ThreadPoolExecutor pool(options);
  AllocationReport report;
  const long expected = long{kWarmUp} * (kWarmUp - 1) / 2 + long{kMeasured} * (kMeasured - 1) / 2;
  CHECK(syncWait(submitAndAwait(pool, kWarmUp, kMeasured, report)) == expected);
  INFO(report.description);
  CHECK(report.allocations == 0);
}

TEST_CASE("steady-state submit and await between coroutines on one pool thread makes no global allocation",
          "[frame][coroutine][allocator]") {
  // Everything is allocated and freed on the pool's only thread, so this
  // isolates the recycling itself from frames that cross threads.
  constexpr int kWarmUp = 2000;
  constexpr int kMeasured = 10'000;
  ThreadPoolOptions options;
  options.name = "frames1";
  options.corePoolSize = 1;
  options.maximumPoolSize = 1;
  options.workQueue = WorkQueue::bounded(64);
  ThreadPoolExecutor pool(options);
  AllocationReport report;
  Future<long> sum = pool.submit(submitAndAwaitOnPool(pool, kWarmUp, kMeasured, report));
  const long expected = long{kWarmUp} * (kWarmUp - 1) / 2 + long{kMeasured} * (kMeasured - 1) / 2;
  CHECK(sum.get() == expected);
  INFO(report.description);
  CHECK(report.allocations == 0);
}

TEST_CASE("the first blocking wait of a process allocates nothing", "[frame][allocator][wait]") {
  // Each test case runs in a process of its own, and nothing above waits in
  // this one: this is the process's first blocking wait on a task. The table
  // a waiter sleeps in is built then; it must not come from the global
  // allocator, or a counted loop on a pool thread that races main's first
  // get() sees an allocation that is not its own (CI saw 8,256 bytes, the
  // table, counted by the test above).
  Gate release;
  ThreadPoolOptions options;
  options.name = "firstwait";
  options.corePoolSize = 1;
  options.maximumPoolSize = 1;
  ThreadPoolExecutor pool(options);
  coexec::test::OpenOnExit releaseOnExit(release);
  Future<int> blocked = pool.submit([&release] {
    release.wait();
    return 1;
  });
  std::size_t allocations = 0;
  {
    AllocationCount count;
    CHECK_FALSE(blocked.waitFor(std::chrono::milliseconds(1)));  // sleeps in the wait table: the task is held
    count.stop();
    allocations = count.allocations();
    INFO(count.describe());
    CHECK(allocations == 0);
  }
  release.open();
  CHECK(blocked.get() == 1);
}

TEST_CASE("steady-state execute of a small callable makes no global allocation", "[executor][allocator]") {
  const std::size_t threads = GENERATE(1, 2);
  const bool bounded = GENERATE(true, false);
  CAPTURE(threads, bounded);
  constexpr int kWindow = 1000;  // tasks in flight at most: well inside the 4,096-place ring
  constexpr int kWarmUp = 20;
  constexpr int kMeasured = 20;
  ThreadPoolOptions options;
  options.name = "execs";
  options.corePoolSize = threads;
  options.maximumPoolSize = threads;
  options.workQueue = bounded ? WorkQueue::bounded(2 * kWindow) : WorkQueue::unbounded();
  ThreadPoolExecutor pool(options);
  REQUIRE(pool.prestartAllCoreThreads() == threads);
  SECTION("an 8-byte callable") {
    const AllocationReport report = countExecuteWindows<8>(pool, kWarmUp, kMeasured, kWindow);
    INFO(report.description);
    CHECK(report.allocations == 0);
  }
  SECTION("a 48-byte callable") {
    const AllocationReport report = countExecuteWindows<48>(pool, kWarmUp, kMeasured, kWindow);
    INFO(report.description);
    CHECK(report.allocations == 0);
  }
  SECTION("a 64-byte callable") {
    const AllocationReport report = countExecuteWindows<64>(pool, kWarmUp, kMeasured, kWindow);
    INFO(report.description);
    CHECK(report.allocations == 0);
  }
}
