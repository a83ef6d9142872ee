// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "coexec/Export.h"
#include "coexec/PoolStats.h"
#include "coexec/detail/StandardLibrary.h"

namespace coexec {

/// What a pool thread was doing when ThreadPoolExecutor::dumpThreads() looked.
enum class WorkerState : std::uint8_t {
  idle,     ///< between items, or spinning for work before it parks
  running,  ///< running a task, or a coroutine resuming on the pool
  parked,   ///< asleep, waiting for work (uses no CPU)
};

/// "IDLE", "RUNNING" or "PARKED". Never blocks, never throws.
COEXEC_EXPORT std::string_view toString(WorkerState state) noexcept;

/// One pool thread in a ThreadDump.
///
/// Thread safety: a plain value; copy freely.
struct WorkerDump {
  std::string name;  ///< the thread's name, "<pool name>-<n>"
  WorkerState state = WorkerState::idle;  ///< idle, running or parked
  /// True while the thread runs a task (submitted, executed, or due from a
  /// schedule; a coroutine task until it first suspends). False while it
  /// resumes a suspended coroutine (state running, no task age) or does not
  /// run anything.
  bool runningTask = false;
  /// How long the running task has run, 0 without one. Measured on the
  /// coarse monotonic clock (CLOCK_MONOTONIC_COARSE, whatever the pool's
  /// clock): a resolution of a few milliseconds, so a task that started in
  /// the last tick shows 0.
  std::chrono::nanoseconds taskAge{0};
  std::string taskName;            ///< the running task's TaskOptions::name; empty if unnamed or none
  std::size_t localQueueSize = 0;  ///< tasks this thread submitted that wait in its local queue
};

/// A snapshot of what a pool's threads are doing: its statistics and one
/// WorkerDump per live thread, in the order the threads were started. Taken
/// under the pool's lock; each worker's state, task and age are read at
/// their own instant without stopping the worker (a worker may finish its
/// task a moment after it was read).
///
/// Thread safety: a plain value; copy freely.
struct ThreadDump {
  PoolStats stats;                  ///< the pool's statistics, taken with the dump
  std::vector<WorkerDump> workers;  ///< one per live worker thread, oldest first
  /// Threads of RejectionPolicy::newThreadRuns() running rejected tasks
  /// now (they are not workers and are not listed).
  std::size_t temporaryThreads = 0;
};

}  // namespace coexec
