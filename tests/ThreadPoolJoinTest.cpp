// SPDX-License-Identifier: BSL-1.0
// Joining where the joiner stands: a coroutine on a pool thread that awaits
// the Future of a task the pool has not started yet (fork/join work, queued on
// a worker's local queue) runs that task at once, on its own thread, inside
// the co_await (ForkJoinPool's join). The rules it must keep: the task runs
// once and is counted once, as completed or failed (never as cancelled); its
// queue entry gives its place back and is never returned by shutdownNow() nor
// evicted by discardOldest(); hooks run once; a cancelled task is not run; the
// nesting is bounded by the thread's stack.
#include "coexec/ThreadPoolExecutor.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "ForkJoinTestSupport.h"
#include "TestSupport.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/Task.h"
#include "coexec/ThisThread.h"
#include "coexec/ThreadPoolOptions.h"
#include "coexec/detail/FaultInjection.h"

using namespace std::chrono_literals;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::PendingTask;
using coexec::PoolStats;
using coexec::RejectedExecution;
using coexec::RejectionPolicy;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::checkLedgerAddsUp;
using coexec::test::Counter;
using coexec::test::eventually;
using coexec::test::forkJoinFib;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::OpenOnExit;

namespace {

long fibOf(int n) { return n < 2 ? n : fibOf(n - 1) + fibOf(n - 2); }

/// Calls of fib(n), each a task but the root: fib's own recursion count.
std::uint64_t fibCalls(int n) { return n < 2 ? 1 : 1 + fibCalls(n - 1) + fibCalls(n - 2); }

/// The final statistics of `pool` once it has terminated.
PoolStats finalStats(ThreadPoolExecutor& pool) {
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  return pool.stats();
}

}  // namespace

TEST_CASE("a coroutine that awaits a child no thread has started runs it at once, before newer queued work",
          "[executor][join]") {
  // One thread, so nothing but the awaiting coroutine can run the child. The
  // coroutine queues the child, then a newer task on the same local queue:
  // a worker takes the newest first, so without the join the newer task
  // would run before the child; with it the child runs inside the co_await.
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::unbounded());
  std::mutex mutex;
  std::vector<std::string> order;  // guarded by mutex
  const auto record = [&](const char* what) {
    std::lock_guard lock(mutex);
    order.emplace_back(what);
  };
  std::thread::id childThread;
  std::thread::id parentThread;
  Future<int> parent = pool.submit([&]() -> Task<int> {
    parentThread = coexec::thisThreadId();
    Future<int> child = pool.submit([&] {
      childThread = coexec::thisThreadId();
      record("child");
      return 7;
    });
    pool.execute([&] { record("newer"); });
    const int value = co_await child;
    record("after the await");
    co_return value;
  });
  CHECK(parent.get() == 7);
  REQUIRE(eventually([&] { return pool.stats().completedTaskCount == 3; }));
  std::lock_guard lock(mutex);
  CHECK(order == std::vector<std::string>{"child", "after the await", "newer"});
  CHECK(childThread == parentThread);
}

TEST_CASE("tasks joined where they are awaited count once as completed and give their queue places back",
          "[executor][join][ledger]") {
  // fib(18) (8,361 tasks) on a bounded(256) queue: a correct join keeps a
  // few places per level of recursion and per thread; entries that kept
  // their places would fill the queue within a few hundred tasks, and the
  // pool would refuse the rest (abort: submit throws, and so does fib).
  constexpr int kN = 18;
  const std::size_t threads = GENERATE(1, 2);
  CAPTURE(threads);
  ThreadPoolExecutor pool(threads, threads, 60s, WorkQueue::bounded(256));
  Future<long> result = pool.submit(forkJoinFib(pool, kN));
  CHECK(result.get() == fibOf(kN));
  const PoolStats s = finalStats(pool);
  CHECK(s.taskCount == fibCalls(kN));
  CHECK(s.completedTaskCount == s.taskCount);
  CHECK(s.cancelledCount == 0);
  CHECK(s.failedCount == 0);
  CHECK(s.rejectedCount == 0);
  CHECK(s.queueSize == 0);
  CHECK(s.localQueueSize == 0);
  checkLedgerAddsUp(s);
}

