// SPDX-License-Identifier: BSL-1.0
#include "coexec/ThreadPoolExecutor.h"

// The order of a task's end on the pool: the code that its settlement resumes
// inline (a coroutine of the same pool awaiting it) runs after the pool's
// accounting of the task, its afterExecute hook included, never before it.
// Each case forces the inline resumption: the awaited task is released by a
// latch only once the awaiting coroutine has registered (its Future then has
// a continuation), so that the thread that settles the task is the one that
// resumes the coroutine.

#include <atomic>
#include <chrono>
#include <latch>
#include <thread>

#include "Assertions.h"

#include "coexec/Future.h"
#include "coexec/Task.h"
#include "coexec/WithTimeout.h"

using namespace std::chrono_literals;

using coexec::Future;
using coexec::Task;
using coexec::TaskInfo;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;

namespace {

/// Spins (yielding) until `future` has a continuation registered: the
/// coroutine awaiting it has suspended on it. The Future's owner keeps it
/// alive meanwhile.
template <class R>
void awaitRegistration(const Future<R>& future) {
  while (!coexec::detail::FutureAccess::core(future).hasContinuation())
    std::this_thread::yield();
}

ThreadPoolOptions countingAfterExecute(std::size_t threads, std::atomic<int>& afterCalls) {
  ThreadPoolOptions options;
  options.name = "order";
  options.corePoolSize = threads;
  options.maximumPoolSize = threads;
  options.hooks.afterExecute = [&afterCalls](const TaskInfo&, std::exception_ptr) {
    afterCalls.fetch_add(1, std::memory_order_relaxed);
  };
  return options;
}

}  // namespace

TEST_CASE("a coroutine resumed inline by a callable task's settlement runs after that task's afterExecute",
          "[hooks][coroutine]") {
  std::atomic<int> afterCalls{0};
  ThreadPoolExecutor pool(countingAfterExecute(2, afterCalls));
  std::latch gate(1);
  // Submitted from outside the pool: not joinable, so the awaiting coroutine
  // suspends instead of running it.
  Future<int> child = pool.submit([&gate] {
    gate.wait();
    return 1;
  });
  Future<int> parent = pool.submit([&child, &afterCalls]() -> Task<int> {
    const int one = co_await child;
    // Resumed inline on the thread that settled the child: its hook has run.
    co_return one == 1 ? afterCalls.load(std::memory_order_relaxed) : -1;
  });
  awaitRegistration(child);
  gate.count_down();
  CHECK(parent.get() == 1);
  pool.close();
  CHECK(afterCalls.load() == 2);
}

TEST_CASE("a coroutine resumed inline by a coroutine task's settlement runs after that task's afterExecute",
          "[hooks][coroutine]") {
  std::atomic<int> afterCalls{0};
  ThreadPoolExecutor pool(countingAfterExecute(3, afterCalls));
  std::latch gate(1);
  // The chain, once the gate opens, on the gate's thread: the gate task
  // settles and resumes the child inline, the child ends and resumes the
  // parent inline. Each resumption comes after the settled task's hook.
  Future<int> gateTask = pool.submit([&gate] {
    gate.wait();
    return 1;
  });
  Future<int> child = pool.submit([&gateTask, &afterCalls]() -> Task<int> {
    const int one = co_await gateTask;
    co_return one == 1 ? afterCalls.load(std::memory_order_relaxed) : -1;  // the gate task's hook: 1
  });
  Future<int> parent = pool.submit([&child, &afterCalls]() -> Task<int> {
    const int seenByChild = co_await child;
    co_return seenByChild == 1 ? afterCalls.load(std::memory_order_relaxed) : -1;  // and the child's: 2
  });
  awaitRegistration(gateTask);
  awaitRegistration(child);
  gate.count_down();
  CHECK(parent.get() == 2);
  pool.close();
  CHECK(afterCalls.load() == 3);
}
