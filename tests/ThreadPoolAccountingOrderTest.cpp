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
#include <cstddef>
#include <deque>
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

/// A task that returns 1 once `gate` opens. Submitted from outside the pool:
/// not joinable, so a coroutine awaiting it suspends instead of running it.
Future<int> submitGated(ThreadPoolExecutor& pool, std::latch& gate) {
  return pool.submit([&gate] {
    gate.wait();
    return 1;
  });
}

/// A coroutine task that awaits `awaited` and returns how many afterExecute
/// calls it sees once resumed (-1 if `awaited` did not give `expected`).
Future<int> submitAwaiter(ThreadPoolExecutor& pool, Future<int>& awaited, int expected, std::atomic<int>& afterCalls) {
  return pool.submit([&awaited, expected, &afterCalls]() -> Task<int> {
    const int value = co_await awaited;
    co_return value == expected ? afterCalls.load(std::memory_order_relaxed) : -1;
  });
}

}  // namespace

TEST_CASE("a coroutine resumed inline by a pool task's settlement runs after that task's afterExecute",
          "[hooks][coroutine]") {
  // A chain: a gate task (a callable), then `depth` coroutine tasks, each
  // awaiting the one before. Once the gate opens, the whole chain runs on
  // the gate's thread: each settlement resumes the next awaiter inline, and
  // awaiter k must see the hooks of the k tasks before it. Depth 1: a
  // callable's settlement; from 2 on, coroutine tasks' too.
  const int depth = GENERATE(1, 2, 3);
  CAPTURE(depth);
  std::atomic<int> afterCalls{0};
  ThreadPoolExecutor pool(countingAfterExecute(2, afterCalls));
  std::latch gate(1);
  std::deque<Future<int>> chain;  // stable references: each awaiter holds the one before
  chain.push_back(submitGated(pool, gate));
  for (int k = 1; k <= depth; ++k)
    chain.push_back(submitAwaiter(pool, chain.back(), k == 1 ? 1 : k - 1, afterCalls));
  for (std::size_t i = 0; i + 1 < chain.size(); ++i)
    awaitRegistration(chain[i]);
  gate.count_down();
  CHECK(chain.back().get() == depth);
  pool.close();
  CHECK(afterCalls.load() == depth + 1);
}
