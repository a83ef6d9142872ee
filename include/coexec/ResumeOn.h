// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <coroutine>
#include <cstdint>

#include "coexec/Export.h"
#include "coexec/Task.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/TaskCore.h"
#include "coexec/detail/RunSegments.h"

namespace coexec {

class ThreadPoolExecutor;

namespace detail {
class ResumeOnAwaiter;
}

/// `co_await resumeOn(pool)` continues the awaiting coroutine on a thread of
/// `pool`.
///
/// From a coroutine that is not running on `pool`, the hop is new work: it
/// goes through the pool's admission (core -> queue -> extra thread ->
/// rejection policy). Under abort() a saturated or shut-down pool makes the
/// `co_await` throw RejectedExecution (the coroutine goes on where it was);
/// under callerRuns() the coroutine goes on in the calling thread; under
/// discard() the `co_await` throws RejectedExecution; if the hop is returned
/// by shutdownNow() and dropped, it throws BrokenPromise on the thread that
/// dropped it. Under callerRuns() the coroutine goes on from its own frame
/// (not nested inside the refused hop), so a loop of refused hops runs in
/// constant stack. From a coroutine already running on `pool` it is a yield:
/// the coroutine resumes on the same worker after the items that were
/// waiting when it yielded (or as soon as nothing else waits; an idle worker
/// takes it if that worker blocks), so a task already queued runs before it.
/// Never rejected, never blocks.
///
/// Never blocks a thread except under block() (see RejectionPolicy).
///
/// A coroutine that hopped on from outside is the pool's guest, not one of
/// its tasks: it counts in no counter of stats(). While it is suspended on
/// the pool (a sleep on the pool's clock, an awaited Future, a combinator),
/// it keeps the pool from terminating, as a suspended task of the pool does:
/// shutdown(), close() and awaitTermination() wait until it has been resumed
/// and has left the pool or finished, so its continuation is never dropped.
/// shutdownNow() does not cancel it (its cancellation token is not the
/// pool's).
/// \note `pool` must outlive the coroutine's stay on it.
/// \note After the hop, read the thread's id with coexec::thisThreadId(), not
/// std::this_thread::get_id(): clang at -O1 and above may reuse a get_id()
/// read before the `co_await` and return the old thread's id (ThisThread.h).
[[nodiscard]] COEXEC_EXPORT detail::ResumeOnAwaiter resumeOn(ThreadPoolExecutor& pool) noexcept;

namespace detail {

class COEXEC_EXPORT ResumeOnAwaiter {
 public:
  explicit ResumeOnAwaiter(ThreadPoolExecutor& pool) noexcept : pool_(&pool) {}
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> awaiting) {
    TaskCore* const task = taskOf(taskContextOf(awaiting));
    task_ = reinterpret_cast<std::uintptr_t>(task);
    return suspendingSegment(task, [&] { return suspend(awaiting); });
  }
  /// Makes the coroutine's task the thread's current task again (if it
  /// suspended); rethrows a refused hop's error.
  void await_resume();

 private:
  bool suspend(std::coroutine_handle<> awaiting);

  static constexpr std::uintptr_t kSuspended = 1;  // in task_: suspend() returned true

  ThreadPoolExecutor* pool_;
  Ref<TaskCore> hop_;         // the admitted hop; null for a yield
  std::uintptr_t task_ = 0;   // the coroutine's task (see currentTask()) | kSuspended
};

}  // namespace detail
}  // namespace coexec
