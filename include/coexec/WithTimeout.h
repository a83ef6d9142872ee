// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "coexec/CancellationToken.h"
#include "coexec/Errors.h"
#include "coexec/Export.h"
#include "coexec/Future.h"
#include "coexec/Task.h"
#include "coexec/detail/CoroutineTask.h"
#include "coexec/detail/Diagnostics.h"
#include "coexec/detail/OwningCallableFuture.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/ResultCore.h"
#include "coexec/detail/ResumePoint.h"
#include "coexec/detail/RunSegments.h"
#include "coexec/detail/Scheduler.h"
#include "coexec/detail/Time.h"

namespace coexec {

namespace detail {
template <class T>
class TaskTimeout;
template <class R, bool Owning, bool Refused = false>
class FutureTimeout;
}  // namespace detail

/// `co_await timed` for `auto timed = withTimeout(std::move(task), d);`: runs
/// `task` and returns its value, or throws TimeoutError if it has not
/// finished `d` after the `co_await` (Kotlin's `withTimeout`, Python's
/// `asyncio.timeout`). Takes the Task over (pass a temporary or
/// `std::move(task)`; a named Task is refused at compile time).
///
/// What happens:
/// - At the `co_await`, the deadline is now + `d` on the clock of the
///   awaiting coroutine's scheduler: the pool's clock on a pool thread (a
///   ManualClock pool's timeouts fire inside ManualClock::advance()), the
///   steady clock elsewhere (syncWait(), a plain thread). Then `task` starts
///   at once on the awaiting thread, as `co_await task` would, but as a task
///   of its own: it has its own token (`co_await currentToken()` inside it
///   returns it), which is linked to the awaiting task's (cancelling the
///   awaiting task cancels `task`; the timeout cancels `task` alone).
/// - If `task` finishes first, the `co_await` returns its value or rethrows
///   its exception as is.
/// - At the deadline, `task` is cancelled (as Future::cancel() cancels a
///   running task: its token is cancelled, its sleeps and awaits end with
///   OperationCancelled, the work it submitted is cancelled), and once it
///   has settled the `co_await` throws TimeoutError. Structured: the
///   awaiting coroutine never goes on while `task` still runs, so `task` may
///   use the caller's locals. A task that ignores its token delays the
///   TimeoutError until it returns.
/// - A `d` of zero or less: `task` never starts; TimeoutError. A `d` too
///   large for the clock: no deadline.
/// - If the awaiting task is cancelled meanwhile, `task` is cancelled with
///   it and the `co_await` rethrows what `task` settled with (usually
///   OperationCancelled), not TimeoutError.
///
/// Never blocks a thread. The coroutine resumes where it was running (posted
/// to its pool, or syncWait()'s loop, as after a Future); the deadline's
/// cancellation runs on the timer's thread (the pool's timer thread, the
/// process-wide steady timer thread, or the thread in ManualClock::advance()),
/// like any token callback. The result object must be awaited at most once
/// and must outlive the `co_await` (a named object, or a temporary in the
/// `co_await` expression itself).
/// \throws std::invalid_argument (a std::logic_error) if `task` is empty;
/// std::logic_error if it was already started (both from withTimeout()
/// itself). From the `co_await`: TimeoutError; what `task` throws;
/// std::logic_error if the result is awaited a second time; std::bad_alloc;
/// std::system_error if the timer thread cannot start.
///
/// Thread safety: the result (neither copyable nor movable) is for the one coroutine
/// that awaits it; the deadline, the work's settlement and the caller's
/// cancellation meet inside it without locks (src/coro/WithTimeout.cpp).
template <class T, class Rep, class Period>
[[nodiscard]] detail::TaskTimeout<T> withTimeout(Task<T>&& task, std::chrono::duration<Rep, Period> timeout);

/// Refused at compile time: withTimeout takes the Task over; move a named
/// Task in: `withTimeout(std::move(task), d)`.
template <class T, class Rep, class Period>
detail::TaskTimeout<T> withTimeout(Task<T>& task, std::chrono::duration<Rep, Period> timeout);

/// `co_await timed` for `auto timed = withTimeout(future, d);`: waits for the
/// Future's task and returns its value (consuming the result, as
/// `co_await future` does), or throws TimeoutError if it has not settled `d`
/// after the `co_await`. Borrows `future`, which must outlive the
/// `co_await`. The deadline and the clock are as for a Task; at the
/// deadline the task is cancelled as by `future.cancel()` (queued: it never
/// runs; running or suspended: its token is cancelled), and TimeoutError is
/// thrown once it has settled (a task that ignores its token delays it). A
/// task that had already finished gives its value, or its exception as is.
/// If the awaiting coroutine's task is cancelled meanwhile, the Future's
/// task is cancelled too (whatever submitted it), and the `co_await`
/// rethrows what it settled with. Never blocks a thread; resumes as above.
/// \throws std::logic_error (from the `co_await`) if `future` is empty or
/// already consumed; otherwise as for a Task.
template <class R, class Rep, class Period>
[[nodiscard]] detail::FutureTimeout<R, false> withTimeout(Future<R>& future,
                                                          std::chrono::duration<Rep, Period> timeout);

/// As the form above, but takes the Future over (the result object owns
/// it): `co_await withTimeout(pool.submit([&] {...}), d)`, or
/// `withTimeout(std::move(f), d)`. Accepted on every compiler.
template <class R, class Rep, class Period>
[[nodiscard]] detail::FutureTimeout<R, true> withTimeout(Future<R>&& future,
                                                         std::chrono::duration<Rep, Period> timeout);

/// As the form above, for the Future of a submission that took over a
/// callable temporary with a destructor (`pool.submit([s] {...})`, see
/// detail/OwningCallableFuture.h). On GCC 12 and older, awaiting the result
/// as a temporary, `co_await withTimeout(pool.submit([s] {...}), d)`, is
/// refused at compile time, like `co_await pool.submit([s] {...})` (GCC 12
/// destroys the lambda's captures twice there): name the result first,
/// `auto timed = withTimeout(pool.submit([s] {...}), d); co_await timed;`,
/// which builds everywhere (docs/coroutines.md, "GCC 12 bugs and the safe
/// forms").
template <class Base, class Rep, class Period>
[[nodiscard]] auto withTimeout(detail::OwningCallableFuture<Base>&& future, std::chrono::duration<Rep, Period> timeout);

namespace detail {

/// The protocol of a withTimeout await, shared by its forms: three parties,
/// each once, each setting its own bit of one atomic word (see
/// src/coro/WithTimeout.cpp): await_suspend (S) once it has armed
/// everything, the awaited work's settlement (D, its continuation), and the
/// timer (T), which cancels the work and never resumes by itself unless it
/// comes last. The coroutine resumes once D has come and T has either come
/// or been removed: never while the work still runs, never while the timer
/// still refers to this object.
///
/// Thread safety: for one await; the parties synchronise through the word.
class COEXEC_EXPORT TimeoutState {
 public:
  explicit TimeoutState(std::chrono::steady_clock::duration timeout) noexcept : timeout_(timeout) {}
  TimeoutState(const TimeoutState&) = delete;
  TimeoutState& operator=(const TimeoutState&) = delete;
  ~TimeoutState();

