// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <concepts>
#include <exception>
#include <stdexcept>
#include <type_traits>
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

template <class T>
inline constexpr bool kIsTaskObject = false;
template <class T>
inline constexpr bool kIsTaskObject<Task<T>> = true;

/// `A` (a reference type: A& for an lvalue, A&& for an rvalue) has a member
/// or non-member `operator co_await` for that value category, or is an
/// awaiter itself. Only overload resolution looks at the operators: a
/// refused overload (OwningCallableFuture's rvalue `co_await` on GCC 12) is
/// not instantiated by asking about the lvalue form.
template <class A>
concept HasMemberCoAwait = requires(A&& a) { static_cast<A&&>(a).operator co_await(); };
template <class A>
concept HasFreeCoAwait = requires(A&& a) { operator co_await(static_cast<A&&>(a)); };
template <class A>
concept IsAwaiter = requires(std::remove_reference_t<A>& a) {
  { a.await_ready() } -> std::convertible_to<bool>;
  a.await_resume();
};
template <class A>
concept AwaitableAs = HasMemberCoAwait<A> || HasFreeCoAwait<A> || IsAwaiter<A>;

/// The awaiter `co_await a` uses, for a value of the reference type `A`.
template <class A>
decltype(auto) awaiterOf(A&& a) {
  if constexpr (HasMemberCoAwait<A&&>) {
    return static_cast<A&&>(a).operator co_await();
  } else if constexpr (HasFreeCoAwait<A&&>) {
    return operator co_await(static_cast<A&&>(a));
  } else {
    return static_cast<A&&>(a);
  }
}

/// What `co_await a` gives for a value of the reference type `A`, as a Task
/// result type: T, T& or void (a T&& or const T result is returned as a T).
template <class A>
using AwaitResult = decltype(std::declval<std::remove_reference_t<decltype(awaiterOf(std::declval<A>()))>&>()
                                 .await_resume());
template <class A>
using SyncWaitResult = std::conditional_t<std::is_lvalue_reference_v<AwaitResult<A>>, AwaitResult<A>,
                                          std::remove_cvref_t<AwaitResult<A>>>;

/// The coroutine syncWait(awaitable) runs: awaits `awaitable` (which lives
/// for the whole syncWait() call) as an lvalue or, if `kRvalue`, as an
/// rvalue, and returns what that gives.
template <class R, bool kRvalue, class A>
Task<R> awaitForSyncWait(A& awaitable) {
  if constexpr (kRvalue) {
    co_return co_await std::move(awaitable);
  } else {
    co_return co_await awaitable;
  }
}

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

/// Blocks the calling thread until `awaitable` has finished: awaits it as
/// `co_await awaitable` would in a coroutine, and returns what that gives (a
/// value, a reference, or nothing), or rethrows its exception: `auto v =
/// syncWait(pool.invokeAll(tasks));`. Takes
/// any awaitable but a Task (which has the overloads above): a Future (named
/// or moved in) or ScheduledFuture, a PeriodicHandle, the awaitables of
/// invokeAll / invokeAny / whenAll / whenAny / withTimeout,
/// `TaskGroup::join()`, `asCompleted(...).next()`, `sleepFor(d)`, and any
/// user type with `operator co_await` or `await_ready` / `await_suspend` /
/// `await_resume`. It runs a small coroutine that awaits it, as syncWait of
/// a Task does: continuations resume on the calling thread's run loop, and
/// the awaitable runs its work where it normally does (the pool's threads).
///
/// `awaitable` is awaited where it is, never copied or moved: as an lvalue
/// when it can be (a named one, and also a temporary whose type has an
/// lvalue `co_await`: it lives until syncWait returns, so a temporary
/// Future of `pool.submit([s = std::string(...)] {...})` is accepted on
/// every compiler and destroyed once), else as an rvalue (an awaitable whose
/// `operator co_await` takes only rvalues). A result returned by reference
/// refers to what the awaitable refers to (a Future<int&>'s int); a `T&&`
/// result is returned as a `T`. Awaiting a named awaitable consumes it as
/// `co_await` does (a Future's result is taken; an awaitable that can be
/// awaited once throws the second time).
/// \throws std::logic_error if the calling thread is a thread of a coexec
/// pool (blocking a pool thread can deadlock the pool: `co_await` it
/// instead); what `co_await awaitable` throws; std::bad_alloc. A type that
/// is not awaitable is a compile-time error that says so.
template <class A>
requires(!detail::kIsTaskObject<std::remove_cvref_t<A>>)
decltype(auto) syncWait(A&& awaitable) {
  constexpr bool kLvalue = detail::AwaitableAs<A&>;
  static_assert(kLvalue || detail::AwaitableAs<A&&>,
                "coexec: syncWait takes a Task or an awaitable: a type with operator co_await, or with "
                "await_ready / await_suspend / await_resume (one whose co_await takes only rvalues is passed as a "
                "temporary or moved in: syncWait(std::move(x)))");
  if constexpr (kLvalue) {
    using R = detail::SyncWaitResult<A&>;
    return syncWait(detail::awaitForSyncWait<R, false>(awaitable));
  } else if constexpr (detail::AwaitableAs<A&&>) {
    using R = detail::SyncWaitResult<A&&>;
    return syncWait(detail::awaitForSyncWait<R, true>(awaitable));
  }
}

}  // namespace coexec
