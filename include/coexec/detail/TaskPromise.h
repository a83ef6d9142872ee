#pragma once

// Implementation of coexec::Task<T>: the promise and the awaiters.

#include <coroutine>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "coexec/Export.h"
#include "coexec/detail/FrameAllocator.h"
#include "coexec/detail/Scheduler.h"

namespace coexec {
template <class T>
class Task;
class CancellationToken;
}  // namespace coexec

namespace coexec::detail {

class TaskCore;
class AwaitLink;

/// What a coroutine knows about the pool task it runs for. Set on the root
/// Task's promise by whoever runs it as a task (CoroutineTask, which lives
/// as long as the frame) and copied into every Task the chain awaits
/// (TaskAwaiter), so that a child task runs with its parent's token. A
/// Task run by syncWait(), or awaited by a coroutine that is not a Task,
/// has none.
///
/// Thread safety: called only by the coroutines of one chain, which run one
/// at a time.
class TaskContext {
 public:
  /// The task's cancellation token, created on first demand (a coroutine
  /// task gets one only when something in it asks). Never blocks.
  /// \throws std::bad_alloc if the token cannot be created.
  virtual CancellationToken cancellationToken() = 0;
  /// The task itself: what the awaiters make the thread's current task
  /// (currentTask()) when the coroutine goes on. Null for a context that
  /// runs for no pool task (a combinator's context for the Task children it
  /// runs inline, with a token of its own): work those children submit is
  /// not linked to it, and a Future they await is not cancelled through it
  /// (their token is: they see it at their next cancellable await).
  [[nodiscard]] TaskCore* task() const noexcept { return task_; }
  /// The cancellation link of the Future the chain awaits now, if it needs
  /// one (FutureAwaiter; see linkAwaitToCancellation()). Kept here rather
  /// than in the awaiter, so that coroutine frames do not grow: a chain
  /// awaits one thing at a time.
  [[nodiscard]] AwaitLink* awaitLink() const noexcept { return awaitLink_; }
  void setAwaitLink(AwaitLink* link) noexcept { awaitLink_ = link; }

 protected:
  explicit TaskContext(TaskCore* task) noexcept : task_(task) {}
  TaskContext() noexcept : task_(nullptr) {}  // for no pool task: see task()
  ~TaskContext() = default;

 private:
  TaskCore* const task_;
  AwaitLink* awaitLink_ = nullptr;
};

/// For a coroutine that runs for a pool task (`context`) and awaits
/// `awaited`, which is not that task's child: stores in `context` a
/// registration on the task's token that cancels `awaited` (as
/// Future::cancel() does) when the token is cancelled. If the token is
/// cancelled already, cancels `awaited` at once and stores nothing. Release
/// the link with releaseAwaitLink() once the coroutine goes on.
/// \throws std::bad_alloc if the token or the registration cannot be made.
COEXEC_EXPORT void linkAwaitToCancellation(TaskContext& context, TaskCore& awaited);
/// Deregisters and frees the link stored in `context`. Blocks while its
/// callback runs on another thread (it only cancels the awaited task).
COEXEC_EXPORT void releaseAwaitLink(TaskContext& context) noexcept;

/// The task of `context`, or null for a coroutine that runs for none.
inline TaskCore* taskOf(const TaskContext* context) noexcept { return context != nullptr ? context->task() : nullptr; }

/// Called when a root task (one nobody awaits: submitted to a pool, run by
/// syncWait) finishes, inside its final suspension. The callee may destroy the
/// frame.
using TaskCompletion = void (*)(void* arg) noexcept;

class TaskPromiseBase : public Recycled {
 public:
  class FinalAwaiter {
   public:
    FinalAwaiter() noexcept = default;  // not an aggregate: see docs/coroutines.md (GCC 12)
    bool await_ready() const noexcept { return false; }
    template <class Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> finished) noexcept {
      TaskPromiseBase& promise = finished.promise();
      if (promise.continuation_) return transferTo(promise.continuation_);   // back to the awaiter
      if (promise.completion_) promise.completion_(promise.completionArg_);  // may destroy the frame
      return std::noop_coroutine();
    }
    void await_resume() const noexcept {}
  };

