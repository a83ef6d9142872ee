#pragma once

#include <coroutine>

#include "coexec/Export.h"

namespace coexec::detail {

/// Where a suspended coroutine resumes: a pool, or the run loop of syncWait().
/// Every thread has a current scheduler (null on plain threads); an awaiter
/// records it when its coroutine suspends and resumes the coroutine there.
class COEXEC_EXPORT Scheduler {
 public:
  /// Resumes `handle` on one of this scheduler's threads. Continuations are
  /// admitted work: never rejected. Never blocks; never throws.
  virtual void post(std::coroutine_handle<> handle) noexcept = 0;

 protected:
  ~Scheduler() = default;
};

/// The scheduler of the calling thread, or null.
COEXEC_EXPORT Scheduler* currentScheduler() noexcept;
/// Makes `scheduler` current on the calling thread; returns the previous one.
COEXEC_EXPORT Scheduler* exchangeCurrentScheduler(Scheduler* scheduler) noexcept;
/// An identity for "the pool whose thread this is", or null.
COEXEC_EXPORT const void* currentPoolIdentity() noexcept;

/// Resumes `handle` for `scheduler`: inline when the calling thread already
/// belongs to it (or it is null), otherwise posted to it.
inline void resumeFor(Scheduler* scheduler, std::coroutine_handle<> handle) noexcept {
  if (scheduler == nullptr || scheduler == currentScheduler()) {
    handle.resume();
  } else {
    scheduler->post(handle);
  }
}

}  // namespace coexec::detail
