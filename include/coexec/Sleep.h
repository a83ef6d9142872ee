// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <optional>

#include "coexec/CancellationToken.h"
#include "coexec/Export.h"
#include "coexec/Task.h"
#include "coexec/detail/ResumePoint.h"
#include "coexec/detail/Scheduler.h"
#include "coexec/detail/Time.h"
#include "coexec/detail/RunSegments.h"

namespace coexec {

namespace detail {
class SleepAwaiter;
}

/// `co_await sleepFor(d)` suspends the awaiting coroutine for at least `d`
/// without holding a thread, then resumes it where it was running: on the
/// pool whose thread it was on (as a continuation: never rejected, also
/// after shutdown), or, under syncWait(), on the syncWait() thread.
///
/// Never blocks a thread. The time is that of the timer service of the
/// scheduler the coroutine runs on when it awaits: on a pool, the pool's
/// service and clock (the steady clock unless the pool was given another
/// one); on a scheduler with timers of its own (a Task on an io_context,
/// through the Asio bridge: docs/asio.md), those timers, on the steady
/// clock; elsewhere (syncWait(), a plain thread) the process-wide service on
/// the steady clock, whose one thread is started by the first sleep and is
/// asleep while no timer is due. The deadline is that clock's now() plus `d`,
/// read when the coroutine awaits (not when sleepFor() is called). A zero or
/// negative `d` does not suspend; a `d` too large for the clock saturates
/// (the coroutine then sleeps until it is cancelled, or for as long as the
/// program runs).
///
/// Cancellation: a coroutine that runs for a pool task (a submitted or
/// executed coroutine, and every Task it awaits, however deep: a child task
/// runs with its parent's token) has that task's token, which the task's
/// Future::cancel() and the pool's shutdownNow() cancel. When it is
/// cancelled while the coroutine sleeps, the sleep ends at once: its timer
/// is removed and the coroutine resumes where it was running (posted there,
/// not run inside the cancelling thread, unless it runs on no scheduler)
/// with OperationCancelled. A coroutine whose token is already cancelled
/// when it awaits does not suspend and gets OperationCancelled, whatever `d`
/// is, zero and negative included. A cancel racing the timer has one
/// winner: the coroutine resumes once, normally or with OperationCancelled.
/// Coroutines run by syncWait() have no token, and their sleeps end only
/// when due.
/// \throws OperationCancelled (from the `co_await`) as above.
/// \throws std::bad_alloc (from the `co_await`) if the timer or the task's
/// token cannot be created, and std::system_error if the timer thread cannot
/// start; the coroutine then goes on at once, with the exception.
/// \note A pool's close() and awaitTermination() wait for the sleeping
/// coroutine tasks submitted to it, as for its running ones. A coroutine
/// that only hopped onto a pool (resumeOn) must not outlive the pool while
/// it sleeps, as for any suspension there. A coroutine that runs on no
/// scheduler (resumed directly by foreign code) resumes on the timer thread
/// and runs there until it next suspends, delaying the other timers: hop off
/// with resumeOn(). A coroutine still sleeping when the program exits is
/// never resumed.
template <class Rep, class Period>
[[nodiscard]] detail::SleepAwaiter sleepFor(std::chrono::duration<Rep, Period> d) noexcept;

/// `co_await sleepUntil(t)` suspends the awaiting coroutine until the clock
/// of its timer service reaches `t`, as sleepFor() does: on a pool given a
/// ManualClock, `t` is a time of that clock. A `t` that the clock has reached
/// when the coroutine awaits does not suspend (but still throws
/// OperationCancelled if the coroutine's token is cancelled).
[[nodiscard]] COEXEC_EXPORT detail::SleepAwaiter sleepUntil(std::chrono::steady_clock::time_point t) noexcept;

namespace detail {

/// The awaiter of sleepFor() and sleepUntil(). Safe to await as a temporary
/// (`co_await sleepFor(d)`) or named; awaited once. Neither copyable nor
/// movable (the timer and the cancellation callback refer to it).
class COEXEC_EXPORT SleepAwaiter {
 public:
  /// A sleep of `delay` (not negative) from the time of the await.
  explicit SleepAwaiter(std::chrono::steady_clock::duration delay) noexcept : delay_(delay), relative_(true) {}
  /// A sleep until `deadline`.
  explicit SleepAwaiter(std::chrono::steady_clock::time_point deadline) noexcept : deadline_(deadline) {}
  SleepAwaiter(const SleepAwaiter&) = delete;
  SleepAwaiter& operator=(const SleepAwaiter&) = delete;

  /// Always false: whether to suspend depends on the scheduler's clock and
  /// the coroutine's token, which await_suspend() looks at.
  [[nodiscard]] bool await_ready() const noexcept { return false; }
  /// False (go on without suspending) if the deadline has passed or the
  /// coroutine's token is cancelled.
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> awaiting) {
    TaskContext* const context = taskContextOf(awaiting);
    task_ = taskOf(context);
    return suspendingSegment(task_, [&] { return suspend(awaiting, context); });
  }
  /// Makes the coroutine's task the thread's current task again (if it
  /// suspended). \throws OperationCancelled if the sleep ended by
  /// cancellation.
  void await_resume() const;

 private:
  bool suspend(std::coroutine_handle<> awaiting, TaskContext* context);
  static void fire(void* self) noexcept;  // the timer's callback, on the firing thread
  void cancel() noexcept;                 // the registration's callback, on the cancelling thread

  // state_: which of await_suspend (kSuspended: done arming), the timer
  // (kFired) and the cancellation (kCancelled) have come; see Sleep.cpp.
  static constexpr std::uint8_t kSuspended = 1;
  static constexpr std::uint8_t kFired = 2;
  static constexpr std::uint8_t kCancelled = 4;

  std::chrono::steady_clock::time_point deadline_;  // sleepUntil()
  std::chrono::steady_clock::duration delay_{};     // sleepFor(), if relative_
  bool relative_ = false;
  bool cancelled_ = false;  // the sleep ended by cancellation; written by whoever resumes the coroutine
  std::atomic<std::uint8_t> state_{0};
  // The timer of a scheduler with SleepTimers of its own; its hold is
  // dropped after registration_ is destroyed (C may fire it until then).
  struct ForeignTimer {
    SleepTimers* timers = nullptr;
    void* handle = nullptr;
    ForeignTimer() = default;
    ForeignTimer(const ForeignTimer&) = delete;
    ForeignTimer& operator=(const ForeignTimer&) = delete;
    ~ForeignTimer() {
      if (handle != nullptr) timers->release(handle);
    }
  };

  // Written by await_suspend before it sets kSuspended, read after it.
  ForeignTimer foreign_;  // or:
  TimerService* service_ = nullptr;
  std::uint32_t timerSlot_ = 0;  // the timer's TimerId
  std::uint32_t timerGeneration_ = 0;
  ResumePoint resumeAt_;       // where the coroutine resumes
  TaskCore* task_ = nullptr;   // the coroutine's task (see currentTask()); set before suspend()
  bool suspended_ = false;     // await_suspend returned true
  // Last, so destroyed first: its destructor waits for a cancel() running on
  // another thread, which may still read the fields above (see Sleep.cpp).
  std::optional<CancellationRegistration> registration_;
};

}  // namespace detail

template <class Rep, class Period>
detail::SleepAwaiter sleepFor(std::chrono::duration<Rep, Period> d) noexcept {
  return detail::SleepAwaiter(detail::saturatedDuration(d));
}

}  // namespace coexec