  /// S, in await_suspend. `work` is the awaited task, kept alive by the
  /// caller until after resumed(). `start`: `work` is a new coroutine task
  /// (withTimeout(task)) to link to the awaiting task as its child and to
  /// start here; otherwise a Future's task, which a registration on the
  /// awaiting task's token cancels (unless it is that task's child already).
  /// Returns false to go on without suspending. \throws std::bad_alloc,
  /// std::system_error (not suspended; a `work` to start is cancelled).
  bool suspend(std::coroutine_handle<> awaiting, TaskContext* context, TaskCore& work, bool start);
  /// In await_resume: restores the current task, releases the cancellation
  /// link, and returns true if the deadline cancelled the work.
  bool resumed() noexcept;
  [[nodiscard]] std::chrono::steady_clock::duration timeout() const noexcept { return timeout_; }

 private:
  static void onWorkDone(void* self) noexcept;  // D
  static void onTimer(void* self) noexcept;     // T
  void resumeAwaiting() noexcept;

  static constexpr std::uint8_t kSuspended = 1;
  static constexpr std::uint8_t kDone = 2;
  static constexpr std::uint8_t kFired = 4;  // T has come (or there is no timer)

  const std::chrono::steady_clock::duration timeout_;
  std::atomic<std::uint8_t> state_{0};
  bool timedOut_ = false;   // T (or S, for a deadline already past) cancelled the unfinished work
  bool suspended_ = false;  // await_suspend returned true
  // Written by S before it sets kSuspended (work_ before the timer is armed).
  TaskCore* work_ = nullptr;
  TaskCore* task_ = nullptr;  // the awaiting coroutine's task (see currentTask())
  ResumePoint resumeAt_;  // where the awaiting coroutine resumes
  TimerService* service_ = nullptr;
  std::uint32_t timerSlot_ = 0;
  std::uint32_t timerGeneration_ = 0;
  // Last, so destroyed first: its destructor waits for a callback running on
  // another thread (which only cancels the work).
  std::optional<CancellationRegistration> registration_;
};

/// Throws the TimeoutError of a withTimeout whose deadline cancelled the work.
[[noreturn]] COEXEC_EXPORT void throwWithTimeoutError(std::chrono::steady_clock::duration timeout);

/// The result of `core` after a withTimeout await: its value, its exception
/// as is, or TimeoutError if the deadline cancelled it.
template <class R>
R takeTimedResult(ResultCore<R>& core, bool timedOut, std::chrono::steady_clock::duration timeout) {
  if (!timedOut) return core.takeResult();
  try {
    return core.takeResult();
  } catch (const OperationCancelled&) {
    throwWithTimeoutError(timeout);
  }
}

/// Reaches a Future's state (for withTimeout).
struct FutureAccess {
  template <class R>
  static ResultCore<R>& core(const Future<R>& future) {
    return future.core();
  }
};

/// The awaiter of TaskTimeout and FutureTimeout: it refers to the result
/// object, which provides suspend(awaiting, context) and resume() and
/// befriends this class.
template <class Self>
class TimeoutAwaiter {
 public:
  explicit TimeoutAwaiter(Self& self) noexcept : self_(&self) {}
  [[nodiscard]] bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> awaiting) {
    TaskContext* const context = taskContextOf(awaiting);
    task_ = taskOf(context);
    return suspendingSegment(task_, [&] { return self_->suspend(awaiting, context); });
  }
  decltype(auto) await_resume() {
    segmentGoesOn(task_);  // in a new run segment (RunSegments.h)
    return self_->resume();
  }

