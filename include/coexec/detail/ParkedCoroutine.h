// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <coroutine>

#include "coexec/detail/Scheduler.h"

namespace coexec::detail {

/// A suspended coroutine and where it resumes: the scheduler of the thread
/// it suspended on (kept alive while recorded, as FutureAwaiter does), as
/// asCompleted's next() and TaskGroup's join() park their awaiter. A plain
/// value: whoever takes it out of the shared state resumes it, once.
struct ParkedCoroutine {
  std::coroutine_handle<> handle;
  Scheduler* scheduler = nullptr;
  bool retained = false;

  /// Records `awaiting`, whose task is `awaitingTask` (null for a coroutine
  /// of no task), and the calling thread's scheduler (held as
  /// Scheduler::retain() decides). Never throws.
  void park(std::coroutine_handle<> awaiting, const TaskCore* awaitingTask) noexcept {
    scheduler = currentScheduler();
    retained = scheduler != nullptr && scheduler->retain(awaitingTask);
    handle = awaiting;
  }
  /// For a park that did not suspend after all: lets the scheduler go.
  void cancelPark() noexcept {
    if (retained) scheduler->release();
    *this = ParkedCoroutine();
  }
  /// Resumes the coroutine, if one was parked: inline if `mayRunInline` and
  /// the calling thread belongs to its scheduler (or it has none), else
  /// posted there. Never throws.
  void resume(bool mayRunInline) noexcept {
    if (!handle) return;
    Scheduler* const where = scheduler;
    const bool release = retained;
    if (mayRunInline) {
      resumeFor(where, handle);
    } else if (where != nullptr) {
      where->post(handle);
    } else {
      coexec::detail::resume(handle);
    }
    if (release) where->release();
  }
};

}  // namespace coexec::detail