TEST_CASE("beforeExecute and afterExecute run once for each task, joined or not", "[executor][join][hooks]") {
  constexpr int kN = 14;
  std::atomic<std::uint64_t> before{0};
  std::atomic<std::uint64_t> after{0};
  ThreadPoolOptions options;
  options.name = "joinhooks";
  options.corePoolSize = 2;
  options.maximumPoolSize = 2;
  options.workQueue = WorkQueue::unbounded();
  options.hooks.beforeExecute = [&](const coexec::TaskInfo&) { before.fetch_add(1); };
  options.hooks.afterExecute = [&](const coexec::TaskInfo&, const std::exception_ptr&) { after.fetch_add(1); };
  ThreadPoolExecutor pool(std::move(options));
  CHECK(pool.submit(forkJoinFib(pool, kN)).get() == fibOf(kN));
  const PoolStats s = finalStats(pool);
  CHECK(s.completedTaskCount == fibCalls(kN));
  CHECK(before.load() == fibCalls(kN));
  CHECK(after.load() == fibCalls(kN));
}

TEST_CASE("a joined task that throws fails its awaiter's co_await and counts as failed", "[executor][join]") {
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::unbounded());
  Future<std::string> parent = pool.submit([&]() -> Task<std::string> {
    Future<int> child = pool.submit([]() -> int { throw std::runtime_error("child failed"); });
    try {
      (void)co_await child;
    } catch (const std::runtime_error& e) {
      co_return e.what();
    }
    co_return "no exception";
  });
  CHECK(parent.get() == "child failed");
  const PoolStats s = finalStats(pool);
  CHECK(s.failedCount == 1);
  CHECK(s.completedTaskCount == 1);
  CHECK(s.cancelledCount == 0);
}

TEST_CASE("a child cancelled before it is awaited is not run by the join: the co_await throws OperationCancelled",
          "[executor][join][cancel]") {
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::unbounded());
  std::atomic<bool> ran{false};
  Future<bool> parent = pool.submit([&]() -> Task<bool> {
    Future<int> child = pool.submit([&] {
      ran = true;
      return 1;
    });
    child.cancel();
    try {
      (void)co_await child;
    } catch (const OperationCancelled&) {
      co_return true;
    }
    co_return false;
  });
  CHECK(parent.get());
  CHECK_FALSE(ran.load());
  const PoolStats s = finalStats(pool);
  CHECK(s.cancelledCount == 1);
  CHECK(s.completedTaskCount == 1);
}

TEST_CASE("a chain of 100,000 coroutines each awaiting the next does not exhaust a pool thread's stack",
          "[executor][join][stack]") {
  // Each join nests on the thread's stack; below the reserve the pool stops
  // joining and the coroutine suspends as it would without joins. Then the
  // deepest task's end resumes its awaiter, whose end resumes the next, and
  // so on up the chain: inline resumptions, which stop nesting at the same
  // reserve (resumeFor posts the rest to the worker). Without either bound
  // this overflowed the 8 MiB stack at about 110,000 frames.
  constexpr int kDepth = 100'000;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::unbounded());
  struct Chain {
    static Task<int> link(ThreadPoolExecutor& pool, int left) {
      if (left == 0) co_return 0;
      Future<int> next = pool.submit(link(pool, left - 1));
      co_return 1 + co_await next;
    }
  };
  CHECK(pool.submit(Chain::link(pool, kDepth)).get() == kDepth);
  const PoolStats s = finalStats(pool);
  CHECK(s.completedTaskCount == kDepth + 1);
  CHECK(s.cancelledCount == 0);
}

TEST_CASE("shutdownNow never returns the queue entry of a task a join is running", "[executor][join][shutdown]") {
  // One thread: the coroutine queues A, then B (on top), and awaits A: the
  // join starts A where it is, under B. While A runs (held by a gate), the
  // local queue holds A's entry and B; shutdownNow() must return B alone.
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::unbounded());
  Gate holdA;
  OpenOnExit releaseA(holdA);
  Counter aStarted;
  std::atomic<bool> bRan{false};
  Future<int> parent = pool.submit([&]() -> Task<int> {
    Future<int> a = pool.submit([&] {
      aStarted.arrive();
      holdA.wait();
      return 1;
    });
    Future<int> b = pool.submit([&] {
      bRan = true;
      return 2;
    });
    co_return co_await a;
  });
  REQUIRE(aStarted.waitFor(1));
  std::vector<PendingTask> returned = pool.shutdownNow();
  CHECK(returned.size() == 1);  // B
  holdA.open();
  CHECK(parent.get() == 1);
  REQUIRE(pool.awaitTermination(kLong));
  CHECK_FALSE(bRan.load());
  const PoolStats s = pool.stats();
  CHECK(s.drainedCount == 1);
  CHECK(s.completedTaskCount == 2);  // the parent and A
  CHECK(s.cancelledCount == 0);
  checkLedgerAddsUp(s);
}

