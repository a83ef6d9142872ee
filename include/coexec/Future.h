// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <coroutine>
#include <cstdint>
#include <stdexcept>
#include <utility>

#include "coexec/Errors.h"
#include "coexec/Task.h"
#include "coexec/detail/Diagnostics.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/ResultCore.h"
#include "coexec/detail/ResumePoint.h"
#include "coexec/detail/RunSegments.h"
#include "coexec/detail/Scheduler.h"
#include "coexec/detail/StandardLibrary.h"
#include "coexec/detail/Time.h"

/// 1 on compilers that destroy the members of an aggregate temporary (a
/// lambda's captures) created inside a co_await expression twice (GCC 12 and
/// older): there, the forms that would hand such a temporary to coexec inside
/// a co_await expression are refused at compile time
/// (detail/OwningCallableFuture.h).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ <= 12
#define COEXEC_GCC_CO_AWAIT_TEMPORARY_BUG 1
#else
#define COEXEC_GCC_CO_AWAIT_TEMPORARY_BUG 0
#endif

namespace coexec {

namespace detail {
template <class R>
class FutureAwaiter;
struct FutureAccess;
/// Throws std::logic_error if the calling thread belongs to the pool that owns
/// `core` and the task has not finished: a blocking wait there can deadlock.
COEXEC_EXPORT void checkBlockingWaitAllowed(const TaskCore& core, const char* operation);
/// Called by a coroutine about to suspend on the Future of `task`, which is
/// joinable (fork/join work: the caller checks `task.joinable()`, so that the
/// common case costs one load and no call): if the calling thread works for
/// the executor that admitted it, and no thread has started it, that
/// executor runs it here, now, to its end or its first suspension
/// (ForkJoinPool's join), unless the thread's stack is too deep for it.
/// Defined by the runtime, which hands the task to the thread's Joiner.
/// Never throws.
COEXEC_EXPORT void joinInline(TaskCore& task) noexcept;
}  // namespace detail

/// The result side of a task already handed to a pool (eager, like Java's
/// Future): wait for it, take its value, or cancel it.
///
/// `co_await future` suspends the awaiting coroutine without blocking a thread
/// and resumes it where it was running (see docs/coroutines.md): inline when
/// the task completes on a thread of that same executor, else posted to it.
///
/// The result is consumed once, by `get()`, by a `get(timeout)` that returns,
/// or by `co_await`;
/// a second consumption throws std::logic_error (like std::future). `wait`,
/// `waitFor`, `isDone`, `isCancelled` and `cancel` may be called any number of
/// times.
///
/// Thread safety: a Future is a move-only handle for one consumer. `cancel()`,
/// `isDone()` and `isCancelled()` may race with the task completing on a pool
/// thread; two threads must not consume the same Future.
template <class R>
class [[nodiscard]] Future {
 public:
  /// An empty Future (`valid() == false`).
  Future() noexcept = default;
  /// Takes over `other`'s task; `other` is left empty (`valid() == false`).
  /// Never blocks.
  Future(Future&&) noexcept = default;
  /// Drops this Future's task, as the destructor does (it goes on running),
  /// then takes over `other`'s; `other` is left empty. Never blocks.
  Future& operator=(Future&&) noexcept = default;
  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;
  /// Never blocks; the task goes on running (use `cancel()` to stop it).
  ~Future() = default;

  /// Blocks until the task settles, then returns its value or rethrows its
  /// exception: the task's own, OperationCancelled, RejectedExecution (the
  /// task was discarded or refused after shutdown) or BrokenPromise (the task
  /// was dropped unrun).
  /// \throws std::logic_error if the Future is empty or already consumed, or
  /// if called from a thread of the pool that runs the task while the task has
  /// not finished (that can deadlock: `co_await` the Future instead).
  R get() {
    wait();
    return core().takeResult();
  }

