// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <coroutine>
#include <string_view>
#include <utility>

#include "coexec/Export.h"
#include "coexec/detail/FrameAllocator.h"

namespace coexec {

template <class T>
class Task;

namespace detail {
template <class T>
class TaskPromise;
template <class T>
class TaskAwaiter;

/// The one check every way of starting a Task goes through (co_await,
/// syncWait, a pool's submit/execute): returns the handle of `task` if it can
/// start now. `scope` and `operation` name the caller in the message
/// ("ThreadPoolExecutor::", "submit"). Never blocks.
/// \throws std::invalid_argument (a std::logic_error) if `task` is empty
/// (default-constructed or moved from). \throws std::logic_error if it was
/// already started: awaited, run by syncWait or submitted to a pool (running
/// it again would resume a coroutine that is running or has finished).
template <class T>
std::coroutine_handle<TaskPromise<T>> startableHandle(const Task<T>& task, std::string_view scope,
                                                      std::string_view operation);
}  // namespace detail

/// A lazy coroutine producing a `T` (a value, a reference, or void).
///
/// Nothing runs until the Task is awaited (`co_await task`), submitted to a
/// pool (`pool.submit(std::move(task))`) or run by `syncWait(task)`. Awaiting
/// starts it on the awaiting thread, and when it finishes the awaiter
/// continues; both transfers go through a per-thread trampoline
/// (detail::transferTo), so a chain of tasks that complete synchronously runs
/// in constant stack space at every optimisation level and under sanitizers,
/// whether or not the compiler turns symmetric transfer into a tail call.
/// `co_await task` returns the value or rethrows the task's exception.
///
/// A Task is started at most once, by one of those three: starting it again
/// (or starting an empty Task) throws std::logic_error. Destroying a Task that
/// was never started destroys its coroutine frame without running it.
///
/// Where the code runs: a Task runs on the thread that awaits it, and after
/// each `co_await` of a Future or of `resumeOn()` on the executor recorded
/// when it suspended (see docs/coroutines.md, "Where code resumes").
///
/// Thread safety: a Task is a move-only handle owned by one thread at a time.
template <class T = void>
class [[nodiscard]] Task {
 public:
  /// The coroutine promise, for the compiler; not part of the API.
  using promise_type = detail::TaskPromise<T>;
  /// `T`: what `co_await` of the Task returns.
  using value_type = T;

  /// An empty Task (`valid() == false`).
  Task() noexcept = default;
  /// Takes over `other`'s coroutine; `other` is left empty. Never blocks.
  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  /// Destroys this Task's coroutine frame, as the destructor does, then takes
  /// over `other`'s coroutine; `other` is left empty. Never blocks.
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  /// Destroys the coroutine frame (never runs it). Never blocks.
  ~Task() { destroy(); }

  /// Starts the task on this thread and suspends the awaiter until it
  /// finishes; returns its value or rethrows its exception.
  /// \throws std::invalid_argument (a std::logic_error) if the Task is empty;
  /// std::logic_error if it was already started (awaited, run by syncWait or
  /// submitted to a pool).
  detail::TaskAwaiter<T> operator co_await() && {
    return detail::TaskAwaiter<T>(detail::startableHandle(*this, "Task::", "operator co_await"));
  }
  /// Same as the rvalue form: a Task lvalue may be awaited once.
  detail::TaskAwaiter<T> operator co_await() & {
    return detail::TaskAwaiter<T>(detail::startableHandle(*this, "Task::", "operator co_await"));
  }

  /// False for an empty or moved-from Task.
  [[nodiscard]] bool valid() const noexcept { return static_cast<bool>(handle_); }

  /// The coroutine handle (for executors and tests). The Task keeps ownership.
  [[nodiscard]] std::coroutine_handle<promise_type> handle() const noexcept { return handle_; }

 private:
  friend promise_type;
  explicit Task(std::coroutine_handle<promise_type> handle) noexcept : handle_(handle) {}

  void destroy() noexcept {
    if (handle_) handle_.destroy();
    handle_ = {};
  }

  std::coroutine_handle<promise_type> handle_;
};

namespace detail {

/// Throws the error startableHandle() describes. Never returns.
[[noreturn]] COEXEC_EXPORT void throwUnstartableTask(std::string_view scope, std::string_view operation, bool empty);

template <class T>
std::coroutine_handle<TaskPromise<T>> startableHandle(const Task<T>& task, std::string_view scope,
                                                      std::string_view operation) {
  const std::coroutine_handle<TaskPromise<T>> handle = task.handle();
  if (!handle) throwUnstartableTask(scope, operation, /*empty=*/true);
  if (handle.promise().started()) throwUnstartableTask(scope, operation, /*empty=*/false);
  return handle;
}

}  // namespace detail
}  // namespace coexec

#include "coexec/detail/TaskPromise.h"
