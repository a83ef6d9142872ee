// SPDX-License-Identifier: BSL-1.0
#pragma once

// The run time of a coroutine task (ThreadPoolOptions::recordLatency): the
// sum of its segments, each from where the coroutine starts or goes on to
// where it reaches a coexec co_await that may suspend (the awaiter's
// await_suspend) or finishes. Time spent suspended, and inside a coexec
// awaiter's machinery, is not the task's. Each segment is summed into the
// task (TaskCore::RunTiming) by the thread that ran it, before the coroutine
// is handed on: once it is, another thread may run the task's code, finish
// it and free it.
//
// Which segment a thread is timing is its claim (a thread-local word):
// - 0 outside every resumption (a thread that resumes nothing of coexec's);
// - "in a resumption": inside resume(), which every coexec resumption goes
//   through, and which restores the claim it found when it returns (once a
//   pool that records latency exists: enableRunSegments());
// - a task whose segment is open on this thread, or closed here by an
//   awaiter's await_suspend (the coroutine may go on at once, here).
// A segment closes only on the thread whose claim names it: a coroutine that
// a foreign awaitable (an Asio operation, a hand-written awaiter) resumed on
// some thread is not timed until its next coexec co_await goes on, and the
// time it spent waiting on the foreign awaitable is never counted.

#include <atomic>
#include <cstdint>

#include "coexec/Export.h"
#include "coexec/detail/TaskCore.h"

namespace coexec::detail {

/// Closes `task`'s open segment if this thread's claim names it (adds it to
/// the task's run time; the claim then names the task closed). Out of line:
/// reads a thread-local (see Scheduler.h on what an optimizer may merge in a
/// coroutine body). Never throws.
COEXEC_EXPORT void endRunSegment(TaskCore& task) noexcept;
/// Opens a segment of `task` now, on this thread, unless one is open here
/// already or the thread resumes nothing of coexec's (claim 0). Never throws.
COEXEC_EXPORT void continueRunSegment(TaskCore& task) noexcept;
/// Sets this thread's claim to an open segment of `task` (the pool thread
/// that starts a coroutine task) and returns the claim it replaces, for
/// restoreRunSegmentClaim(). Never throws.
COEXEC_EXPORT std::uintptr_t claimRunSegment(TaskCore& task) noexcept;
/// Gives this thread back the claim claimRunSegment() returned. Never throws.
COEXEC_EXPORT void restoreRunSegmentClaim(std::uintptr_t claim) noexcept;
/// Makes resume() keep the claims, from now on (a pool that records latency
/// calls it when constructed; until one does, resumptions skip them). Never
/// throws.
COEXEC_EXPORT void enableRunSegments() noexcept;

/// Set, for good, by the first pool that records latency (enableRunSegments()):
/// until then no coroutine task is timed, and neither resume() nor an awaiter
/// looks further.
extern COEXEC_EXPORT std::atomic<bool> runSegmentsTimed;

/// For an awaiter's await_suspend: runs `suspend` (its body) with `task`'s
/// segment closed (`task` may be null: a coroutine of no task), and opens it
/// again if `suspend` throws (the coroutine then goes on at once, here).
/// The check is one load when the task is not timed.
template <class Suspend>
decltype(auto) suspendingSegment(TaskCore* task, Suspend&& suspend) {
  if (!runSegmentsTimed.load(std::memory_order_relaxed) || task == nullptr || task->runTiming.clock == nullptr)
      [[likely]] {
    return suspend();
  }
  endRunSegment(*task);
  try {
    return suspend();
  } catch (...) {
    continueRunSegment(*task);
    throw;
  }
}

/// For an awaiter's await_resume, whenever its await_suspend ran (whether it
/// suspended or not): the coroutine goes on, in a new segment.
inline void segmentGoesOn(TaskCore* task) noexcept {
  if (runSegmentsTimed.load(std::memory_order_relaxed) && task != nullptr && task->runTiming.clock != nullptr)
      [[unlikely]] {
    continueRunSegment(*task);
  }
}

/// For the end of a coroutine task, on the thread that finished it.
inline void segmentEnds(TaskCore* task) noexcept {
  if (runSegmentsTimed.load(std::memory_order_relaxed) && task != nullptr && task->runTiming.clock != nullptr)
      [[unlikely]] {
    endRunSegment(*task);
  }
}

}  // namespace coexec::detail
