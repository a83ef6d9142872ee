// SPDX-License-Identifier: BSL-1.0
#pragma once

// A pool task whose body is a coroutine: a Task<R>, or a callable returning
// one. The callable is kept alive until the coroutine has finished, so the
// coroutine may use the callable's captures (a lambda coroutine's captures
// live in the lambda object, not in the coroutine frame, which reaches them
// through the lambda's `this`). When the coroutine finishes, the task releases
// its body before it publishes the result: the frame first (nothing runs in
// it any more), then the callable. Whoever still holds the task (the Future, a
// pool thread's bookkeeping) holds only the result and the token.

#include <exception>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

#include "coexec/Task.h"
#include "coexec/detail/RunSegments.h"
#include "coexec/detail/TaskCore.h"

namespace coexec::detail {

template <class T>
struct IsTask : std::false_type {};
template <class T>
struct IsTask<Task<T>> : std::true_type {};

/// Prints the failure of a fire-and-forget coroutine that no pool observes (it
/// was run by a caller or by hand). Never throws.
COEXEC_EXPORT void reportUnobservedFailure(const std::exception_ptr& error) noexcept;

/// The value type a submission produces: R for a callable returning R or
/// Task<R>, and for a Task<R> itself.
template <class Fn>
auto submitResultType() {
  if constexpr (IsTask<Fn>::value) {
    return std::type_identity<typename Fn::value_type>{};
  } else if constexpr (IsTask<CallableResult<Fn>>::value) {
    return std::type_identity<typename CallableResult<Fn>::value_type>{};
  } else {
    return std::type_identity<CallableResult<Fn>>{};
  }
}
template <class Fn>
using SubmitResult = typename decltype(submitResultType<Fn>())::type;

/// The task's side of the coroutine it runs: it is the TaskContext of the
/// root Task and of every Task that one awaits, and it alone creates the
/// task's token on demand (TaskCore::createToken()), telling the observer.
template <class R, class Source>
class CoroutineTask final : public ResultCore<R>, private TaskContext {
  static constexpr bool kIsCallable = !IsTask<Source>::value;

 public:
  CoroutineTask(Source&& source, bool hasFuture, int priority)
      : ResultCore<R>(hasFuture, takesToken(), priority), TaskContext(this) {
    if constexpr (kIsCallable) {
      fn_.emplace(std::move(source));
    } else {
      task_ = std::move(source);
    }
  }

  [[nodiscard]] bool isCoroutine() const noexcept override { return true; }

  void startCoroutine(CoroutineObserver* observer) noexcept override {
    observer_ = observer;
    // The current task while the coroutine first runs (and the callable
    // that makes it): work it submits is linked to this task. Restored when
    // the coroutine first suspends or finishes (`this` may be gone by then).
    struct RestoreCurrentTask {
      TaskCore* previous;
      ~RestoreCurrentTask() { setCurrentTask(previous); }
    } restore{exchangeCurrentTask(this)};
    // The caller's reference is ours now, until complete() drops it (or
    // hands it to the observer): the coroutine may outlive every other owner.
    if constexpr (kIsCallable) {
      try {
        if constexpr (kTakesToken<Source>) {
          task_ = std::invoke(*fn_, tokenArgument<Source>(this->token()));
        } else {
          task_ = std::invoke(*fn_);
        }
        // A Task submitted as such was checked by submit(); one a callable
        // returns is checked here, the same way.
        (void)startableHandle(task_, "ThreadPoolExecutor::", this->hasFuture() ? "submit" : "execute");
      } catch (...) {
        complete(std::current_exception());
        return;
      }
    }
    auto& promise = task_.handle().promise();
    promise.setContext(this);  // we outlive the frame: complete() destroys it first
    promise.setCompletion(&CoroutineTask::onFinished, this);
    resume(task_.handle());  // `this` may be gone once this returns
  }

 private:
  static constexpr bool takesToken() noexcept {
    if constexpr (kIsCallable) {
      return kTakesToken<Source>;
    } else {
      return false;
    }
  }

  // Inside the coroutine's final suspension, on the thread that finished it:
  // the frame may be destroyed here (FinalAwaiter touches it no more).
  static void onFinished(void* self) noexcept {
    auto* task = static_cast<CoroutineTask*>(self);
    std::exception_ptr error;
    try {
      auto take = [task]() -> decltype(auto) { return task->task_.handle().promise().result(); };
      task->slot_.emplaceFrom(take);  // the value leaves the frame before the frame goes
    } catch (...) {
      error = std::current_exception();
    }
    task->complete(std::move(error));
  }

  // On the thread that finished the coroutine (or failed to start it).
  void complete(std::exception_ptr error) noexcept {
    segmentEnds(this);  // its last segment (recordLatency): before the settlement runs anything
    // The body is over: the hooks and whatever the settlement resumes are
    // not its code (whoever resumed the coroutine restores its own task).
    setCurrentTask(nullptr);
    // Release the body before the result is published, so that whoever sees
    // the Future settle sees the captures gone, and no reference kept to the
    // task (the Future, a pool thread's) keeps them alive. The frame goes
    // first: until it is destroyed it may refer to the callable's captures.
    // Nothing else touches fn_ or task_ once the coroutine has finished.
    task_ = Task<R>();
    fn_.reset();
    // A frame destroyed while it awaited a Future (never resumed) leaves its
    // link behind: not needed any more.
    if (this->awaitLink() != nullptr) releaseAwaitLink(*this);
    const bool fireAndForget = !this->hasFuture();
    if (observer_) observer_->coroutineEnding(*this, TaskCore::outcomeOf(error));  // before the settlement
    const RunResult result = this->finish(std::move(error));
    if (observer_) {
      // Takes our reference: it may have to release the task before what it
      // does last (a pool waiting for the task lets it go).
      observer_->coroutineFinished(*this, result);
      return;
    }
    if (fireAndForget && result.outcome == Outcome::failed) reportUnobservedFailure(result.error);
    this->release();  // may destroy this (the result and the token; the body is gone)
  }

  void invoke() override {}  // never called: coroutine tasks start through startCoroutine()

  // TaskContext, on the coroutine's thread (the chain runs one coroutine at
  // a time, so tokenUntracked_ needs no synchronisation).
  CancellationToken cancellationToken() override {
    if (this->createToken()) tokenUntracked_ = true;
    if (tokenUntracked_) {
      if (observer_ != nullptr) observer_->coroutineTokenCreated(*this);  // may throw: tried again next time
      tokenUntracked_ = false;
    }
    return this->token();
  }

  // The body: released by complete(), the frame first. A task destroyed
  // without starting holds only one of them (the callable, or the Task).
  std::optional<Source> fn_;
  Task<R> task_;
  CoroutineObserver* observer_ = nullptr;
  bool tokenUntracked_ = false;  // created on demand, not yet reported to observer_
};

}  // namespace coexec::detail