TEST_CASE("discardOldest never evicts the queue entry of a task a join is running", "[executor][join][reject]") {
  // bounded(2), one thread: the coroutine queues A and B (both places) and
  // awaits A, which the join runs under B. A third submission finds the
  // queue full: the oldest entry is A's, whose task runs; B is the victim.
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(2), RejectionPolicy::discardOldest());
  Gate holdA;
  OpenOnExit releaseA(holdA);
  Counter aStarted;
  Counter bSubmitted;
  std::optional<Future<int>> bFuture;  // written by the coroutine before bSubmitted
  Future<int> parent = pool.submit([&]() -> Task<int> {
    Future<int> a = pool.submit([&] {
      aStarted.arrive();
      holdA.wait();
      return 1;
    });
    bFuture.emplace(pool.submit([] { return 2; }));
    bSubmitted.arrive();
    co_return co_await a;
  });
  REQUIRE(bSubmitted.waitFor(1));
  REQUIRE(aStarted.waitFor(1));
  Future<int> c = pool.submit([] { return 3; });  // from outside: the shared queue, over capacity
  holdA.open();
  CHECK(parent.get() == 1);
  CHECK(c.get() == 3);
  REQUIRE(bFuture->waitFor(kLong));
  CHECK_THROWS_AS(bFuture->get(), RejectedExecution);
  const PoolStats s = finalStats(pool);
  CHECK(s.discardedCount == 1);
  CHECK(s.completedTaskCount == 3);  // the parent, A and C
  CHECK(s.cancelledCount == 0);
  checkLedgerAddsUp(s);
}

TEST_CASE(
    "a child cancelled between the await and the join is counted once as cancelled, on top of the queue or under it",
    "[executor][join][cancel]") {
  if (!coexec::detail::FaultInjection::available()) {
    WARN("the library was built without fault points (COEXEC_FAULT_INJECTION): nothing to check");
    return;
  }
  // The join pause point cancels the awaited child right before the join
  // takes it. On top of the joiner's queue the join takes the entry out and
  // finds the task settled; under a newer task it leaves the entry, which
  // the worker takes later. Either way: never run, counted once as
  // cancelled, and the co_await reports OperationCancelled.
  const bool onTop = GENERATE(true, false);
  CAPTURE(onTop);
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::unbounded());
  std::atomic<bool> childRan{false};
  std::optional<Future<int>> child;  // the hook cancels it; set by the coroutine before its co_await
  struct Armed {
    explicit Armed(std::optional<Future<int>>& target) {
      coexec::detail::FaultInjection::setBeforeJoin(
          [](void* arg) {
            auto& future = *static_cast<std::optional<Future<int>>*>(arg);
            if (future) (void)future->cancel();
          },
          &target);
    }
    ~Armed() { coexec::detail::FaultInjection::setBeforeJoin(nullptr, nullptr); }
  };
  Future<bool> parent = pool.submit([&]() -> Task<bool> {
    Future<int> submitted = pool.submit([&] {
      childRan = true;
      return 1;
    });
    if (!onTop) pool.execute([] {});  // a newer task on top of the child
    child.emplace(std::move(submitted));
    const Armed armed(child);
    try {
      (void)co_await *child;
    } catch (const OperationCancelled&) {
      co_return true;
    }
    co_return false;
  });
  CHECK(parent.get());
  const PoolStats s = finalStats(pool);
  CHECK_FALSE(childRan.load());
  CHECK(s.cancelledCount == 1);
  CHECK(s.completedTaskCount == (onTop ? 1U : 2U));
  checkLedgerAddsUp(s);
}
