// SPDX-License-Identifier: BSL-1.0
// FanIn: how the children of a combinator settle into the awaiter, and who
// resumes the awaiting coroutine.
//
// Holds. holds_ counts what may still touch the awaiter: each unsettled
// child (reserved together before the first starts; those a stop kept from
// starting are given back by finishArming), the arming thread (until
// finishArming), a pending timer (until it
// has fired and done its work, or was removed), and each cancellation
// callback at work (tryHold: only while the count is not zero, so that a
// callback arriving after the end touches nothing). Whoever brings it to
// zero resumes the coroutine, exactly once, and touches nothing of the
// awaiter afterwards (it may be destroyed at once). Every other party
// touches the awaiter only while it holds.
//
// Stopping. The first of a child's failure (or success, or completion, by
// the rule), the deadline, the awaiting task's cancellation and a refused
// start wins the CAS on stop_; only the winner asks for cancelChildren().
// While arming, the children's slots are still being written, so the
// request is deferred: phase_ gets kCancelRequested, and finishArming, which
// sets kArmed, runs it; after arming the winner runs it at once. Either
// way it runs once, with a hold taken.
//
// The timer (with a timeout only). children_ counts unsettled children plus
// arming. Whoever
// brings it to zero removes the timer; if that succeeds, the timer's hold is
// released on its behalf; if not, the timer is firing and releases its hold
// itself. A timer that fires while a child is unsettled stops the others
// with timedOut.
//
// Where the coroutine resumes: where it was running when it suspended, as
// after `co_await future` (resumeFor: inline if the releasing thread belongs
// to that scheduler, else posted). A release from the timer or from the
// awaiting task's cancellation callback always posts (unless there is no
// scheduler): the coroutine must not run inside Future::cancel() or on the
// timer thread.

#include "coexec/detail/FanIn.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "coexec/Errors.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/CombinatorAccess.h"
#include "engine/TimerService.h"

