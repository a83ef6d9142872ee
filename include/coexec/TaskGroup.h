// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <condition_variable>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

#include "coexec/CancellationToken.h"
#include "coexec/Export.h"
#include "coexec/Future.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/CombinatorAccess.h"
#include "coexec/detail/FanIn.h"
#include "coexec/detail/OwningCallableFuture.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/ResultCore.h"
#include "coexec/detail/ResumePoint.h"
#include "coexec/detail/RunSegments.h"

namespace coexec {

namespace detail {
class GroupState;
class JoinAwaiter;
}  // namespace detail

/// A scope for children spawned one by one on a pool (Kotlin's
/// `coroutineScope`, Python's `asyncio.TaskGroup`, Java's
/// `StructuredTaskScope`):
///
/// ```
/// coexec::TaskGroup group(pool);
/// coexec::Future<int> a = group.spawn([] { return 1; });
/// coexec::Future<int> b = group.spawn(fetch(url));   // a Task<int>
/// co_await group.join();                              // both have settled
/// int sum = a.get() + b.get();                        // settled: no wait
/// ```
///
/// Rules:
/// - The first child to fail (an exception other than OperationCancelled)
///   makes the group cancel every other child (queued ones never start,
///   running ones have their token cancelled) and refuse new ones; join()
///   rethrows that exception once all have settled.
/// - A child that ends with OperationCancelled (its Future's cancel(),
///   cancel() on the group, shutdownNow()) is not a failure of the group.
/// - Once the group has failed or been cancelled, spawn() starts nothing: the
///   Future it returns has settled with OperationCancelled.
/// - Structured: when join() returns or throws, every child has settled and
///   every Future spawn() returned has settled. A group destroyed while
///   children still run, without join(), cancels them, blocks until they
///   have settled, and reports the misuse (a std::logic_error) to the pool's
///   uncaught-exception handler; a failure that no join() rethrew is
///   reported there too (not a child's refusal: RejectedExecution or
///   BrokenPromise, see ThreadPoolOptions::reportUnobservedFailures).
///   Nothing is leaked, no coroutine left dangling.
///
/// Thread safety: spawn() and cancel() may be called from any thread,
/// concurrently (a child may spawn siblings); one coroutine at a time awaits
/// join(); the destructor must not race with any other call.
class COEXEC_EXPORT TaskGroup {
 public:
  /// A group whose children run on `pool`, which must outlive it. Never
  /// blocks.
  explicit TaskGroup(ThreadPoolExecutor& pool);
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;
  /// Never blocks when every child has settled. Otherwise (a misuse: await
  /// join() first) cancels the children, blocks until they have settled,
  /// and reports a std::logic_error to the pool's uncaught-exception handler
  /// on this thread. A failure no join() rethrew is reported there too,
  /// unless it is a child's refusal (RejectedExecution, BrokenPromise).
  /// \note Blocking here on a thread of the children's pool can deadlock if
  /// they need that thread to finish; join() never blocks.
  ~TaskGroup();

  /// Runs `f` on the pool as a child of this group and returns its Future.
  /// `f` is anything submit() takes: a callable (returning R or Task<R>, or
  /// taking a CancellationToken, which the group cancels when it cancels the
  /// child) or a Task<R>. It goes through the pool's admission like
  /// submit(). The Future may be awaited, waited on or cancelled as any
  /// other; cancelling it settles it at once with OperationCancelled and
  /// cancels the child (join() still waits for the child to stop). Never
  /// blocks, except under the pool's block() and callerRuns() policies.
  /// \throws what submit() throws (std::invalid_argument for an empty
  /// callable or Task, std::logic_error for a started Task,
  /// RejectedExecution under abort(), and after shutdown()); the group is
  /// then unchanged. Allocations: the task and two small records.
  /// \note The Future is of the type submit() returns for `f`: on GCC 12,
  /// `co_await group.spawn([s] {...})` of a lambda whose capture owns memory
  /// does not compile (name the Future first); `co_await group.spawn([&]
  /// {...})` is accepted everywhere (docs/coroutines.md).
  template <class F>
  [[nodiscard]] auto spawn(F&& f);

  /// `co_await group.join()`: suspends until every child spawned so far (and
  /// every child they spawn meanwhile) has settled, then returns, or
  /// rethrows the group's first failure. Never blocks a thread; resumes
  /// where the awaiting coroutine was running (inline on the thread that
  /// settles the last child if that belongs to its executor, else posted
  /// there). If the awaiting coroutine's task is cancelled while it waits,
  /// the group cancels its children and join() throws OperationCancelled
  /// once they have settled. The group may be joined again later (children
  /// spawned after a join need another one).
  /// \throws the first failure; OperationCancelled as above;
  /// std::logic_error if another coroutine is already joining.
  [[nodiscard]] detail::JoinAwaiter join() noexcept;

  /// Cancels every child still running or queued and refuses new ones (as a
  /// failure would, but join() then returns normally unless a child failed).
  /// Never blocks (cancellation callbacks run on this thread); a parked
  /// join() is resumed on its own executor, not here.
  void cancel() noexcept;