  /// Suspends the awaiting coroutine until the task settles (never blocks a
  /// thread), then returns its value or rethrows, like get(). The coroutine
  /// resumes on the executor it was running on when it suspended: inline if
  /// the task completes on a thread of that executor (or if it had none),
  /// otherwise posted to it, never rejected; posted also when the task
  /// settles inside a cancel() or the drop of an unrun task. A pool the
  /// coroutine will resume on cannot terminate meanwhile, whatever type the
  /// coroutine is. After the `co_await`, read the thread's identity with
  /// coexec::thisThreadId(), not std::this_thread::get_id() (clang at -O1 and
  /// above may reuse a read from before the suspension).
  /// \throws std::logic_error if the Future is empty or already consumed, or
  /// if another coroutine or combinator awaits it already (a Future has one
  /// awaiter).
  detail::FutureAwaiter<R> operator co_await() & { return detail::FutureAwaiter<R>(core_); }
  /// As the lvalue overload, for a Future temporary (`co_await
  /// pool.submit([&] {...})`) or `co_await std::move(f)`: the temporary lives
  /// to the end of the full expression, which outlasts the awaiter. On GCC
  /// 12, a submission that took over a callable temporary with a destructor
  /// returns a type derived from Future whose rvalue `co_await` is refused at
  /// compile time instead (see detail/OwningCallableFuture.h and
  /// docs/coroutines.md, "GCC 12 bugs and the safe forms").
  detail::FutureAwaiter<R> operator co_await() && { return detail::FutureAwaiter<R>(core_); }

  /// Blocks until the task settles or `timeout` passes. Unlike get(), it is
  /// not refused on a thread of the pool that runs the task: the wait is
  /// bounded (it times out there if the task needs that thread).
  /// \throws TimeoutError if it did not settle in time (the result is then
  /// not consumed); otherwise as `get()` (an empty or consumed Future, the
  /// task's exception).
  template <class Rep, class Period>
  R get(std::chrono::duration<Rep, Period> timeout) {
    if (!waitFor(timeout)) throw TimeoutError("Future::get(timeout): the task did not finish within the timeout");
    return core().takeResult();
  }

  /// Blocks until the task settles. \throws std::logic_error if empty, or if
  /// called from a thread of the pool that runs the unfinished task.
  void wait() const {
    detail::checkBlockingWaitAllowed(core(), "Future::wait/get");
    core().wait();
  }

  /// Blocks until the task settles or `timeout` passes; true if it settled.
  /// A zero or negative timeout polls. \throws std::logic_error if empty.
  template <class Rep, class Period>
  bool waitFor(std::chrono::duration<Rep, Period> timeout) const {
    return core().waitUntil(detail::deadlineAfter(timeout));
  }

  /// Requests cancellation. Never blocks (cancellation callbacks registered on
  /// the task's token run on this thread). A queued task never runs and the
  /// Future settles at once with OperationCancelled; a running task has its
  /// token cancelled and the Future settles with OperationCancelled when the
  /// callable returns (its value is discarded). A coroutine task sleeping in
  /// sleepFor() (or in a Task it awaits) wakes at once with OperationCancelled;
  /// one awaiting a Future has that Future's task cancelled too, and goes on
  /// once it has settled. The work the task submitted while it ran (its
  /// children, on any pool) is cancelled the same way, on this thread, depth
  /// first; the task that submitted this one is not (docs/cancellation.md).
  /// A coroutine awaiting this Future never goes on inside this call: it is
  /// posted to its own scheduler (resumed here only if it has none), so a
  /// caller may cancel while holding a lock the awaiter takes.
  /// Returns false if the task had already settled.
  /// \throws std::logic_error if empty.
  bool cancel() { return core().requestCancel(); }

  /// True once the task has settled (value, exception, cancellation). Never blocks.
  [[nodiscard]] bool isDone() const { return core().isDone(); }
  /// True once `cancel()` returned true. (shutdownNow() only cancels a running
  /// task's token: the Future then reports whatever the task does.)
  [[nodiscard]] bool isCancelled() const { return core().isCancelled(); }
  /// False for a default-constructed or moved-from Future.
  [[nodiscard]] bool valid() const noexcept { return static_cast<bool>(core_); }