 private:
  Self* self_;
  TaskCore* task_ = nullptr;  // the awaiting coroutine's task, once await_suspend ran
};

/// The result of withTimeout(task, d): awaitable once.
template <class T>
class [[nodiscard]] TaskTimeout {
 public:
  TaskTimeout(Task<T>&& task, std::chrono::steady_clock::duration timeout) : task_(std::move(task)), state_(timeout) {}
  TaskTimeout(const TaskTimeout&) = delete;
  TaskTimeout& operator=(const TaskTimeout&) = delete;

  using Awaiter = TimeoutAwaiter<TaskTimeout>;

  /// See withTimeout(). The temporary form is safe on every compiler: the
  /// result object has constructors and no lambda is built in the
  /// expression by coexec.
  Awaiter operator co_await() & noexcept { return Awaiter(*this); }
  Awaiter operator co_await() && noexcept { return Awaiter(*this); }

 private:
  friend class TimeoutAwaiter<TaskTimeout>;
  bool suspend(std::coroutine_handle<> awaiting, TaskContext* context) {
    if (core_) throw std::logic_error("coexec::withTimeout: the result of withTimeout() can be awaited only once");
    // The task gets a state of its own (its token, its result): one
    // allocation, from the frame allocator.
    core_ = Ref<ResultCore<T>>::adopt(new CoroutineTask<T, Task<T>>(std::move(task_), /*hasFuture=*/true, 0));
    return state_.suspend(awaiting, context, *core_, /*start=*/true);
  }
  T resume() { return takeTimedResult<T>(*core_, state_.resumed(), state_.timeout()); }

