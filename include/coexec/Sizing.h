// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <chrono>
#include <cstddef>

#include "coexec/Export.h"

/// Arithmetic for choosing a pool's thread count and queue capacity
/// (docs/sizing.md works the examples and shows how to check a size with
/// stats() in production). Pure functions: no state, never blocking, safe
/// from any thread.
namespace coexec::sizing {

/// Threads for CPU-bound work: one per hardware thread
/// (std::thread::hardware_concurrency()), at least 1 (the standard allows
/// it to report 0 when unknown). More threads than cores only add context
/// switches to work that never waits.
COEXEC_EXPORT std::size_t forCpuBound() noexcept;

/// Threads for work that blocks (I/O, locks, remote calls), by Little's
/// law: the tasks in flight are `arrivalRate` (tasks per second) times
/// `serviceTime` (how long one task holds its thread, waiting included),
/// and a pool meant to run at `targetUtilization` (0 < u <= 1; 0.8 leaves
/// 20% headroom for bursts) needs that many divided by u. Rounded up to a
/// whole thread, at least 1; a result within one part in 10^9 of a whole
/// number is that number (floating-point noise never adds a thread). E.g.
/// 600/s x 0.4 s = 240 in flight; at u = 0.8, 300 threads.
/// \throws std::invalid_argument naming the argument if `arrivalRate` is
/// not a positive finite number, `serviceTime` is not positive, or
/// `targetUtilization` is not in (0, 1]; std::overflow_error if the result
/// does not fit a std::size_t.
COEXEC_EXPORT std::size_t forBlocking(double arrivalRate, std::chrono::nanoseconds serviceTime,
                                      double targetUtilization = 0.8);

/// The largest queue capacity that keeps a task within `latencyBudget` from
/// submission to completion, when `threads` threads each take
/// `serviceTime` per task: a task behind q queued ones waits about q x
/// serviceTime / threads before it starts, then runs for serviceTime, so
/// q = floor((latencyBudget - serviceTime) x threads / serviceTime). E.g. 8
/// threads, 50 ms per task, a 500 ms budget: (450 / 50) x 8 = 72. 0 means
/// no waiting fits the budget: use WorkQueue::synchronous(). Exact integer
/// arithmetic on nanoseconds; saturates at SIZE_MAX.
/// \throws std::invalid_argument naming the argument if `threads` is 0,
/// `serviceTime` is not positive, or `latencyBudget` is shorter than
/// `serviceTime` (no task can meet it).
COEXEC_EXPORT std::size_t queueCapacityFor(std::size_t threads, std::chrono::nanoseconds serviceTime,
                                           std::chrono::nanoseconds latencyBudget);

}  // namespace coexec::sizing
