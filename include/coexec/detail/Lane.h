// SPDX-License-Identifier: BSL-1.0
#pragma once

// Implementation of coexec::SerialExecutor: the lane's state, the record that
// watches each task of the lane, the Future the caller holds, and the
// awaiter of resumeOn(lane). Included at the end of SerialExecutor.h.
//
// A task of the lane is a pool task made as submit() makes it. The lane
// owns that task's one continuation (TaskCore::setContinuation), which every
// way of settling goes through (ran, failed, cancelled while queued,
// refused, discarded, dropped unrun): that is how the lane knows when to go
// on. The caller's Future is therefore a LaneResult that the continuation
// settles with what the task ended with (as TaskGroup::spawn does).

#include <atomic>
#include <condition_variable>
#include <coroutine>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

#include "coexec/Export.h"
#include "coexec/PendingTask.h"
#include "coexec/detail/FrameAllocator.h"
#include "coexec/detail/LaneAccess.h"
#include "coexec/detail/OwningCallableFuture.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/ResultCore.h"
#include "coexec/detail/RunSegments.h"
#include "coexec/detail/TaskPromise.h"

namespace coexec::detail {

/// The queue and the turn of one lane. Shared by the SerialExecutor and by
/// every task record of the lane, so it outlives a task that settles as the
/// executor is destroyed.
///
/// Invariants: at most one task of the lane is in the pool or running
/// (active_); it leaves active_ only when it has settled. While no task is
/// active and no thread dispatches, waiting_ is empty. Locks: mutex_ guards
/// waiting_, active_ and dispatching_; the pool is called without it.
class COEXEC_EXPORT LaneState : public RefCounted {
 public:
  explicit LaneState(ThreadPoolExecutor& pool) noexcept : pool_(pool) {}

  /// Queues `task` (whose state is `core`, watched already) at the lane's
  /// tail, first linking it to the calling thread's task and to `token` if
  /// `link`; if the lane is idle, hands it to the pool on this thread.
  /// Never blocks for long. \throws std::bad_alloc (the task is then
  /// dropped: it settles with BrokenPromise).
  void enqueue(PendingTask task, TaskCore& core, const CancellationToken* token, bool link);
  /// Called once by each task's continuation, on the thread that settled it:
  /// if it held the lane, the next task gets its turn. Never throws.
  void settled(const TaskCore& core) noexcept;
  /// True if `task` holds the lane now.
  [[nodiscard]] bool holds(const TaskCore* task) const;
  [[nodiscard]] std::size_t queued() const;
  /// Blocks until the lane is idle and empty; returns at once when called by
  /// the lane's own active task (see ~SerialExecutor).
  void waitDrained();
  /// The thread that runs a resumeOn(lane) hop marks itself while the hop's
  /// coroutine runs (the hop holds the lane meanwhile). Never throws.
  /// (Out of line: thread identity is never read in code that may be
  /// inlined into a coroutine body.)
  void enterHop() noexcept;
  void leaveHop() noexcept;
  [[nodiscard]] ThreadPoolExecutor& pool() const noexcept { return pool_; }

 private:
  struct Waiting {
    PendingTask task;
    TaskCore* core;
  };
  /// Hands waiting tasks to the pool until one is in it (or the lane is
  /// empty); a refused one settles with RejectedExecution and the next one
  /// follows. Precondition: dispatching_ was set by this thread. Never throws.
  void dispatch() noexcept;

  ThreadPoolExecutor& pool_;
  mutable std::mutex mutex_;
  std::condition_variable drained_;
  std::deque<Waiting> waiting_;       // guarded by mutex_
  const TaskCore* active_ = nullptr;  // guarded by mutex_: the task that holds the lane
  bool dispatching_ = false;          // guarded by mutex_: a thread runs dispatch()
  // The thread running the active hop's coroutine, or none. Written by that
  // thread only, and compared only with the reader's own id: relaxed is
  // enough (a thread sees its own writes; others never match).
  std::atomic<std::thread::id> hopThread_{};
};

/// What the caller of SerialExecutor::submit() holds: a result that the
/// task's continuation settles with what the task ended with. It never runs;
/// cancelling it settles it at once and, through its cancelListener, cancels
/// the task.
template <class R>
class LaneResult final : public ResultCore<R> {
 public:
  LaneResult() : ResultCore<R>(/*hasFuture=*/true, /*wantsToken=*/false, /*priority=*/0) {}

  /// Settles with the result of `source` (settled), atomically with respect
  /// to a cancel: either the caller's cancel came first (this settled with
  /// OperationCancelled) and `source`'s result is left unread, or the result
  /// is taken and delivered (a cancel then finds this done). Left unread, a
  /// failure of the task's own that no cancellation superseded (a
  /// beforeExecute hook that threw after the cancel reached the started
  /// task, or a failure just before the cancel) is reported as unobserved
  /// when the task goes, as for the pool's submit(); a cancellation, a
  /// refusal or a value is not. Never throws.
  void forwardFrom(ResultCore<R>& source) noexcept {
    (void)this->settleFromQueued([this, &source]() noexcept -> std::exception_ptr {
      try {
        auto take = [&source]() -> R { return source.takeResult(); };
        this->slot_.emplaceFrom(take);
        return nullptr;
      } catch (...) {
        return std::current_exception();
      }
    });
  }

