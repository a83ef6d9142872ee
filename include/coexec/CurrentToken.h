// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <coroutine>
#include <stop_token>

#include "coexec/CancellationToken.h"
#include "coexec/Task.h"

namespace coexec {

namespace detail {
class CurrentTokenAwaiter;
class CurrentStopTokenAwaiter;
}  // namespace detail

/// `co_await currentToken()` returns the cancellation token of the pool task
/// the awaiting coroutine runs for: a coroutine submitted to a pool (or
/// executed), and every Task it awaits, however deep (a Task awaited by its
/// parent runs under the parent's token). It is the token that the task's
/// Future::cancel(), a token the task is linked to (submit(f, token)), the
/// cancellation of the task that submitted it, and its pool's shutdownNow()
/// cancel; and the one the task's sleeps and awaits observe
/// (docs/cancellation.md).
///
/// A coroutine task gets its token on first demand: the first
/// `co_await currentToken()` in it creates it (one small allocation from the
/// frame allocator, and the pool then tracks the task for shutdownNow()).
/// A cancellation requested before that is not lost: the new token is
/// cancelled at once.
///
/// Under a bare syncWait(), and in coroutines that are not coexec Tasks (or
/// that a non-Task coroutine awaits), there is no task: the token is a
/// default one, which is never cancelled (`canBeCancelled() == false`).
///
/// Never suspends and never blocks: the `co_await` completes at once, on the
/// awaiting thread. Safe as a temporary (`co_await currentToken()`) and named
/// (`auto t = currentToken(); co_await t;`), on every compiler: the awaiter
/// is a small object with a constructor, not a Future.
/// \throws std::bad_alloc (from the `co_await`) if the task's token cannot be
/// created.
///
/// Thread safety: the token returned may be copied to, and observed from,
/// any thread (see CancellationToken).
[[nodiscard]] detail::CurrentTokenAwaiter currentToken() noexcept;

/// `co_await currentStopToken()` returns a std::stop_token that follows the
/// token currentToken() returns: stop is requested on it when (and on the
/// thread where) the task's token is cancelled, or at once if it is already
/// (CancellationToken::stopToken()). For code that speaks std::stop_token:
/// `std::stop_callback`, `std::condition_variable_any::wait(lock, stop,
/// pred)`, a function written for std::jthread. Like currentToken(), the
/// first one in a coroutine task creates the task's token (the pool then
/// tracks the task for shutdownNow()); the first stop token of a task's
/// token allocates its std::stop_source.
///
/// Where currentToken() returns a default token (under a bare syncWait(), in
/// coroutines that are not coexec Tasks), it returns `std::stop_token{}`,
/// which is never stop-requested (`stop_possible() == false`).
///
/// Never suspends and never blocks: the `co_await` completes at once, on the
/// awaiting thread. Safe as a temporary (`co_await currentStopToken()`) and
/// named (`auto s = currentStopToken(); co_await s;`), on every compiler, as
/// currentToken() is.
/// \throws std::bad_alloc (from the `co_await`) if the task's token or its
/// stop source cannot be created.
///
/// Thread safety: the std::stop_token may be copied to, and observed from,
/// any thread.
[[nodiscard]] detail::CurrentStopTokenAwaiter currentStopToken() noexcept;

namespace detail {

/// The awaiter of currentToken(). It never suspends: await_suspend() reads the
/// awaiting coroutine's TaskContext and returns false.
class CurrentTokenAwaiter {
 public:
  CurrentTokenAwaiter() noexcept {}  // not an aggregate: see docs/coroutines.md (GCC 12)
  [[nodiscard]] bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> awaiting) noexcept {
    context_ = taskContextOf(awaiting);
    return false;
  }
  [[nodiscard]] CancellationToken await_resume() const {
    return context_ != nullptr ? context_->cancellationToken() : CancellationToken();
  }

 private:
  TaskContext* context_ = nullptr;
};

/// The awaiter of currentStopToken(): CurrentTokenAwaiter, returning the
/// token's stopToken().
class CurrentStopTokenAwaiter {
 public:
  CurrentStopTokenAwaiter() noexcept {}  // not an aggregate: see docs/coroutines.md (GCC 12)
  [[nodiscard]] bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> awaiting) noexcept {
    context_ = taskContextOf(awaiting);
    return false;
  }
  [[nodiscard]] std::stop_token await_resume() const {
    return context_ != nullptr ? context_->cancellationToken().stopToken() : std::stop_token();
  }

 private:
  TaskContext* context_ = nullptr;
};

}  // namespace detail

inline detail::CurrentTokenAwaiter currentToken() noexcept { return detail::CurrentTokenAwaiter(); }
inline detail::CurrentStopTokenAwaiter currentStopToken() noexcept { return detail::CurrentStopTokenAwaiter(); }

}  // namespace coexec
