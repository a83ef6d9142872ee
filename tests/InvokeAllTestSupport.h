// SPDX-License-Identifier: BSL-1.0
#pragma once

// Helpers shared by the invokeAll and invokeAny tests (InvokeAllTest.cpp,
// InvokeAnyTest.cpp): a pool on a ManualClock beside a driver pool, and the
// coroutines that await the combinators.

#include <functional>
#include <vector>

#include "CombinatorTestSupport.h"
#include "coexec/Clock.h"
#include "coexec/InvokeAll.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

namespace coexec::test {

/// The set-up of the timeout tests: a `driver` pool (one thread) for the
/// awaiting coroutine and a `pool` of two threads on `clock`, a ManualClock;
/// `children.release` opens before the pools go.
struct ManualClockSetup {
  Children children;
  ManualClock clock;
  ThreadPoolExecutor driver{taggedPool("driver", 1, 1, WorkQueue::bounded(8))};
  ThreadPoolExecutor pool{manualClockPool("inv", clock)};
  OpenOnExit guard{children.release};
};

using IntTasks = std::vector<std::function<int()>>;

inline Task<std::vector<int>> invokeAllOf(ThreadPoolExecutor& pool, IntTasks& tasks) {
  co_return co_await pool.invokeAll(tasks);
}

template <class Range>
Task<int> invokeAnyOf(ThreadPoolExecutor& pool, Range& tasks) {
  co_return co_await pool.invokeAny(tasks);
}

/// Returns once the one thread of `driver` is free: a coroutine it runs has
/// suspended (for invokeAll: every task was handed over and the timer armed).
inline void waitUntilSuspended(ThreadPoolExecutor& driver) {
  driver.submit([] {}).get();
}

}  // namespace coexec::test
