// SPDX-License-Identifier: BSL-1.0
#pragma once

// How the lanes (SerialExecutor, KeyedExecutor) reach what a pool keeps
// private: making a task the way submit() does, linking it to the submitting
// task at submission, and admitting it later without the rejection policy.
// One friend of ThreadPoolExecutor.

#include <exception>
#include <utility>

#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/PendingTask.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/ResultCore.h"

namespace coexec::detail {

struct LaneAccess {
  /// A task as submit() makes it (a Future may observe it), not yet linked
  /// nor admitted. \throws as submit() does for an empty callable or Task,
  /// or a started Task.
  template <class F>
  static PendingTask makeTask(F&& f, const char* operation) {
    return ThreadPoolExecutor::makeTask<true>(std::forward<F>(f), 0, operation);
  }
  /// A PendingTask holding `core` (adopts the caller's reference).
  static PendingTask adopt(TaskCore* core) noexcept { return ThreadPoolExecutor::adoptTask(core); }
  /// The typed state of a task made by makeTask(): a new reference.
  template <class R>
  static Ref<ResultCore<R>> resultCore(const PendingTask& task) noexcept {
    return ThreadPoolExecutor::resultCoreOf<R>(task);
  }
  /// A Future observing `core`.
  template <class R>
  static Future<R> future(Ref<ResultCore<R>> core) noexcept {
    return ThreadPoolExecutor::futureOf<R>(std::move(core));
  }
  /// Links `task` to the calling thread's current task and to `token`, as
  /// submit() does; false if either is cancelled already (the task has then
  /// settled as cancelled and is counted by `pool`). \throws std::bad_alloc.
  static bool linkToCaller(ThreadPoolExecutor& pool, PendingTask& task, const CancellationToken* token) {
    return pool.linkToCaller(task, token);
  }
  /// Admission without the rejection policy: takes `task` and returns true,
  /// or leaves it and counts a rejection.
  static bool tryAdmit(ThreadPoolExecutor& pool, PendingTask& task) { return pool.tryAdmit(task, true); }
  /// The error for a task tryAdmit() refused, with the reason and a snapshot.
  static RejectedExecution rejection(const ThreadPoolExecutor& pool, const PendingTask& task) {
    return pool.rejection(task);
  }
  static void reportUncaught(ThreadPoolExecutor& pool, const std::exception_ptr& error) noexcept {
    pool.reportUncaught(error);
  }
  static const void* identity(const ThreadPoolExecutor& pool) noexcept { return pool.identity(); }
};

}  // namespace coexec::detail
