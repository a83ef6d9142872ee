// SPDX-License-Identifier: BSL-1.0
#pragma once

// ThreadPoolExecutor::invokeAll() and invokeAny(): declared in
// ThreadPoolExecutor.h; defined here, and their contracts are below. Include
// this header (or <coexec/coexec.h>) in a file that calls them: without it, a
// call does not compile (the awaitable it returns is an incomplete type
// there).
//
// invokeAll(tasks):
//
// `co_await pool.invokeAll(tasks)`: runs every task of `tasks` on this
// pool and returns their results in input order, as a `std::vector<R>`
// (nothing for void tasks). `tasks` is a forward range of callables (as
// submit() takes them: returning R or Task<R>, or taking a
// CancellationToken) or of `Task<R>`; nothing happens at the call: the
// returned awaitable, when awaited, hands every task to admission at once
// (core -> queue -> extra thread -> policy) and suspends the awaiting
// coroutine until every task has settled. An lvalue range is read when
// awaited and must live until then; its callables are copied (the range
// stays as it was), its Tasks are taken over (left empty). An rvalue range
// is moved into the awaitable.
//
// Structured: it never returns or throws while a task it started still
// runs. The first task to fail makes the others be cancelled (queued ones
// never start; running ones have their token cancelled) and its exception
// is rethrown once all have settled. If the awaiting coroutine's task is
// cancelled while it waits (its Future's cancel(), shutdownNow() of its
// pool), every task is cancelled and OperationCancelled is thrown once
// they have settled. An empty range gives an empty vector at once.
//
// Never blocks a thread. The tasks run on this pool; the awaiting
// coroutine resumes where it was running (as after `co_await future`):
// inline on the thread that settles the last task if that thread belongs
// to its executor, otherwise posted there, never rejected. It may be
// awaited from any coroutine, on any executor or under syncWait().
// \throws RejectedExecution after shutdown(), whatever the rejection
// policy, with no task started (counted nowhere); and when admission
// refuses a task under abort() or block(): the tasks already started are
// cancelled and waited for first. Under a policy that settles a refused
// task instead (discard(), discardOldest()), that task fails with
// RejectedExecution like any failing task.
// \throws std::invalid_argument (empty callable or empty Task) or
// std::logic_error (a Task already started) before anything starts;
// std::bad_alloc. Cost: O(n); allocations: the tasks (recycled per thread,
// as for submit()), one array for their states and the result vector.
// \note `co_await pool.invokeAll(std::move(tasks))` (an rvalue range in the
// co_await expression) is accepted on every compiler, GCC 12 included: a
// moved range is destroyed once. A range built there from a lambda
// temporary (`std::vector<F>(n, [s] {...})`) is not safe on GCC 12:
// build it first (docs/combinators.md, "The safe forms on GCC 12").
//
// invokeAll(tasks, timeout):
//
// As invokeAll(tasks), with a deadline of `timeout` from the await on this
// pool's clock(): at the deadline the unfinished tasks are cancelled, and
// TimeoutError is thrown once every one of them has settled (a task that
// ignores its token delays the error until it returns; if every task has
// succeeded by then, the results are returned). A zero or negative
// timeout starts nothing and throws TimeoutError at once.
//
// invokeAny(tasks):
//
// `co_await pool.invokeAny(tasks)`: runs every task of `tasks` (as
// invokeAll() takes them) on this pool and returns the result of the first
// one to succeed; the others are cancelled, and it returns once they have
// settled. When every task fails it throws AllFailed, whose errors() holds
// each task's exception in input order. If the awaiting coroutine's task
// is cancelled while it waits: OperationCancelled, once all have settled.
// Never blocks a thread; where things run: as invokeAll().
// \throws std::invalid_argument if `tasks` is empty; otherwise as
// invokeAll() (RejectedExecution, with nothing started after shutdown).
//
// invokeAny(tasks, timeout):
//
// As invokeAny(tasks), with a deadline of `timeout` from the await on this
// pool's clock(): if no task has succeeded by then, the others are
// cancelled and TimeoutError is thrown once they have settled. A zero or
// negative timeout starts nothing and throws TimeoutError at once.

#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/CombinatorAccess.h"
#include "coexec/detail/InvokeAllImpl.h"
