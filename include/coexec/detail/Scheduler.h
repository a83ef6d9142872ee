// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <coroutine>

#include "coexec/Export.h"
#include "coexec/detail/NoInlineResumption.h"
#include "coexec/detail/StandardLibrary.h"

namespace coexec::detail {

class TimerService;
class TaskCore;

/// Timers that a scheduler implemented outside the core keeps itself (an
/// event loop's own timer queue, such as the Asio bridge's io_context
/// timers), on the steady clock. The sleeps (sleepFor, sleepUntil) of
/// coroutines running on such a scheduler wait there instead of in a
/// TimerService.
///
/// A timer is armed once and fires once: its callback runs exactly once, on
/// a thread of the scheduler, with that scheduler current. It cannot be
/// removed: cancelling a sleep makes its timer fire at once. Its handle
/// stays valid while its armer holds it: arm() gives one hold, hold() adds
/// one, release() drops one (the timer itself lives until it has fired).
///
/// Thread safety: arm() is called on a thread of the scheduler (the sleeping
/// coroutine's); hold(), fireNow() and release() from any thread, with a
/// hold, concurrently with the callback running.
class COEXEC_EXPORT SleepTimers {
 public:
  using Callback = void (*)(void* arg) noexcept;
  /// Arms a timer that calls `callback(arg)` at or after `deadline` (or soon
  /// after fireNow()); returns its handle. Never blocks.
  /// \throws std::bad_alloc (nothing is armed).
  virtual void* arm(std::chrono::steady_clock::time_point deadline, Callback callback, void* arg) = 0;
  /// Makes the timer fire as soon as it can (it may be firing already).
  /// Never blocks; never throws.
  virtual void fireNow(void* timer) noexcept = 0;
  /// Adds a hold on the handle. Never blocks; never throws.
  virtual void hold(void* timer) noexcept = 0;
  /// Drops a hold on the handle (the timer may still fire, once). Never
  /// blocks; never throws.
  virtual void release(void* timer) noexcept = 0;

 protected:
  ~SleepTimers() = default;
};

/// Where a suspended coroutine resumes: a pool, or the run loop of syncWait().
/// Every thread has a current scheduler (null on plain threads); an awaiter
/// records it when its coroutine suspends and resumes the coroutine there.
class COEXEC_EXPORT Scheduler {
 public:
  /// Resumes `handle` on one of this scheduler's threads. Continuations are
  /// admitted work: never rejected. Never blocks; never throws.
  virtual void post(std::coroutine_handle<> handle) noexcept = 0;
  /// An awaiter that recorded this scheduler keeps it alive until it has
  /// posted its continuation (a syncWait loop may end before a coroutine it
  /// started resumes; a pool may be shut down and destroyed meanwhile).
  /// `awaitingTask` is the task of the coroutine that suspends (taskOf() its
  /// TaskContext), null for a coroutine that runs for no task, such as one of
  /// a coroutine type foreign to coexec: the hold is decided from the
  /// coroutine itself, never from the thread it suspends on. Returns false
  /// when no hold was taken (a pool whose own task the coroutine belongs to:
  /// that task keeps the pool alive): release() must then not be called.
  /// Never blocks; never throws.
  virtual bool retain(const TaskCore* awaitingTask) noexcept {
    (void)awaitingTask;
    return false;
  }
  virtual void release() noexcept {}
  /// The timer service that sleeps of coroutines running here wait in, on
  /// the clock this scheduler keeps time by (a pool's own); null for the
  /// process-wide steady-clock service. Never blocks; never throws.
  virtual TimerService* timerService() noexcept { return nullptr; }
  /// The timers of its own that the sleeps of coroutines running here wait
  /// in, if it has any (then timerService() is not used for sleeps); null
  /// for the core's schedulers. Never blocks; never throws.
  virtual SleepTimers* sleepTimers() noexcept { return nullptr; }