  std::suspend_always initial_suspend() noexcept { return {}; }
  FinalAwaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { error_ = std::current_exception(); }

  void setContinuation(std::coroutine_handle<> continuation) noexcept {
    continuation_ = continuation;
    started_ = true;
  }
  void setCompletion(TaskCompletion completion, void* arg) noexcept {
    completion_ = completion;
    completionArg_ = arg;
    started_ = true;
  }
  [[nodiscard]] bool started() const noexcept { return started_; }
  [[nodiscard]] const std::exception_ptr& error() const noexcept { return error_; }
  /// The task this coroutine runs for (see TaskContext), or null.
  void setContext(TaskContext* context) noexcept { context_ = context; }
  [[nodiscard]] TaskContext* context() const noexcept { return context_; }

 protected:
  std::exception_ptr error_;

 private:
  TaskContext* context_ = nullptr;
  std::coroutine_handle<> continuation_;
  TaskCompletion completion_ = nullptr;
  void* completionArg_ = nullptr;
  bool started_ = false;
};

template <class T>
class TaskPromise final : public TaskPromiseBase {
 public:
  Task<T> get_return_object() noexcept { return Task<T>(std::coroutine_handle<TaskPromise>::from_promise(*this)); }

  template <class U>
  requires std::is_convertible_v<U&&, T>
  void return_value(U&& value) noexcept(std::is_nothrow_constructible_v<T, U&&>) {
    value_.emplace(std::forward<U>(value));
  }

  /// The value, or rethrows. Moves the value out.
  T result() {
    if (error_) std::rethrow_exception(error_);
    return std::move(*value_);
  }

 private:
  std::optional<T> value_;
};

template <class T>
class TaskPromise<T&> final : public TaskPromiseBase {
 public:
  Task<T&> get_return_object() noexcept { return Task<T&>(std::coroutine_handle<TaskPromise>::from_promise(*this)); }
  void return_value(T& value) noexcept { value_ = &value; }
  T& result() {
    if (error_) std::rethrow_exception(error_);
    return *value_;
  }

 private:
  T* value_ = nullptr;
};

template <>
class TaskPromise<void> final : public TaskPromiseBase {
 public:
  Task<void> get_return_object() noexcept;
  void return_void() noexcept {}
  void result() {
    if (error_) std::rethrow_exception(error_);
  }
};

/// The TaskContext of the coroutine `awaiting`: its own if it is a Task,
/// null for any other coroutine. For awaiters, in await_suspend. Never throws.
template <class Promise>
TaskContext* taskContextOf(std::coroutine_handle<Promise> awaiting) noexcept {
  if constexpr (std::is_base_of_v<TaskPromiseBase, Promise>) {
    return awaiting.promise().context();
  } else {
    return nullptr;
  }
}

/// What `co_await task` evaluates to. Starts the task by symmetric transfer,
/// in the awaiter's TaskContext.
template <class T>
class TaskAwaiter {
 public:
  explicit TaskAwaiter(std::coroutine_handle<TaskPromise<T>> handle) noexcept : handle_(handle) {}
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> awaiter) noexcept {
    TaskPromise<T>& child = handle_.promise();
    TaskContext* const context = taskContextOf(awaiter);
    child.setContext(context);  // one pointer: the child runs for the parent's task
    child.setContinuation(awaiter);
    task_ = taskOf(context);
    return transferTo(handle_);
  }
  decltype(auto) await_resume() {
    setCurrentTask(task_);  // the awaiter goes on: its task's code again (see currentTask())
    return handle_.promise().result();
  }

 private:
  std::coroutine_handle<TaskPromise<T>> handle_;
  TaskCore* task_ = nullptr;
};

inline Task<void> TaskPromise<void>::get_return_object() noexcept {
  return Task<void>(std::coroutine_handle<TaskPromise>::from_promise(*this));
}

}  // namespace coexec::detail
