// SPDX-License-Identifier: BSL-1.0
// whenTerminated(): coroutines waiting for a pool to be TERMINATED, without
// a thread. See detail/TerminationAwaiter.h for the contract.
//
// Everything is decided under the pool's mutex_, which guards the list of
// awaiters (Lifecycle::waiters, each awaiter's prev_/next_/linked_) and
// the lifecycle's hand-overs. Three parties meet there:
// - await_suspend (S): under mutex_, if the pool is not TERMINATED, arms
//   the timer (if any) and links the awaiter; after unlocking it touches
//   nothing of the awaiter (either party below may have resumed it).
// - the termination (T), in tryTerminateLocked once the state is
//   TERMINATED: unlinks every awaiter. An awaiter without a timer, or whose
//   timer it removes (TimerService::cancel succeeds: the callback will
//   never run), is T's to resume: T marks it terminated, and after every
//   awaiter is unlinked releases mutex_ and posts them to their schedulers.
//   An awaiter whose timer could not be removed is firing: its callback
//   (F) resumes it, and T takes a hold (a hand-over, Lifecycle.h) for F.
// - the timer's callback (F), on the firing thread: takes mutex_. If the
//   awaiter is still linked, the timeout came first: F unlinks it and
//   resumes it with false. If not, T unlinked it and left it to F: F drops
//   T's hold and resumes it with true.
// So exactly one of T and F resumes each awaiter, once.
//
// The pool outlives every use of it here: close() (the destructor) waits,
// under mutex_, for TERMINATED and no hand-over held. T holds one hold
// while it posts the awaiters with mutex_ released; F, before it takes
// mutex_, reaches a pool that is alive: either the awaiter is linked (the
// pool has not terminated: T must unlink it first) or T has unlinked it and
// holds a hold for F. Once TERMINATED no awaiter is linked, and nothing
// links one after (S sees TERMINATED).
//
// T never resumes a coroutine inline (it runs inside the pool's
// termination, with callers up the stack that will take mutex_ again): it
// posts to the recorded scheduler; only a coroutine with no scheduler is
// resumed on T's thread.

#include "coexec/ThreadPoolExecutor.h"

#include <stdexcept>

#include <fmt/format.h>

#include "coexec/detail/TerminationAwaiter.h"
#include "coexec/detail/Time.h"
#include "pool/PoolImpl.h"
#include "engine/TimerService.h"
#include "foundation/IntrusiveLinks.h"