 protected:
  ~Scheduler() = default;
};

/// The scheduler of the calling thread, or null.
COEXEC_EXPORT Scheduler* currentScheduler() noexcept;
/// Makes `scheduler` current on the calling thread; returns the previous one.
COEXEC_EXPORT Scheduler* exchangeCurrentScheduler(Scheduler* scheduler) noexcept;
/// An identity for "the pool whose thread this is", or null.
COEXEC_EXPORT const void* currentPoolIdentity() noexcept;

/// A per-thread loop that resumes coroutines one after another, so that a
/// chain of coroutines handing control to each other (a task starting its
/// child, a finished child resuming its parent) runs in constant stack space
/// whatever the compiler does with tail calls (GCC makes symmetric transfer a
/// tail call only with sibling-call optimisation, and sanitizers disable it).
struct Trampoline {
  std::coroutine_handle<> next;
};

/// The innermost trampoline running on this thread, or null.
COEXEC_EXPORT Trampoline*& currentTrampoline() noexcept;

/// Resumes `handle` on this thread, and whatever it transfers control to,
/// until they all suspend or finish. Every resumption in coexec goes through
/// here. The calling thread's current task (currentTask()) is the same
/// after the call as before it, whatever the resumed coroutines set.
/// Never throws.
COEXEC_EXPORT void resume(std::coroutine_handle<> handle) noexcept;

/// The calling thread's current task: the pool task whose code the thread
/// runs now, or null. Work submitted with plain submit()/execute() is linked
/// to it as a child (docs/cancellation.md, "The current task"). It is set
/// - by runAsCurrent() (src/coro/Runtime.h) while a callable's body runs;
/// - for a coroutine task, on its first start (CoroutineTask), and each time
///   the coroutine goes on after a coexec co_await that suspended (Future,
///   sleep, resumeOn, a Task's return to its awaiter, the combinators
///   (invokeAll/invokeAny, whenAll/whenAny, asCompleted, TaskGroup::join),
///   withTimeout, resumeOn(lane): their await_resume()
///   sets it to the task of the coroutine's TaskContext, or null for a
///   coroutine that runs for no pool task);
/// and restored by whoever resumed the coroutine when control comes back to
/// it (resume()). A coroutine resumed by foreign code (a hand-written
/// awaiter, an Asio operation) runs with whatever its resumer's thread has,
/// until its next coexec co_await returns.
/// (One thread-local pointer, read and written inline: the awaiters set it
/// on every resumption. constinit: no initialisation guard on access.)
extern COEXEC_EXPORT constinit thread_local TaskCore* tlsCurrentTask;
inline TaskCore* currentTask() noexcept { return tlsCurrentTask; }
inline void setCurrentTask(TaskCore* task) noexcept { tlsCurrentTask = task; }
/// Sets the current task and returns the previous one.
inline TaskCore* exchangeCurrentTask(TaskCore* task) noexcept {
  TaskCore* const previous = tlsCurrentTask;
  tlsCurrentTask = task;
  return previous;
}

/// For an await_suspend or final awaiter that hands control to `handle`:
/// queues it on the running trampoline and returns noop (the caller suspends,
/// the trampoline resumes `handle`), or, outside a trampoline (a coroutine
/// resumed directly by foreign code), returns `handle` for symmetric transfer.
inline std::coroutine_handle<> transferTo(std::coroutine_handle<> handle) noexcept {
  Trampoline* trampoline = currentTrampoline();
  if (trampoline != nullptr && !trampoline->next) {
    trampoline->next = handle;
    return std::noop_coroutine();
  }
  return handle;
}

/// Resumes `handle` for `scheduler`: inline when the calling thread already
/// belongs to it (or it is null), otherwise posted to it. Always posted (to a
/// non-null scheduler) while a NoInlineResumption is alive on the calling
/// thread: no continuation runs inside a cancellation or a settle that user
/// code called. Also posted, to
/// its own thread's scheduler, when this thread's stack is running low
/// (stackIsLow()): a long chain of awaits that complete one another (each
/// finished task resuming the coroutine that awaited it, which finishes in
/// turn) would otherwise nest one resumption in the next without bound.
/// Never blocks; never throws.
COEXEC_EXPORT void resumeFor(Scheduler* scheduler, std::coroutine_handle<> handle) noexcept;

/// True when the calling thread has less than a reserve of its stack left (a
/// quarter of it, at least 64 KiB, kept free): code that would nest more
/// work on the stack (an inline resumption, a join) defers it instead.
/// Under ThreadSanitizer also true 512 KiB below where the thread first
/// asked (its stack records hold at most 65,535 frames). False on a thread
/// whose stack cannot be read. Never blocks; never throws.
COEXEC_EXPORT bool stackIsLow() noexcept;

}  // namespace coexec::detail
