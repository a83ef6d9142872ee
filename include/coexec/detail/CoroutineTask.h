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
#include <type_traits>
#include <utility>

#include "coexec/Task.h"
#include "coexec/detail/ResultCore.h"
#include "coexec/detail/RunSegments.h"

namespace coexec::detail {

template <class T>
struct IsTask : std::false_type {};
template <class T>
struct IsTask<Task<T>> : std::true_type {};

/// Prints the failure of a fire-and-forget coroutine that no pool observes (it
/// was run by a caller or by hand). Never throws.
COEXEC_EXPORT void reportUnobservedFailure(const std::exception_ptr& error) noexcept;

/// The value type a submission produces: R for a callable returning R or
/// Task<R>, and for a Task<R> itself. (Class templates, not a function's
/// deduced return type: nothing is emitted per callable type.)
template <class T>
struct UnwrapTask {
  using type = T;
};
template <class T>
struct UnwrapTask<Task<T>> {
  using type = T;
};
template <class Fn, bool = IsTask<Fn>::value>
struct SubmitResultOf {
  using type = typename UnwrapTask<CallableResult<Fn>>::type;
};
template <class Fn>
struct SubmitResultOf<Fn, true> {
  using type = typename Fn::value_type;
};
template <class Fn>
using SubmitResult = typename SubmitResultOf<Fn>::type;

/// The task's side of the coroutine it runs: it is the TaskContext of the
/// root Task and of every Task that one awaits, and it alone creates the
/// task's token on demand (TaskCore::createToken()), telling the observer.
/// Everything here depends on the result type alone; CoroutineTask adds what
/// depends on the callable (making the Task, holding the callable).
template <class R>
class CoroutineTaskBase : public ResultCore<R>, private TaskContext {
 public:
  [[nodiscard]] bool isCoroutine() const noexcept final { return true; }

  void startCoroutine(CoroutineObserver* observer) noexcept final {
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
    if (!task_.valid()) {
      try {
        task_ = makeTask();
      } catch (...) {
        complete(std::current_exception());
        return;
      }
    }
    auto& promise = task_.handle().promise();
    promise.setContext(this);  // we outlive the frame: complete() destroys it first
    promise.setCompletion(&CoroutineTaskBase::onFinished, this);
    resume(task_.handle());  // `this` may be gone once this returns
  }

 protected:
  CoroutineTaskBase(bool hasFuture, bool takesToken, int priority)
      : ResultCore<R>(hasFuture, takesToken, priority), TaskContext(this) {}

  /// Calls the callable for the Task it returns, and checks that Task as
  /// submit() checks a submitted one. Called once, by startCoroutine(), when
  /// the task was made from a callable (a submitted Task is in task_ already).
  virtual Task<R> makeTask() = 0;
  /// Destroys the callable, if there is one. Called once, by complete().
  virtual void releaseCallable() noexcept = 0;

  // The coroutine; released by complete(), before the callable.
  Task<R> task_;

 private:
  // Inside the coroutine's final suspension, on the thread that finished it:
  // the frame may be destroyed here (FinalAwaiter touches it no more).
  static void onFinished(void* self) noexcept {
    auto* task = static_cast<CoroutineTaskBase*>(self);
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
    // Nothing else touches the callable or task_ once the coroutine has finished.
    task_ = Task<R>();
    releaseCallable();
    // A frame destroyed while it awaited a Future (never resumed) leaves its
    // link behind: not needed any more.
    if (this->awaitLink() != nullptr) releaseAwaitLink(*this);
    if (observer_) {
      // Settles the task after what the settlement must publish (a pool's
      // count), and takes our reference: it may have to release the task
      // before what it does last (a pool waiting for the task lets it go).
      observer_->coroutineEnded(*this, std::move(error));
      return;
    }
    const bool fireAndForget = !this->hasFuture();
    const RunResult result = this->finish(std::move(error));
    if (fireAndForget && result.outcome == Outcome::failed) reportUnobservedFailure(result.error);
    this->release();  // may destroy this (the result and the token; the body is gone)
  }

  void invoke() final {}  // never called: coroutine tasks start through startCoroutine()

  // TaskContext, on the coroutine's thread (the chain runs one coroutine at
  // a time, so tokenUntracked_ needs no synchronisation).
  CancellationToken cancellationToken() final {
    if (this->createToken()) tokenUntracked_ = true;
    if (tokenUntracked_) {
      if (observer_ != nullptr) observer_->coroutineTokenCreated(*this);  // may throw: tried again next time
      tokenUntracked_ = false;
    }
    return this->token();
  }

  CoroutineObserver* observer_ = nullptr;
  bool tokenUntracked_ = false;  // created on demand, not yet reported to observer_
};

/// A pool task whose body is `Source`: a Task<R>, or a callable returning
/// one. The callable lives in a union member (not a std::optional), so that
/// one callable type instantiates this class's few functions and nothing else.
template <class R, class Source>
class CoroutineTask final : public CoroutineTaskBase<R> {
  static constexpr bool kIsCallable = !IsTask<Source>::value;

 public:
  CoroutineTask(Source&& source, bool hasFuture, int priority)
      : CoroutineTaskBase<R>(hasFuture, takesToken(), priority) {
    if constexpr (kIsCallable) {
      ::new (static_cast<void*>(&fn_)) Source(static_cast<Source&&>(source));
      live_ = true;
    } else {
      this->task_ = static_cast<Source&&>(source);
    }
  }
  // A task destroyed without starting holds one of its bodies (the callable,
  // or the Task); one that started has released both.
  ~CoroutineTask() override {
    if (live_) fn_.~Source();
  }

 private:
  static constexpr bool takesToken() noexcept {
    if constexpr (kIsCallable) {
      return kTakesToken<Source>;
    } else {
      return false;
    }
  }

  Task<R> makeTask() override {
    if constexpr (kIsCallable) {
      Task<R> task;
      if constexpr (kTakesToken<Source>) {
        task = fn_(tokenArgument<Source>(this->token()));
      } else {
        task = fn_();
      }
      // A Task submitted as such was checked by submit(); one a callable
      // returns is checked here, the same way.
      (void)startableHandle(task, "ThreadPoolExecutor::", this->hasFuture() ? "submit" : "execute");
      return task;
    } else {
      return Task<R>();  // not called: the Task was given
    }
  }

  void releaseCallable() noexcept override {
    if (live_) {
      live_ = false;
      fn_.~Source();
    }
  }

  // The callable, alive from the constructor until releaseCallable() (or
  // the destructor, if the task never started); never alive for a Task.
  union {
    Source fn_;
  };
  bool live_ = false;
};

}  // namespace coexec::detail
