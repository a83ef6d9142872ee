// SPDX-License-Identifier: BSL-1.0
#pragma once

// Implementation of coexec::Task<T>: the promise and the awaiters, and on
// GCC 12 the refusal of Task parameters that take a lambda over.

#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <string_view>
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

class TaskPromiseBase {
 public:
  // Coroutine frames come from the FrameAllocator, in blocks aligned to their
  // size: C++20 passes a frame's size, not its alignment, to these, and a
  // frame may hold over-aligned locals.
  static void* operator new(std::size_t size) { return FrameAllocator::allocate(size); }
  static void operator delete(void* block, std::size_t size) noexcept { FrameAllocator::deallocate(block, size); }

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

/// 1 where a Task coroutine may not take over a lambda that is not trivially
/// destructible (see std::coroutine_traits<coexec::Task<T>, Params...> below):
/// on GCC 12 and older, unless COEXEC_ALLOW_GCC12_CLOSURE_PARAMETERS is
/// defined.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ <= 12 && !defined(COEXEC_ALLOW_GCC12_CLOSURE_PARAMETERS)
#define COEXEC_DETAIL_REFUSE_CLOSURE_PARAMETERS 1
#else
#define COEXEC_DETAIL_REFUSE_CLOSURE_PARAMETERS 0
#endif

#if COEXEC_DETAIL_REFUSE_CLOSURE_PARAMETERS
namespace coexec::detail {

/// GCC's __PRETTY_FUNCTION__ for T: "... prettyTypeName() [with T = <T>]".
template <class T>
constexpr const char* prettyTypeName() noexcept {
  return __PRETTY_FUNCTION__;
}

/// True if `T` (no reference, no cv) is a lambda's closure type. The
/// language has no trait for it; GCC names every closure type
/// "<scope>::<lambda(<parameters>)>" and no other type ends in such a group,
/// so this reads the name GCC gives `T`. A class with an operator() of its
/// own (std::function among them) is no closure: GCC builds its temporaries
/// with a constructor, and destroys them once.
template <class T>
constexpr bool isClosureType() noexcept {
  constexpr std::string_view pretty = prettyTypeName<T>();
  constexpr std::string_view prefix = "[with T = ";
  const std::size_t start = pretty.find(prefix);
  if (start == std::string_view::npos || !pretty.ends_with("]")) return false;
  const std::string_view name = pretty.substr(start + prefix.size(), pretty.size() - 1 - start - prefix.size());
  if (!name.ends_with(">")) return false;
  // The '<' that opens the last template-argument-like group of the name.
  int depth = 0;
  std::size_t open = name.size();
  while (open > 0) {
    --open;
    if (name[open] == '>') {
      ++depth;
    } else if (name[open] == '<' && --depth == 0) {
      break;
    }
  }
  if (depth != 0) return false;
  return name.substr(open).starts_with("<lambda(") && (open == 0 || name.substr(0, open).ends_with("::"));
}

/// True for a coroutine parameter of declared type `P` through which a Task
/// takes over a lambda that GCC 12 frees twice when the lambda is written
/// inside a co_await expression: `P` is not an lvalue reference (it is the
/// closure itself or an rvalue reference to it, which a temporary and
/// std::move of a named lambda alike bind to: the two cannot be told apart)
/// and the closure is not trivially destructible (a capture owns something).
/// Asks no more of `P` than it must: a coroutine lambda's own closure type,
/// its implicit object parameter, is incomplete here.
template <class P>
constexpr bool takesOverOwningClosure() noexcept {
  using Closure = std::remove_cvref_t<P>;
  if constexpr (std::is_lvalue_reference_v<P> || !std::is_class_v<Closure>) {
    return false;
  } else if constexpr (!isClosureType<Closure>()) {
    return false;
  } else {
    return !std::is_trivially_destructible_v<Closure>;
  }
}

}  // namespace coexec::detail

/// The promise of a Task coroutine, Task::promise_type as without this
/// specialization. On GCC 12 and older it also refuses, at compile time, a
/// Task coroutine with a parameter for which
/// coexec::detail::takesOverOwningClosure() holds, such as `template <class F>
/// Task<R> offload(ThreadPoolExecutor& pool, F f)` given `[s] {...}` with `s`
/// a std::string: called as `co_await offload(pool, [s] {...})`, GCC 12 frees
/// the copy of `s` twice. Accepted: parameters of lvalue reference type (`F&`,
/// `const F&`, and `F&&` given a named lambda), and lambdas that are
/// trivially destructible (capture-less, or capturing references, pointers
/// and integers). Defining COEXEC_ALLOW_GCC12_CLOSURE_PARAMETERS turns the
/// refusal off. See docs/coroutines.md, "GCC 12 bugs and the safe forms".
template <class T, class... Params>
struct std::coroutine_traits<coexec::Task<T>, Params...> {
  static_assert(!(coexec::detail::takesOverOwningClosure<Params>() || ...),
                "coexec: GCC 12 miscompiles temporaries in a co_await expression; name the lambda first, or capture "
                "by reference: auto work = [s] {...}; co_await offload(pool, work); with the parameter taken by "
                "reference, template <class F> Task<R> offload(ThreadPoolExecutor& pool, F&& f), or [&s] {...}  "
                "(refused because this Task coroutine takes a lambda that is not trivially destructible by value or "
                "as an rvalue: written inside a co_await expression, as in co_await offload(pool, [s] {...}), it is "
                "destroyed twice by GCC 12, and a capture that owns memory, such as a std::string, is freed twice. "
                "COEXEC_ALLOW_GCC12_CLOSURE_PARAMETERS turns this check off. See docs/coroutines.md, \"GCC 12 bugs "
                "and the safe forms\")");
  using promise_type = coexec::detail::TaskPromise<T>;
};
#endif