namespace coexec::detail {

FanIn::~FanIn() { registration_.reset(); }

bool FanIn::beginArming(std::coroutine_handle<> awaiting, TaskContext* parent, bool timed,
                        IfParentCancelled ifCancelled) {
  bool cancelledAlready = false;
  if (parent != nullptr) {
    parentToken_ = parent->cancellationToken();  // may throw std::bad_alloc: nothing started
    if (parentToken_.isCancellationRequested()) {
      if (ifCancelled == IfParentCancelled::startNothing) {
        stop_.store(StopReason::parentCancelled, std::memory_order_relaxed);
        return false;
      }
      cancelledAlready = true;
    }
  }
  resumeAt_.record(awaiting, taskOf(parent));
  timed_ = timed;
  holds_.store(1, std::memory_order_relaxed);  // arming's
  children_.store(1, std::memory_order_relaxed);
  // Children run already (Futures): they are watched, then cancelled by
  // finishArming() (the request is deferred while arming), and waited for.
  if (cancelledAlready) stop(StopReason::parentCancelled, 0);
  return true;
}

void FanIn::prepareTaskChildren() {
  if (!childSource_) childSource_.emplace();
}

void FanIn::refuse(std::exception_ptr error) noexcept {
  if (!refusal_) refusal_ = std::move(error);
  stop(StopReason::refused, 0);
}

void FanIn::armTimeout(ThreadPoolExecutor& pool, Clock::time_point deadline) {
  const Clock& clock = pool.clock();
  if (clock.now() < deadline) {
    TimerService& service = CombinatorAccess::timerService(pool);
    holds_.fetch_add(1, std::memory_order_relaxed);  // the timer's, until it fired or was removed
    TimerId timer;
    try {
      timer = service.schedule(deadline, &FanIn::onTimer, this);
    } catch (...) {
      holds_.fetch_sub(1, std::memory_order_relaxed);  // arming still holds one: never zero here
      throw;
    }
    timerService_ = &service;
    timerSlot_ = timer.slot;
    timerGeneration_ = timer.generation;
    // Still ahead: the timer fires then. Passed since we looked (a
    // ManualClock advanced meanwhile: a timer already due would wait for
    // the next advance()), and the timer is removed: the deadline applies
    // now. If it cannot be removed, it is firing: it applies it.
    if (clock.now() < deadline || !service.cancel(timer)) return;
    timerService_ = nullptr;
    holds_.fetch_sub(1, std::memory_order_relaxed);  // the timer's; arming still holds one
  }
  // The deadline passed while the children were handed over. acquire:
  // children_ counts arming's hold too.
  if (children_.load(std::memory_order_acquire) > 1) stop(StopReason::timedOut, 0);
}

bool FanIn::finishArming(std::size_t unstarted) noexcept {
  if (parentToken_.canBeCancelled()) {
    try {
      // Runs onParentCancelled() at once if the token was cancelled since
      // beginArming(): it takes a hold (arming's is there) and defers the
      // cancellation to the lines below.
      registration_.emplace(parentToken_, [this] { onParentCancelled(); });
    } catch (...) {
      refuse(std::current_exception());
    }
  }
  // acq_rel: a stop's winner that sees kArmed sees the children's slots.
  if ((phase_.fetch_or(kArmed, std::memory_order_acq_rel) & kCancelRequested) != 0) cancelChildren();
  if (timed_ && children_.fetch_sub(1 + unstarted, std::memory_order_acq_rel) == 1 + unstarted) childrenDone();
  // acq_rel: the last release sees every child's result.
  if (holds_.fetch_sub(1 + unstarted, std::memory_order_acq_rel) != 1 + unstarted)
    return true;                         // someone else resumes it
  resumeAt_.forget();  // every child settled while arming: go on here
  return false;
}

void FanIn::childSettled(bool failed, std::size_t index) noexcept {
  switch (rule_) {
    case StopRule::onFailure:
      if (failed) stop(StopReason::childFailed, index);
      break;
    case StopRule::onSuccess:
      if (!failed) stop(StopReason::childSucceeded, index);
      break;
    case StopRule::onCompletion: stop(StopReason::childCompleted, index); break;
  }
  if (timed_ && children_.fetch_sub(1, std::memory_order_acq_rel) == 1) childrenDone();
  release(/*mayResumeInline=*/true);
}

bool FanIn::stop(StopReason reason, std::size_t index) noexcept {
  StopReason expected = StopReason::none;
  if (!stop_.compare_exchange_strong(expected, reason, std::memory_order_acq_rel, std::memory_order_acquire)) {
    return false;
  }
  stopIndex_ = index;  // read after the resumption, which our hold precedes
  if ((phase_.fetch_or(kCancelRequested, std::memory_order_acq_rel) & kArmed) != 0) cancelChildren();
  return true;
}

bool FanIn::tryHold() noexcept {
  std::size_t holds = holds_.load(std::memory_order_acquire);
  while (holds != 0) {
    if (holds_.compare_exchange_weak(holds, holds + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return true;
    }
  }
  return false;  // resumed already (or about to be): nothing left to cancel
}

void FanIn::release(bool mayResumeInline) noexcept {
  // acq_rel: the last release sees every other party's writes, and the
  // resumed coroutine sees them through it.
  if (holds_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (mayResumeInline) {
    resumeAt_.resume();  // the awaiter may be gone once resumed
  } else {
    const NoInlineResumption posted;
    resumeAt_.resume();
  }
}

void FanIn::childrenDone() noexcept {
  // The thread that settled the last child (or finished arming): the timer
  // is of no use any more. If it is firing, it releases its own hold.
  if (timerService_ != nullptr && timerService_->cancel(TimerId{timerSlot_, timerGeneration_})) release(true);
}

void FanIn::onParentCancelled() noexcept {
  if (!tryHold()) return;
  stop(StopReason::parentCancelled, 0);
  release(/*mayResumeInline=*/false);  // never inside the canceller's requestCancellation()
}

void FanIn::onTimer(void* self) noexcept {
  auto* fanIn = static_cast<FanIn*>(self);
  // The timer's hold keeps the awaiter alive. A child still unsettled (or
  // arming still going on): the deadline wins, unless something else stopped
  // the children first.
  if (fanIn->children_.load(std::memory_order_acquire) != 0) fanIn->stop(StopReason::timedOut, 0);
  fanIn->release(/*mayResumeInline=*/false);
}

CancellationToken FanIn::cancellationToken() { return childSource_ ? childSource_->token() : CancellationToken(); }

void throwCombinatorTimeout(const char* operation, Clock::duration timeout) {
  throw TimeoutError(
      fmt::format("coexec::{}: the timeout of {} passed before every task finished; the unfinished ones were "
                  "cancelled and have settled",
                  operation, std::chrono::duration<double, std::milli>(timeout)));
}

}  // namespace coexec::detail