namespace coexec {
namespace detail {

bool TerminationWait::suspend(std::coroutine_handle<> awaiting) {
  PoolImpl& p = *pool_;
  if (currentPool() == &p || (task_ != nullptr && task_->owner == &p)) {
    throw std::logic_error(fmt::format(
        "coexec::ThreadPoolExecutor::whenTerminated awaited on a thread or in a coroutine task of pool '{}' itself: "
        "the pool cannot terminate while it waits",
        p.name_));
  }
  parked_.record(awaiting, task_);  // outside mutex_: it may retain the coroutine's scheduler
  std::unique_lock lock(p.mutex_);
  if (p.life_.stateLocked() == PoolState::terminated || (timed_ && timeout_ <= std::chrono::nanoseconds::zero())) {
    terminated_ = p.life_.stateLocked() == PoolState::terminated;
    lock.unlock();
    parked_.forget();
    return false;
  }
  if (timed_) {
    TimerId timer;
    try {
      timer = p.timers_.schedule(deadlineOn(p.timers_.clock().now(), timeout_), &TerminationWait::onTimeout, this);
    } catch (...) {
      lock.unlock();
      parked_.forget();
      throw;  // not suspended: the coroutine goes on with the exception
    }
    hasTimer_ = true;
    timerSlot_ = timer.slot;
    timerGeneration_ = timer.generation;
  }
  IntrusiveLinks<TerminationWait, &TerminationWait::prev_, &TerminationWait::next_>::pushFront(p.life_.waiters, *this);
  linked_ = true;
  suspended_ = true;
  return true;  // T or F resumes it once mutex_ is released: `this` is not touched again here
}

bool TerminationWait::resumed() const noexcept {
  if (suspended_) setCurrentTask(task_);
  segmentGoesOn(task_);  // in a new run segment (RunSegments.h)
  return terminated_;
}

void TerminationWait::onTimeout(void* self) noexcept {
  auto* const awaiter = static_cast<TerminationWait*>(self);
  PoolImpl& p = *awaiter->pool_;
  ResumePoint parked;
  {
    std::lock_guard lock(p.mutex_);
    if (awaiter->linked_) {  // the timeout came first
      IntrusiveLinks<TerminationWait, &TerminationWait::prev_, &TerminationWait::next_>::unlink(p.life_.waiters,
                                                                                                *awaiter);
      awaiter->linked_ = false;
      awaiter->terminated_ = false;
    } else {  // T unlinked it and left it to us, with a hold
      awaiter->terminated_ = true;
      if (p.life_.endHandOverLocked()) p.life_.terminated.notify_all();
    }
    parked = awaiter->parked_;
  }
  // The pool may be gone now (it terminated and close() returned).
  parked.resume();
}

namespace {
void resumeHandle(void* address) noexcept { resume(std::coroutine_handle<>::from_address(address)); }

/// A coroutine with no scheduler (started on a plain thread) has nowhere to
/// be posted: it is resumed on the process-wide timer thread, due now, and
/// never on this thread, which holds the pool (a hand-over) while it
/// resumes the awaiters: that coroutine may destroy the pool, whose close()
/// waits for the hold. False if the timer service could not take it (out of
/// memory, no timer thread): the caller resumes it itself. Never throws.
bool resumeOnTimerThread(std::coroutine_handle<> handle) noexcept {
  try {
    TimerService& service = steadyTimerService();
    (void)service.schedule(service.clock().now(), &resumeHandle, handle.address());
    return true;
  } catch (...) {
    return false;
  }
}
}  // namespace

void PoolImpl::resumeTerminationWaitersLocked(std::unique_lock<std::mutex>& lock) {
  // Unlinks every awaiter; those T resumes go on a list through next_ (an
  // awaiter stays alive until it is resumed).
  TerminationWait* ours = nullptr;
  TerminationWait* awaiter = std::exchange(life_.waiters, nullptr);
  while (awaiter != nullptr) {
    TerminationWait* const following = awaiter->next_;
    awaiter->linked_ = false;
    if (awaiter->hasTimer_ && !timers_.cancel(TimerId{awaiter->timerSlot_, awaiter->timerGeneration_})) {
      life_.beginHandOverLocked();  // firing: F resumes it, and drops this hold
    } else {
      awaiter->terminated_ = true;
      awaiter->next_ = ours;
      ours = awaiter;
    }
    awaiter = following;
  }
  if (ours == nullptr) return;
  life_.beginHandOverLocked();  // close() waits until they are posted
  lock.unlock();
  while (ours != nullptr) {
    TerminationWait* const following = ours->next_;
    ResumePoint parked = ours->parked_;
    if (parked.scheduler() == nullptr && parked.recorded() && resumeOnTimerThread(parked.handle())) {
      ours = following;  // `ours` may be gone from here on
      continue;
    }
    {
      const NoInlineResumption posted;  // posted: `ours` may be gone from here on
      parked.resume();
    }
    ours = following;
  }
  lock.lock();
  (void)life_.endHandOverLocked();  // tryTerminateLocked notifies life_.terminated next
}

}  // namespace detail

detail::TerminationAwaiter<false> ThreadPoolExecutor::whenTerminated() noexcept {
  return detail::TerminationAwaiter<false>(*impl_);
}

detail::TerminationAwaiter<true> ThreadPoolExecutor::whenTerminated(std::chrono::nanoseconds timeout) noexcept {
  return detail::TerminationAwaiter<true>(*impl_, timeout);
}

}  // namespace coexec
