// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "coexec/Export.h"
#include "coexec/LatencyHistogram.h"

namespace coexec {

/// The lifecycle states of a ThreadPoolExecutor, in the order a pool moves
/// through them (see ThreadPoolExecutor, "Lifecycle").
enum class PoolState : std::uint8_t {
  running,     ///< accepts new tasks and runs queued ones
  shutdown,    ///< no new tasks; queued and running ones finish
  stop,        ///< shutdownNow(): queue drained, running tasks asked to cancel
  terminated,  ///< no threads, no work; the `terminated` hook has run
};

/// "RUNNING", "SHUTDOWN", "STOP" or "TERMINATED". Never blocks, never throws.
COEXEC_EXPORT std::string_view toString(PoolState state) noexcept;

/// A snapshot of a pool's sizes and counters, taken by stats() under the
/// pool's lock. What is consistent, and when:
///
/// - The sizes and the lifecycle fields (`state`, `corePoolSize`,
///   `maximumPoolSize`, `poolSize`, `largestPoolSize`, `queueCapacity`,
///   `rejectedCount`, `discardedCount`, `drainedCount`) change only under
///   that lock: they are one instant's.
/// - The task counters are updated by the workers without the lock and
///   summed per worker: each outcome counted was admitted before, so the
///   outcomes never add up to more than `taskCount`, and no counter goes
///   down from one snapshot to the next; `activeCount` never exceeds
///   `poolSize`.
/// - A task is counted in its outcome (`completedTaskCount`, `failedCount`,
///   or `cancelledCount` if it threw OperationCancelled) before its Future
///   settles: a snapshot taken after `get()` returned, or after a coroutine
///   awaiting the Future resumed, counts it. (`activeCount` may still count
///   the thread that ran it for a moment.)
/// - `queueSize` and each local queue's size are exact at their own instant
///   during the call (workers take tasks without the lock); for bounded(n)
///   each is at most n, but under load their sum may count a task and the
///   subtask it submitted from two different instants.
///
/// The ledger: once a pool is quiescent (no task running or queued, and no
/// periodic schedule that has become due and not yet ended: such a schedule
/// counts in `taskCount` from its first run and in an outcome when it ends),
/// `taskCount == completedTaskCount + failedCount + cancelledCount +
/// discardedCount + drainedCount + queueSize + localQueueSize` (both queue
/// sizes are 0 once the pool is quiescent). A task that reached the
/// rejection policy is counted in `rejectedCount` and never in `taskCount`,
/// except when `discardOldest` admits it after all by evicting the oldest
/// task: that task is then in both. A task that waited for room and was
/// then admitted (the `block` policy, or `submitWhenRoom()`) is counted in
/// `taskCount` and `waitedForRoomCount`, never in `rejectedCount`; one whose
/// wait ended without room (block()'s timeout, a shutdown) in
/// `rejectedCount`; a submitWhenRoom() that timed out or whose producer was
/// cancelled, in no counter (nothing was submitted).
///
/// Thread safety: a plain value; copy freely.
struct PoolStats {
  std::string name;  ///< the pool's name (thread-name prefix)
  PoolState state = PoolState::running;  ///< RUNNING, SHUTDOWN, STOP or TERMINATED
  std::size_t corePoolSize = 0;          ///< the pool's corePoolSize setting
  std::size_t maximumPoolSize = 0;       ///< the pool's maximumPoolSize setting
  std::size_t poolSize = 0;              ///< live worker threads
  std::size_t activeCount = 0;           ///< threads running a task now
  std::size_t largestPoolSize = 0;       ///< historical peak of poolSize
  std::uint64_t taskCount = 0;           ///< tasks admitted (started on a new thread or queued), and tasks
                                         ///< settled as cancelled at submission (a token, or the submitting
                                         ///< task, cancelled already), which are not admitted
  std::uint64_t completedTaskCount = 0;  ///< admitted tasks that returned normally
  std::size_t queueSize = 0;             ///< tasks waiting in the work queue (outside submissions)
  std::size_t localQueueSize = 0;        ///< tasks submitted from the pool's own threads, waiting in their
                                         ///< local queues (bounded(n) counts them against its capacity)
  std::size_t queueCapacity = 0;         ///< 0 for synchronous(); SIZE_MAX for unbounded()
  std::uint64_t rejectedCount = 0;       ///< tasks the pool refused: those the rejection policy refused (for
                                         ///< block(), after its timeout), and tasks refused after shutdown
                                         ///< whatever the policy (schedule*, invokeAll / invokeAny,
                                         ///< TaskGroup::spawn, submitWhenRoom)
  std::uint64_t waitedForRoomCount = 0;  ///< tasks admitted after waiting for room: block() and
                                         ///< submitWhenRoom() (also in taskCount)
  std::size_t waitingProducers = 0;      ///< producers waiting for room now: coroutines suspended in
                                         ///< submitWhenRoom() and threads blocked by block(); their tasks
                                         ///< are in no count until admitted
  std::uint64_t failedCount = 0;         ///< admitted tasks that threw (or whose beforeExecute threw)
  std::uint64_t cancelledCount = 0;      ///< admitted tasks cancelled while queued, or that ended by throwing
                                         ///< OperationCancelled (a task cancelled while running that returns
                                         ///< normally counts as completed; its Future reports the cancellation),
                                         ///< and tasks cancelled at submission (see taskCount)
  std::uint64_t discardedCount = 0;      ///< admitted tasks evicted from the queue by discardOldest
  std::uint64_t drainedCount = 0;        ///< tasks returned unrun by shutdownNow()
  std::size_t scheduledCount = 0;        ///< timers pending: one-shot scheduled tasks not yet due (not in
                                         ///< taskCount until due) and periodic schedules waiting for their next run
  std::uint64_t temporaryThreadRuns = 0; ///< rejected tasks that RejectionPolicy::newThreadRuns() ran on a
                                         ///< temporary thread (also in rejectedCount, never in taskCount)
  LatencySummary queueWait;              ///< ThreadPoolOptions::recordLatency: from admission (a timer task:
                                         ///< its due time) to the start on a pool thread; empty when off, and in
                                         ///< the snapshot a RejectedExecution carries
  LatencySummary runTime;                ///< recordLatency: from the start to the end (see ThreadPoolOptions)
};

}  // namespace coexec
