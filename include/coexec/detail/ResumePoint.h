// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstdint>
#include <coroutine>

#include "coexec/detail/Scheduler.h"

namespace coexec::detail {

class TaskCore;

/// Where a suspended coroutine resumes: every coexec awaiter that suspends a
/// coroutine until something else happens (a Future settles, a timer fires,
/// the children of a fan-in settle, room frees up, a pool terminates, a
/// group's children finish) records it here and resumes it through it.
///
/// - record() notes the coroutine and the scheduler of the thread it
///   suspends on, and takes the hold the awaiting coroutine itself needs:
///   Scheduler::retain(awaitingTask), decided from the coroutine's own task
///   (null for a coroutine of no task), never from the thread.
/// - resume() resumes it once, by resumeFor()'s one rule: inline on a thread
///   of its scheduler, posted there otherwise, and always posted while a
///   NoInlineResumption is alive on the calling thread (inside a
///   cancellation or a settle that user code called, a caller holds one);
///   then it lets the hold go.
/// - forget() lets the hold go for a record whose coroutine did not suspend
///   after all (the awaiter goes on at once, on the recording thread).
///
/// Two words, a plain value: it may be copied out of shared state and
/// resumed from the copy. Exactly one of resume() and forget() is called per
/// record(). Not thread-safe: whoever resumes it owns it.
class ResumePoint {
 public:
  /// Records `awaiting` and `scheduler` (by default the calling thread's),
  /// held as Scheduler::retain(awaitingTask) decides. Never throws.
  void record(std::coroutine_handle<> awaiting, const TaskCore* awaitingTask,
              Scheduler* scheduler = currentScheduler()) noexcept {
    const bool retained = scheduler != nullptr && scheduler->retain(awaitingTask);
    scheduler_ = reinterpret_cast<std::uintptr_t>(scheduler) | (retained ? kRetained : 0);
    handle_ = awaiting;
  }

  /// For a record whose coroutine did not suspend: lets the scheduler go and
  /// empties this. Never throws.
  void forget() noexcept {
    if ((scheduler_ & kRetained) != 0) scheduler()->release();
    *this = ResumePoint();
  }

  /// Resumes the recorded coroutine (nothing if none), as the class comment
  /// says. This object may be destroyed by the resumption (it often lives
  /// in the coroutine's frame): nothing of it is read after. Never throws.
  void resume() noexcept {
    if (!handle_) return;
    Scheduler* const where = scheduler();
    const bool retained = (scheduler_ & kRetained) != 0;
    resumeFor(where, handle_);
    if (retained) where->release();
  }

  /// True once record() ran (until forget()).
  [[nodiscard]] bool recorded() const noexcept { return static_cast<bool>(handle_); }
  /// The recorded coroutine, or null.
  [[nodiscard]] std::coroutine_handle<> handle() const noexcept { return handle_; }
  /// The recorded scheduler, or null.
  [[nodiscard]] Scheduler* scheduler() const noexcept { return reinterpret_cast<Scheduler*>(scheduler_ & ~kRetained); }

 private:
  static constexpr std::uintptr_t kRetained = 1;  // in scheduler_ (a Scheduler is aligned to 8): retain() succeeded

  std::uintptr_t scheduler_ = 0;  // Scheduler* | kRetained
  std::coroutine_handle<> handle_;
};

}  // namespace coexec::detail
