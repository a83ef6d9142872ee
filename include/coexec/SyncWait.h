#pragma once

#include <exception>
#include <stdexcept>
#include <utility>

#include "coexec/Export.h"
#include "coexec/Task.h"
#include "coexec/detail/Diagnostics.h"
#include "coexec/detail/Scheduler.h"

namespace coexec {

namespace detail {

/// The event loop syncWait() runs on its thread: coroutines that suspend
/// inside syncWait resume here. Its state is reference-counted: a coroutine
/// that syncWait started but that outlives it (a fire-and-forget coroutine
/// run by callerRuns, say) can still post to it, and is then resumed on the
/// posting thread instead.
class COEXEC_EXPORT RunLoop {
 public:
  RunLoop();
  RunLoop(const RunLoop&) = delete;
  RunLoop& operator=(const RunLoop&) = delete;
  /// Closes the loop: later posts resume on the posting thread.
  ~RunLoop();
  /// The scheduler that posts to this loop.
  [[nodiscard]] Scheduler* scheduler() const noexcept;
  /// Makes run() return once the posted work is done. Any thread.
  void finish() noexcept;
  /// Resumes posted coroutines on this thread until finish().
  void run();

 private:
  class State;
  State* state_;
};

/// \throws std::logic_error if the calling thread is a pool thread.
COEXEC_EXPORT void checkSyncWaitAllowed();

}  // namespace detail

/// Runs `task` to completion on the calling thread and returns its value, or
/// rethrows its exception. Blocks until the task finishes. Coroutines that
/// suspend inside `task` resume on this thread (syncWait runs their
/// continuations in a loop), unless they hop to a pool explicitly.
/// Takes the Task over: pass a temporary, `syncWait(work(pool))`, or move a
/// named one in, `syncWait(std::move(task))`; a named Task (an lvalue) is a
/// compile-time error that says so. The coroutine frame is destroyed before
/// syncWait returns.
/// \throws std::logic_error if the calling thread is a thread of a coexec
/// pool (blocking a pool thread can deadlock the pool: `co_await` the task
/// instead), if `task` was already started (awaited, or submitted to a pool),
/// and, as std::invalid_argument, if `task` is empty.
template <class T>
T syncWait(Task<T>&& task) {
  Task<T> owned = std::move(task);  // the frame dies with this call, not with the caller's Task
  detail::checkSyncWaitAllowed();
  const auto handle = detail::startableHandle(owned, "", "syncWait");
  detail::RunLoop loop;
  handle.promise().setCompletion([](void* l) noexcept { static_cast<detail::RunLoop*>(l)->finish(); }, &loop);
  struct RestoreScheduler {
    detail::Scheduler* previous;
    ~RestoreScheduler() { detail::exchangeCurrentScheduler(previous); }
  } restore{detail::exchangeCurrentScheduler(loop.scheduler())};
  detail::resume(handle);
  loop.run();
  return handle.promise().result();
}

/// Refused at compile time: a named Task must be moved in,
/// `syncWait(std::move(task))` (a Task is move-only and runs once).
template <class T>
T syncWait(const Task<T>& task) {
  static_assert(detail::kAlwaysFalse<T>,
                "coexec: syncWait takes the Task over; a named Task must be moved in: syncWait(std::move(task))");
  (void)task;
  std::terminate();
}

}  // namespace coexec
