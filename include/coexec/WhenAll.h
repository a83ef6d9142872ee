// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <utility>

#include "coexec/Future.h"
#include "coexec/Task.h"
#include "coexec/detail/WhenAwaitable.h"

namespace coexec {

/// `co_await whenAll(a, b, ...)`: waits for a fixed set of heterogeneous
/// children and returns their values as a `std::tuple`, in argument order
/// (`std::monostate` for a void child).
///
/// Each argument is a `Future<R>` or a `Task<R>`:
/// - a named Future (an lvalue) is watched where it runs (on its pool); its
///   result is consumed by whenAll (do not await or get() it too). A Future
///   rvalue is moved in (on GCC 12, the Future temporary of an owning
///   callable only into a named awaitable; see below).
/// - a Task (a temporary, or `std::move(task)`) is run by whenAll itself,
///   inline: when the awaitable is awaited, each Task starts on the awaiting
///   thread, one after another, and runs there until it first suspends; it
///   goes on wherever it resumes (after `co_await future`, on the executor it
///   was running on: the awaiting coroutine's). Tasks therefore overlap only
///   while they are suspended: for parallel CPU work, submit the work to a
///   pool and pass the Futures. A Task runs under a cancellation token of
///   whenAll's own (its sleeps, and the combinators it awaits, see it).
///
/// Nothing happens at the call; everything happens when the result is
/// awaited (once). Structured: it never returns or throws while a child
/// still runs. The first child to fail makes the others be cancelled (the
/// Futures through Future::cancel(), the Tasks through their token; Tasks not
/// started yet never start) and its exception is rethrown once all have
/// settled. If the awaiting coroutine's task is cancelled while it waits, the
/// children are cancelled and OperationCancelled is thrown once they have
/// settled; if it is cancelled already when whenAll is awaited, no Task
/// starts, and the Futures (whose tasks run already) are cancelled and waited
/// for the same way.
///
/// Never blocks a thread. The awaiting coroutine resumes where it was
/// running (inline on the thread that settles the last child if it belongs
/// to that executor, else posted there). Works under syncWait() and on any
/// executor.
/// \throws what the first failing child threw; OperationCancelled as above;
/// std::logic_error (a Future argument empty; the awaitable awaited twice)
/// and std::invalid_argument / std::logic_error (a Task empty or already
/// started) before anything is touched. Allocates nothing but a token for
/// the Tasks (one, if there is a Task).
/// \note Thread safety: the Futures must not be awaited, waited on or taken
/// by anyone else meanwhile.
/// \note On GCC 12, `co_await whenAll(pool.submit([s] {...}), ...)` (the
/// Future temporary of a callable that is not trivially destructible, such
/// as a lambda whose capture owns memory, in the co_await expression) does
/// not compile, as for `co_await pool.submit([s] {...})`: name the Futures
/// first, or the awaitable (`auto both = whenAll(pool.submit([s] {...}),
/// ...); co_await both;`). Future temporaries of `[&]` and capture-less
/// lambdas are accepted everywhere. See docs/combinators.md.
template <class... Args>
[[nodiscard]] detail::WhenAwaitable<false, detail::ChildOf<Args>...> whenAll(Args&&... args) {
  return detail::WhenAwaitable<false, detail::ChildOf<Args>...>(std::forward<Args>(args)...);
}

}  // namespace coexec