  /// How many children have not settled yet. Never blocks (a brief lock).
  [[nodiscard]] std::size_t running() const;
  /// The pool the children run on.
  [[nodiscard]] ThreadPoolExecutor& pool() const noexcept;

 private:
  std::unique_ptr<detail::GroupState> state_;
};

namespace detail {

/// What TaskGroup::spawn() hands the caller: a result that the group
/// settles with what the child ended with (the child's own Future, with its
/// one continuation, is the group's). It never runs; cancelling it (while
/// the child runs) settles it at once and, through its cancelListener, the
/// child's record cancels the child.
template <class R>
class ForwardedResult final : public ResultCore<R> {
 public:
  ForwardedResult() : ResultCore<R>(/*hasFuture=*/true, /*wantsToken=*/false, /*priority=*/0) {}

  /// Settles with `result`, atomically with respect to a cancel (as a lane's
  /// LaneResult does): either the caller's cancel came first (this settled
  /// with OperationCancelled; the group still has the child's result) or
  /// `result` is delivered and a cancel then finds this done. On the thread
  /// that settled the child. Never throws.
  void forward(ChildResult<R>&& result) noexcept {
    (void)this->settleFromQueued([&]() noexcept -> std::exception_ptr {
      if (result.error) return std::move(result.error);
      try {
        if constexpr (!std::is_void_v<R>) {
          auto take = [&result]() -> R { return std::move(*result.value); };
          this->slot_.emplaceFrom(take);
        }
      } catch (...) {
        return std::current_exception();
      }
      return nullptr;
    });
  }

 private:
  void invoke() override {}  // never runs: forward() settles it
};

/// A child of a group, as the group keeps it: linked into the group's list
/// while it runs (guarded by the group's mutex), and the listener that
/// cancels the task when its ForwardedResult is cancelled.
class COEXEC_EXPORT GroupChildBase : public QueuedCancelListener, public Recycled {
 public:
  GroupChildBase(GroupState& group, Ref<TaskCore> task) noexcept : group_(&group), task_(std::move(task)) {}
  /// The caller's Future was cancelled while the child ran: cancel it too.
  void queuedTaskCancelled() noexcept override { task_->requestCancel(); }

 protected:
  friend class GroupState;
  GroupState* group_;
  const Ref<TaskCore> task_;
  // Guarded by the group's mutex.
  GroupChildBase* prev_ = nullptr;
  GroupChildBase* next_ = nullptr;
  bool linked_ = false;
  bool cancelRequested_ = false;
};

template <class R>
class GroupChild final : public GroupChildBase {
 public:
  GroupChild(GroupState& group, Ref<ResultCore<R>> task, Ref<ForwardedResult<R>> forwarded) noexcept
      : GroupChildBase(group, std::move(task)), forwarded_(std::move(forwarded)) {}

  /// Takes over the reference the caller holds (released when the task has
  /// settled and the group has been told) and watches the task.
  static void watch(GroupChild* child) noexcept {
    if (!child->task_->setContinuation(&GroupChild::onSettled, child)) onSettled(child);
  }
  /// Breaks the cycle with the ForwardedResult (which holds this record as
  /// its listener) when the task will never be watched.
  void dropForwarded() noexcept { forwarded_ = Ref<ForwardedResult<R>>(); }

 private:
  // The task's continuation, on the thread that settled it.
  static void onSettled(void* self) noexcept;

  Ref<ForwardedResult<R>> forwarded_;  // until the task settled
};

/// The state of a TaskGroup; see TaskGroup and TaskGroup.cpp.
class COEXEC_EXPORT GroupState {
 public:
  explicit GroupState(ThreadPoolExecutor& pool) noexcept : pool_(pool) {}
  GroupState(const GroupState&) = delete;
  GroupState& operator=(const GroupState&) = delete;
  /// The TaskGroup's destructor: see there.
  ~GroupState();

  [[nodiscard]] ThreadPoolExecutor& pool() const noexcept { return pool_; }
  /// Links a new child, or returns false if the group stopped (failed or
  /// cancelled): the child must not start.
  bool enter(GroupChildBase& child) noexcept;
  /// A linked child settled, with `error` (null: a value, or it never
  /// started). May resume the joiner; touches nothing of the group after.
  void settled(GroupChildBase& child, const std::exception_ptr& error) noexcept;
  /// TaskGroup::cancel().
  void cancel() noexcept;
  [[nodiscard]] std::size_t running() const;

  // For JoinAwaiter.
  enum class Park : std::uint8_t { parked, ready, cancelled };
  [[nodiscard]] bool idle() const;
  /// Parks `joiner` unless the group is idle. `cancelled`: the joiner's task
  /// was cancelled (the caller has cancelled the children). Returns
  /// cancelled (nothing parked) if that happened before it could park.
  /// \throws std::logic_error if another coroutine is joining.
  Park park(JoinAwaiter& joiner, bool cancelled);
  /// The joiner's task was cancelled (its registration's callback).
  void cancelFor(JoinAwaiter& joiner) noexcept;
  /// Stops the group and cancels every child, on this thread.
  void stopAndCancel() noexcept;
  /// The outcome for a resumed joiner: returns, or rethrows.
  void joined(const JoinAwaiter& joiner);

