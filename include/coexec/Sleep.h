#pragma once

#include <chrono>
#include <coroutine>

#include "coexec/Export.h"
#include "coexec/detail/Scheduler.h"
#include "coexec/detail/Time.h"

namespace coexec {

namespace detail {
class SleepAwaiter;
}

/// `co_await sleepFor(d)` suspends the awaiting coroutine for at least `d`
/// without holding a thread, then resumes it where it was running: on the
/// pool whose thread it was on (as a continuation: never rejected, also
/// after shutdown), or, under syncWait(), on the syncWait() thread.
///
/// Never blocks a thread. A zero or negative `d` does not suspend; a `d` too
/// large for the steady clock saturates (the coroutine then sleeps for as
/// long as the program runs). The deadline is taken when sleepFor() is
/// called. In this release every sleep, on a pool too, waits in the
/// process-wide steady-clock timer service (one thread, started by the first
/// sleep, asleep while no timer is due), and a sleep is not interrupted by
/// cancellation: a cancelled coroutine sees its token when it wakes.
/// \throws std::bad_alloc (from the `co_await`) if the timer cannot be
/// recorded, and std::system_error if the timer thread cannot start; the
/// coroutine then goes on at once, with the exception.
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

/// `co_await sleepUntil(t)` suspends the awaiting coroutine until the steady
/// clock reaches `t`, as sleepFor() does. A `t` that has passed when the
/// coroutine awaits does not suspend.
[[nodiscard]] COEXEC_EXPORT detail::SleepAwaiter sleepUntil(std::chrono::steady_clock::time_point t) noexcept;

namespace detail {

/// The awaiter of sleepFor() and sleepUntil(). Safe to await as a temporary
/// (`co_await sleepFor(d)`) or named; awaited once.
class COEXEC_EXPORT SleepAwaiter {
 public:
  explicit SleepAwaiter(std::chrono::steady_clock::time_point deadline) noexcept : deadline_(deadline) {}
  [[nodiscard]] bool await_ready() const noexcept { return deadline_ <= std::chrono::steady_clock::now(); }
  bool await_suspend(std::coroutine_handle<> awaiting);
  void await_resume() const noexcept {}

 private:
  static void fire(void* self) noexcept;  // on the timer thread

  std::chrono::steady_clock::time_point deadline_;
  Scheduler* scheduler_ = nullptr;  // where to resume; recorded by await_suspend
  bool retained_ = false;           // scheduler_->retain() succeeded
  std::coroutine_handle<> awaiting_;
};

}  // namespace detail

template <class Rep, class Period>
detail::SleepAwaiter sleepFor(std::chrono::duration<Rep, Period> d) noexcept {
  return detail::SleepAwaiter(detail::deadlineAfter(d));
}

}  // namespace coexec