 private:
  void invoke() override {}  // never runs: forwardFrom() settles it
};

/// The lane's record of one task: watches it (its continuation) and, for
/// submit(), cancels it when the caller's Future is cancelled.
template <class R>
class LaneEntry final : public QueuedCancelListener, public Recycled {
 public:
  LaneEntry(Ref<LaneState> lane, Ref<ResultCore<R>> task, Ref<LaneResult<R>> result) noexcept
      : lane_(std::move(lane)), task_(std::move(task)), result_(std::move(result)) {}

  /// Takes over the caller's reference (released once the task settled)
  /// and watches the task, which must be new (not settled, no continuation).
  static void watch(LaneEntry* entry) noexcept {
    if (!entry->task_->setContinuation(&LaneEntry::onSettled, entry)) onSettled(entry);
  }
  /// The caller's Future was cancelled: cancel the task too.
  void queuedTaskCancelled() noexcept override { task_->requestCancel(); }

 private:
  // The task's continuation, on the thread that settled it.
  static void onSettled(void* self) noexcept {
    auto* entry = static_cast<LaneEntry*>(self);
    if (Ref<LaneResult<R>> result = std::move(entry->result_)) {
      result->forwardFrom(*entry->task_);  // breaks the cycle with the result's listener
    } else {
      std::exception_ptr error;
      try {
        entry->task_->takeResult();
      } catch (...) {
        error = std::current_exception();
      }
      // A fire-and-forget task: its failure (or its refusal) is reported,
      // its cancellation is not.
      if (error && !isOperationCancelled(error)) LaneAccess::reportUncaught(entry->lane_->pool(), error);
    }
    // Then the lane goes on: once it is drained, every task's Future has
    // settled and every failure has been reported.
    entry->lane_->settled(*entry->task_);
    entry->release();  // the reference watch() took over
  }

  const Ref<LaneState> lane_;
  const Ref<ResultCore<R>> task_;
  Ref<LaneResult<R>> result_;  // null for execute(); dropped once forwarded
};

/// What `co_await resumeOn(lane)` evaluates to.
class COEXEC_EXPORT LaneHopAwaiter {
 public:
  explicit LaneHopAwaiter(LaneState& lane) noexcept : lane_(&lane) {}
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> awaiting) {
    task_ = taskOf(taskContextOf(awaiting));
    return suspendingSegment(task_, [&] { return suspend(awaiting); });
  }
  /// Makes the coroutine's task the thread's current task again (if it
  /// suspended); rethrows a refused or dropped hop's error.
  void await_resume();

 private:
  bool suspend(std::coroutine_handle<> awaiting);

  LaneState* lane_;
  Ref<TaskCore> hop_;         // the hop, while it is queued or ran
  TaskCore* task_ = nullptr;  // the coroutine's task (see currentTask())
  bool suspended_ = false;
};

}  // namespace coexec::detail

namespace coexec {

template <bool HasFuture, class F>
auto SerialExecutor::enqueue(F&& f, const CancellationToken* token, const char* operation) {
  using R = detail::SubmitResult<std::decay_t<F>>;
  static_assert(!std::is_reference_v<R>, "coexec: a lane task returning a reference is not supported");
  using detail::LaneAccess;
  PendingTask task = LaneAccess::makeTask(std::forward<F>(f), operation);
  detail::Ref<detail::ResultCore<R>> core = LaneAccess::resultCore<R>(task);
  detail::Ref<detail::LaneResult<R>> result;
  if constexpr (HasFuture) {
    result = detail::Ref<detail::LaneResult<R>>::adopt(new detail::LaneResult<R>());
    result->owner = LaneAccess::identity(pool());  // get() on a pool thread is checked as for submit()
  }
  auto entry = detail::Ref<detail::LaneEntry<R>>::adopt(new detail::LaneEntry<R>(state_, core, result));
  if constexpr (HasFuture) result->cancelListener = entry.template copyAs<detail::QueuedCancelListener>();
  detail::LaneEntry<R>::watch(entry.detach());
  state_->enqueue(std::move(task), *core, token, /*link=*/true);
  if constexpr (HasFuture) {
    return detail::submittedFuture<F>(LaneAccess::future<R>(std::move(result)));
  }
}

template <class F>
auto SerialExecutor::submit(F&& f) {
  return enqueue<true>(std::forward<F>(f), nullptr, "SerialExecutor::submit");
}

template <class F>
auto SerialExecutor::submit(F&& f, const CancellationToken& token) {
  return enqueue<true>(std::forward<F>(f), &token, "SerialExecutor::submit");
}

template <class F>
void SerialExecutor::execute(F&& f) {
  enqueue<false>(std::forward<F>(f), nullptr, "SerialExecutor::execute");
}

template <class F>
void SerialExecutor::execute(F&& f, const CancellationToken& token) {
  enqueue<false>(std::forward<F>(f), &token, "SerialExecutor::execute");
}

}  // namespace coexec