 private:
  // Requires: lock held (released and taken again while it cancels).
  void cancelChildrenLocked(std::unique_lock<std::mutex>& lock) noexcept;
  // Requires: mutex_ held. The parked joiner if the group is idle; wakes the
  // destructor.
  ResumePoint takeJoinerLocked() noexcept;
  void unlinkLocked(GroupChildBase& child) noexcept;

  ThreadPoolExecutor& pool_;
  mutable std::mutex mutex_;
  std::condition_variable idle_;    // the destructor waits on it
  GroupChildBase* head_ = nullptr;  // guarded by mutex_: the children not yet settled
  std::size_t live_ = 0;            // guarded by mutex_
  std::size_t cancelling_ = 0;      // guarded by mutex_: cancellation loops at work
  bool stopped_ = false;            // guarded by mutex_
  bool failed_ = false;             // guarded by mutex_
  bool observed_ = false;           // guarded by mutex_: a join() rethrew firstError_
  std::exception_ptr firstError_;   // guarded by mutex_
  JoinAwaiter* joiner_ = nullptr;   // guarded by mutex_
};

/// What `co_await group.join()` evaluates to. Awaited once; neither copyable
/// nor movable (a parked join is referred to by the group).
class COEXEC_EXPORT JoinAwaiter {
 public:
  explicit JoinAwaiter(GroupState& group) noexcept : group_(&group) {}
  JoinAwaiter(const JoinAwaiter&) = delete;
  JoinAwaiter& operator=(const JoinAwaiter&) = delete;

  bool await_ready() const { return group_->idle(); }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> awaiting) {
    TaskContext* const context = taskContextOf(awaiting);
    task_ = taskOf(context);
    suspendCalled_ = true;
    return suspendingSegment(task_, [&] { return suspend(awaiting, context); });
  }
  void await_resume() {
    // The coroutine goes on: its task's code again (see currentTask()), in a
    // new run segment.
    if (suspendCalled_) setCurrentTask(task_);
    segmentGoesOn(task_);
    registration_.reset();
    group_->joined(*this);
  }

 private:
  friend class GroupState;
  bool suspend(std::coroutine_handle<> awaiting, TaskContext* context);

  GroupState* group_;
  ResumePoint parked_;
  bool cancelled_ = false;       // written before the resumption (under the group's mutex, or here)
  bool cancelledEarly_ = false;  // guarded by the group's mutex
  bool suspendCalled_ = false;    // await_suspend ran: task_ is the coroutine's task
  TaskCore* task_ = nullptr;
  // Last, so destroyed first: its destructor waits for cancelFor() running
  // on another thread.
  std::optional<CancellationRegistration> registration_;
};

template <class R>
void GroupChild<R>::onSettled(void* self) noexcept {
  auto* child = static_cast<GroupChild*>(self);
  ChildResult<R> result;
  (void)result.store([child]() -> decltype(auto) { return static_cast<ResultCore<R>&>(*child->task_).takeResult(); });
  const std::exception_ptr error = result.error;
  {
    // The caller's Future settles before the group hears of it: once join()
    // returns, every Future spawn() returned has settled.
    Ref<ForwardedResult<R>> forwarded = std::move(child->forwarded_);
    forwarded->forward(std::move(result));
  }
  child->group_->settled(*child, error);
  child->release();  // the reference watch() took over
}

}  // namespace detail

template <class F>
auto TaskGroup::spawn(F&& f) {
  using R = detail::SubmitResult<std::decay_t<F>>;
  static_assert(!std::is_reference_v<R>, "coexec: TaskGroup::spawn of a task returning a reference is not supported");
  using detail::CombinatorAccess;
  PendingTask task = CombinatorAccess::makeTask(std::forward<F>(f), "TaskGroup::spawn");
  CombinatorAccess::throwIfShutdown(state_->pool(), "TaskGroup::spawn", 1);  // whatever the policy: nothing starts
  auto forwarded = detail::Ref<detail::ForwardedResult<R>>::adopt(new detail::ForwardedResult<R>());
  forwarded->owner = CombinatorAccess::identity(state_->pool());  // get() on a pool thread is checked as for submit()
  auto child = detail::Ref<detail::GroupChild<R>>::adopt(
      new detail::GroupChild<R>(*state_, CombinatorAccess::resultCore<R>(task), forwarded));
  forwarded->cancelListener = child.template copyAs<detail::QueuedCancelListener>();
  if (!state_->enter(*child)) {
    // The group has stopped: the child never starts.
    child->dropForwarded();
    forwarded->requestCancel();  // settles it at once; its listener cancels the task
    return detail::submittedFuture<F>(CombinatorAccess::future<R>(std::move(forwarded)));
  }
  try {
    CombinatorAccess::admit(state_->pool(), std::move(task));
  } catch (...) {
    child->dropForwarded();
    state_->settled(*child, nullptr);  // it never ran: not a failure of the group
    throw;
  }
  detail::GroupChild<R>::watch(child.detach());
  return detail::submittedFuture<F>(CombinatorAccess::future<R>(std::move(forwarded)));
}

}  // namespace coexec
