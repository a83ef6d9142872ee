// SPDX-License-Identifier: BSL-1.0
#pragma once

// How the combinators (invokeAll/invokeAny, whenAll/whenAny, asCompleted,
// TaskGroup) reach what a pool and a Future keep private: making and
// admitting a task the way submit() does, the state behind a Future, the
// pool's timer service and its uncaught-exception handler. One friend of
// ThreadPoolExecutor, so that each combinator needs none.

#include <cstddef>
#include <exception>
#include <utility>

#include "coexec/Future.h"
#include "coexec/PendingTask.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/ResultCore.h"

namespace coexec::detail {

struct CombinatorAccess {
  /// A task as submit() makes it (a Future observes it), not yet admitted.
  /// \throws as submit() does for an empty callable or Task, or a started Task.
  template <class F>
  static PendingTask makeTask(F&& f, const char* operation) {
    return ThreadPoolExecutor::makeTask<true>(std::forward<F>(f), 0, operation);
  }
  /// \throws std::invalid_argument naming `operation`: the error for an empty callable.
  [[noreturn]] static void throwEmptyCallable(const char* operation) {
    ThreadPoolExecutor::throwEmptyCallable(operation);
  }
  /// Admission, then the rejection policy, as submit(). \throws what submit() throws.
  static void admit(ThreadPoolExecutor& pool, PendingTask task) { pool.admit(std::move(task)); }

  /// The typed state of a task made by makeTask(): a new reference.
  template <class R>
  static Ref<ResultCore<R>> resultCore(const PendingTask& task) noexcept {
    return ThreadPoolExecutor::resultCoreOf<R>(task);
  }
  /// The state behind `future`, or null if it is empty.
  template <class R>
  static ResultCore<R>* core(const Future<R>& future) noexcept {
    return ThreadPoolExecutor::coreOf(future);
  }
  /// A Future observing `core`.
  template <class R>
  static Future<R> future(Ref<ResultCore<R>> core) noexcept {
    return ThreadPoolExecutor::futureOf<R>(std::move(core));
  }

  /// \throws RejectedExecution if `pool` is shut down (nothing is started;
  /// the `tasks` refused count in rejectedCount).
  static void throwIfShutdown(ThreadPoolExecutor& pool, const char* operation, std::size_t tasks) {
    pool.throwIfShutdown(operation, tasks);
  }
  static TimerService& timerService(ThreadPoolExecutor& pool) noexcept { return pool.timerService(); }
  static void reportUncaught(ThreadPoolExecutor& pool, const std::exception_ptr& error,
                             bool unobserved = false) noexcept {
    pool.reportUncaught(error, unobserved);
  }
  static const void* identity(const ThreadPoolExecutor& pool) noexcept { return pool.identity(); }
};

}  // namespace coexec::detail