 private:
  friend class ThreadPoolExecutor;
  friend struct detail::FutureAccess;
  explicit Future(detail::Ref<detail::ResultCore<R>> core) noexcept : core_(std::move(core)) {}

  detail::ResultCore<R>& core() const {
    if (!core_) throw std::logic_error("coexec::Future: this Future is empty (default-constructed or moved from)");
    return *core_;
  }

  detail::Ref<detail::ResultCore<R>> core_;
};

namespace detail {

template <class R>
class FutureAwaiter {
 public:
  // Borrows the Future's state: the awaited Future outlives its awaiter (an
  // lvalue, or a temporary that lives to the end of the full expression).
  explicit FutureAwaiter(const Ref<ResultCore<R>>& core) : core_(core.get()) {
    if (!core_) throw std::logic_error("coexec::Future: awaiting an empty Future (default-constructed or moved from)");
  }
  bool await_ready() const { return core_->isDone(); }
  /// Structured cancellation: if the awaiting coroutine's token is cancelled
  /// while it waits, the awaited task is cancelled, and the coroutine goes
  /// on once that task has settled (its co_await then throws what the task
  /// settled with: OperationCancelled, unless it had finished first).
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> awaiting) {
    TaskContext* const context = taskContextOf(awaiting);
    context_ = reinterpret_cast<std::uintptr_t>(context);
    return suspendingSegment(taskOf(context), [&] { return suspend(awaiting, context); });
  }
  R await_resume() {
    auto* const context = reinterpret_cast<TaskContext*>(context_ & ~kSuspended);
    // The coroutine goes on: its task's code again (none, for a coroutine
    // that runs for no task), in a new run segment.
    TaskCore* const task = taskOf(context);
    if ((context_ & kSuspended) != 0) setCurrentTask(task);
    segmentGoesOn(task);
    if (context != nullptr && context->awaitLink() != nullptr) releaseAwaitLink(*context);
    return core_->takeResult();
  }

 private:
  template <class Promise>
  bool suspend(std::coroutine_handle<Promise> awaiting, TaskContext* context) {
    // One awaiter per Future: a second one is refused before anything is
    // linked or held (the coroutine goes on with the error).
    if (core_->hasContinuation()) TaskCore::throwSecondAwait("Future::operator co_await");
    // Fork/join: a task still queued on this pool is run here rather than
    // waited for (the awaiting coroutine is suspended meanwhile, and goes on
    // at once if that finished it).
    if (core_->joinable()) {
      joinInline(*core_);
      if (core_->isDone()) return false;
    }
    // A child of the awaiting task needs no link: cancelling the task
    // cancels it (fork/join awaits its own children: the common case costs
    // one load).
    if (context != nullptr && context->task() != nullptr && !core_->isChildOf(context->task())) {
      linkAwaitToCancellation(*context, *core_);  // may throw: not suspended
    }
    resumeAt_.record(awaiting, taskOf(context));
    context_ = reinterpret_cast<std::uintptr_t>(context) | kSuspended;
    // After this returns true, another thread may resume the coroutine (and
    // destroy this awaiter): touch nothing of `this` afterwards.
    if (core_->setContinuation(&FutureAwaiter::resume, this)) return true;
    context_ &= ~kSuspended;
    resumeAt_.forget();  // already done: resume at once, here
    return false;
  }

  // A flag in the low bit of the context pointer (aligned to 8), so that the
  // awaiter, which every frame that awaits a Future holds, stays four words.
  static constexpr std::uintptr_t kSuspended = 1;  // in context_: await_suspend returned true

  static void resume(void* self) noexcept { static_cast<FutureAwaiter*>(self)->resumeAt_.resume(); }

  ResultCore<R>* core_;
  std::uintptr_t context_ = 0;  // TaskContext* | kSuspended
  ResumePoint resumeAt_;
};

}  // namespace detail
}  // namespace coexec
