// SPDX-License-Identifier: BSL-1.0
// sleepFor / sleepUntil: a suspended coroutine waits in the timer service of
// the scheduler it runs on (or the process-wide steady one); the timer's
// callback, or the cancellation of the coroutine's task token, hands it back
// to that scheduler.
//
// Three parties meet in state_, each once, each by one fetch_or of its own
// bit (so they are totally ordered, and each sees who came before it):
// - await_suspend (S), after it has registered for cancellation and
//   scheduled the timer: kSuspended;
// - the timer's callback fire() (F), on the firing thread: kFired;
// - the registration's callback cancel() (C), on the cancelling thread:
//   kCancelled.
// Exactly one of them resumes the coroutine (S by returning false):
// - F or C arriving before kSuspended does nothing more: S decides. S seeing
//   kFired does not suspend. S seeing kCancelled alone removes the timer; if
//   that fails the timer is firing, so S suspends and F resumes.
// - After kSuspended, the first of F and C wins. F resumes (with
//   OperationCancelled if C came first). C removes the timer: if that
//   succeeds F never runs and C resumes; if it fails F is firing and will
//   resume (it sees kCancelled).
// F only runs if the timer was not removed, and a removal after F started
// fails, so "C's removal failed" and "F resumes" always go together.
//
// A scheduler with timers of its own (Scheduler::sleepTimers(), an
// io_context's) has timers that cannot be removed, only made to fire at
// once (fireNow): there S and C never win by removal; they fire the timer,
// and F, seeing kCancelled, resumes with OperationCancelled. The handle
// stays valid while held: the awaiter's hold is dropped after registration_
// (so C may use it), and S holds it for the length of await_suspend.
//
// Nothing touches the awaiter once the coroutine may have resumed: after
// setting kSuspended, S uses only locals until it knows it keeps the
// coroutine (it returns false), since F or C may resume it the moment that
// bit is set; F and C touch the awaiter only when they are the one to
// resume, or before anyone can. One exception, on purpose: C, having
// set kCancelled after kSuspended, reads service_ and the timer id while F
// may be resuming the coroutine on another thread. That is safe because the
// awaiter's registration_ is its first member to be destroyed, and
// CancellationRegistration's destructor blocks while its callback runs on
// another thread: the awaiter (and the frame around it) outlives C.
//
// That wait (the resumed coroutine, leaving the co_await, blocks until C
// returns) is short and cannot deadlock: C, once it has lost, only takes the
// timer service's mutex (in cancel()), which nobody holds while a coroutine
// runs (timer callbacks run unlocked), and returns. C that wins posts the
// coroutine and returns at once; a worker that picks the coroutine up first
// waits for that return. When C resumes the coroutine inline (no scheduler,
// or a pool that has terminated, whose post() runs it on the caller), the
// coroutine destroys the registration on C's own thread, and the destructor
// does not wait.

#include "coexec/Sleep.h"

#include "coexec/Clock.h"
#include "coexec/Errors.h"
#include "engine/TimerService.h"

