// SPDX-License-Identifier: BSL-1.0
#pragma once

// Helpers shared by the scheduled task tests (ScheduledTaskOneShotTest,
// ScheduledTaskPeriodicTest, ScheduledTaskShutdownTest): a pool on a
// ManualClock, and the wait for a schedule's next timer.
//
// What a test may rely on after advance(d) returns: every timer due by then
// has been handed to the pool (its task is queued, or already running or
// done); runs then go on on pool threads, so the test waits for them
// (Future::get, Counter) before it looks.

#include <cstddef>

#include "TestSupport.h"
#include "coexec/Clock.h"
#include "coexec/ThreadPoolExecutor.h"

namespace coexec::test {

/// Options for a pool named "sched" of `threads` threads (core == max) on `clock`.
inline ThreadPoolOptions manualPool(ManualClock& clock, std::size_t threads = 2) {
  return ThreadPoolOptions{.name = "sched", .corePoolSize = threads, .maximumPoolSize = threads, .clock = &clock};
}

/// Waits until the schedule's next timer is armed (a run returned and the
/// pool re-armed it): the pool's scheduledCount reaches `n`.
inline bool armed(ThreadPoolExecutor& pool, std::size_t n = 1) {
  return eventually([&] { return pool.stats().scheduledCount == n; });
}

}  // namespace coexec::test