  Task<T> task_;
  Ref<ResultCore<T>> core_;
  TimeoutState state_;
};

/// The result of withTimeout(future, d): awaitable once. Owning: it holds
/// the Future (taken over); otherwise it borrows it. Refused: the Future came
/// from a submission of a callable temporary with a destructor, so that on
/// GCC 12 the result may be awaited only by name.
template <class R, bool Owning, bool Refused>
class [[nodiscard]] FutureTimeout {
  static_assert(Owning || !Refused, "coexec: a borrowed Future is never refused");

 public:
  using Holder = std::conditional_t<Owning, Future<R>, Future<R>&>;
  FutureTimeout(Holder future, std::chrono::steady_clock::duration timeout)
      : future_(std::forward<Holder>(future)), state_(timeout) {}
  FutureTimeout(const FutureTimeout&) = delete;
  FutureTimeout& operator=(const FutureTimeout&) = delete;

  using Awaiter = TimeoutAwaiter<FutureTimeout>;

  Awaiter operator co_await() & noexcept { return Awaiter(*this); }
#if COEXEC_GCC_CO_AWAIT_TEMPORARY_BUG
  /// On GCC 12 and older, refused for a result that owns the Future of a
  /// submission of a callable temporary with a destructor
  /// (`pool.submit([s] {...})`, whose captures GCC 12 destroys twice in a
  /// co_await expression).
  template <class Self = FutureTimeout>
  Awaiter operator co_await() && noexcept {
    static_assert(!Refused || kAlwaysFalse<Self>,
                  "coexec: GCC 12 miscompiles temporaries in a co_await expression; name the withTimeout first: "
                  "auto timed = withTimeout(pool.submit(...), d); co_await timed;  (see docs/coroutines.md, "
                  "\"GCC 12 bugs and the safe forms\")");
    return Awaiter(*this);
  }
#else
  Awaiter operator co_await() && noexcept { return Awaiter(*this); }
#endif

 private:
  friend class TimeoutAwaiter<FutureTimeout>;
  bool suspend(std::coroutine_handle<> awaiting, TaskContext* context) {
    if (awaited_) throw std::logic_error("coexec::withTimeout: the result of withTimeout() can be awaited only once");
    awaited_ = true;
    if (!future_.valid()) {
      throw std::logic_error("coexec::withTimeout: awaiting an empty Future (default-constructed or moved from)");
    }
    return state_.suspend(awaiting, context, FutureAccess::core(future_), /*start=*/false);
  }
  R resume() { return takeTimedResult<R>(FutureAccess::core(future_), state_.resumed(), state_.timeout()); }

  Holder future_;
  bool awaited_ = false;
  TimeoutState state_;
};

}  // namespace detail

template <class T, class Rep, class Period>
detail::TaskTimeout<T> withTimeout(Task<T>&& task, std::chrono::duration<Rep, Period> timeout) {
  (void)detail::startableHandle(task, "", "withTimeout");
  return detail::TaskTimeout<T>(std::move(task), detail::saturatedDuration(timeout));
}

template <class T, class Rep, class Period>
detail::TaskTimeout<T> withTimeout(Task<T>& task, std::chrono::duration<Rep, Period> timeout) {
  static_assert(detail::kAlwaysFalse<T>,
                "coexec: withTimeout takes the Task over; a named Task must be moved in: "
                "withTimeout(std::move(task), d)");
  (void)task;
  (void)timeout;
  std::terminate();
}

template <class R, class Rep, class Period>
detail::FutureTimeout<R, false> withTimeout(Future<R>& future, std::chrono::duration<Rep, Period> timeout) {
  return detail::FutureTimeout<R, false>(future, detail::saturatedDuration(timeout));
}

template <class R, class Rep, class Period>
detail::FutureTimeout<R, true> withTimeout(Future<R>&& future, std::chrono::duration<Rep, Period> timeout) {
  return detail::FutureTimeout<R, true>(std::move(future), detail::saturatedDuration(timeout));
}

template <class Base, class Rep, class Period>
auto withTimeout(detail::OwningCallableFuture<Base>&& future, std::chrono::duration<Rep, Period> timeout) {
  using R = typename detail::FutureTraits<Base>::Result;
  return detail::FutureTimeout<R, true, true>(std::move(future), detail::saturatedDuration(timeout));
}

}  // namespace coexec