namespace coexec {
namespace detail {

bool SleepAwaiter::suspend(std::coroutine_handle<> awaiting, TaskContext* context) {
  CancellationToken token;
  if (context != nullptr) {
    token = context->cancellationToken();  // may throw std::bad_alloc: not suspended
    if (token.isCancellationRequested()) {
      cancelled_ = true;
      return false;
    }
  }
  Scheduler* const scheduler = currentScheduler();
  SleepTimers* const foreign = scheduler != nullptr ? scheduler->sleepTimers() : nullptr;
  TimerService* service = scheduler != nullptr && foreign == nullptr ? scheduler->timerService() : nullptr;
  const Clock::time_point now = service != nullptr ? service->clock().now() : steadyClock().now();
  const Clock::time_point deadline = relative_ ? saturatedAdd(now, delay_) : deadline_;
  if (deadline <= now) return false;
  if (service == nullptr && foreign == nullptr) service = &steadyTimerService();  // may throw std::system_error

  resumeAt_.record(awaiting, taskOf(context), scheduler);
  service_ = service;
  TimerId timer;
  try {
    if (token.canBeCancelled()) {
      // Runs cancel() at once if the token was cancelled since we looked: it
      // finds no kSuspended and leaves the decision to us.
      registration_.emplace(token, [this] { cancel(); });
      if ((state_.load(std::memory_order_acquire) & kCancelled) != 0) {
        resumeAt_.forget();
        cancelled_ = true;
        return false;  // no timer to remove
      }
    }
    if (foreign != nullptr) {
      foreign_.handle = foreign->arm(deadline, &SleepAwaiter::fire, this);
      foreign_.timers = foreign;
    } else {
      timer = service->schedule(deadline, &SleepAwaiter::fire, this);
    }
  } catch (...) {
    registration_.reset();  // waits for a cancel() running on another thread: it did nothing (no kSuspended)
    resumeAt_.forget();
    throw;  // not suspended: the coroutine goes on with the exception
  }
  timerSlot_ = timer.slot;
  timerGeneration_ = timer.generation;
  suspended_ = true;  // undone below on the paths that do not suspend
  // A foreign timer's handle, held for this call: the awaiter's own hold
  // may go with the coroutine as soon as kSuspended is set.
  void* const foreignTimer = foreign_.handle;
  if (foreignTimer != nullptr) foreign->hold(foreignTimer);
  struct DropHold {
    SleepTimers* timers;
    void* timer;
    ~DropHold() {
      if (timer != nullptr) timers->release(timer);
    }
  } dropHold{foreign, foreignTimer};

  // acq_rel: publishes the fields above to F and C (which read them after
  // seeing kSuspended), and lets us see what an earlier F or C saw.
  const std::uint8_t before = state_.fetch_or(kSuspended, std::memory_order_acq_rel);
  if (before == 0) return true;  // F or C resumes the coroutine, maybe already
  if ((before & kFired) != 0) {  // due while we armed: go on (with the cancellation if it came too)
    resumeAt_.forget();
    cancelled_ = (before & kCancelled) != 0;
    suspended_ = false;
    return false;
  }
  // Cancelled while we armed, timer pending or firing.
  if (foreignTimer != nullptr) {
    foreign->fireNow(foreignTimer);  // cannot be removed: F comes soon, sees kCancelled, and resumes
    return true;
  }
  if (!service->cancel(timer)) return true;  // firing: F sees kSuspended and kCancelled, and resumes
  resumeAt_.forget();
  cancelled_ = true;
  suspended_ = false;
  return false;
}

void SleepAwaiter::fire(void* self) noexcept {
  auto* awaiter = static_cast<SleepAwaiter*>(self);
  const std::uint8_t before = awaiter->state_.fetch_or(kFired, std::memory_order_acq_rel);
  if ((before & kSuspended) == 0) return;  // await_suspend is still arming: it sees kFired and does not suspend
  // Ours to resume: C, if it came first, could not remove the timer.
  awaiter->cancelled_ = (before & kCancelled) != 0;
  awaiter->resumeAt_.resume();  // the awaiter may be gone once resumed
}

void SleepAwaiter::cancel() noexcept {
  const std::uint8_t before = state_.fetch_or(kCancelled, std::memory_order_acq_rel);
  if (before != kSuspended) return;  // arming (await_suspend decides) or fired (F resumes)
  // Read while F may be resuming the coroutine: see the top of this file.
  if (foreign_.handle != nullptr) {
    foreign_.timers->fireNow(foreign_.handle);  // cannot be removed: F comes soon, sees kCancelled, and resumes
    return;
  }
  if (!service_->cancel(TimerId{timerSlot_, timerGeneration_})) return;  // firing: F resumes
  // The timer is gone (its slot freed at once) and F will never run: ours.
  cancelled_ = true;
  const NoInlineResumption posted;  // never inline: we run inside requestCancellation()
  resumeAt_.resume();
}

void SleepAwaiter::await_resume() const {
  if (suspended_) setCurrentTask(task_);  // the coroutine goes on: its task's code again
  segmentGoesOn(task_);                   // in a new run segment (RunSegments.h)
  if (cancelled_) throw OperationCancelled();
}

}  // namespace detail

detail::SleepAwaiter sleepUntil(std::chrono::steady_clock::time_point t) noexcept { return detail::SleepAwaiter(t); }

}  // namespace coexec
