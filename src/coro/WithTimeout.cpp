// SPDX-License-Identifier: BSL-1.0
// withTimeout: a coroutine waits for a piece of work (a Task it starts as a
// task of its own, or a Future's task) and a timer at once; the timer
// cancels the work, and the coroutine goes on once the work has settled.
//
// Three parties meet in state_, each once, each by one fetch_or of its own
// bit (so they are totally ordered, and each sees who came before it):
// - await_suspend (S), once it has armed the timer, set the work's
//   continuation and started the work: kSuspended (plus kDone if the work
//   had settled before the continuation could be set);
// - the work's continuation D, on the thread that settles the work: kDone;
// - the timer's callback T, on the firing thread, after it has cancelled the
//   work (which may run D inside it): kFired. S sets kFired itself when
//   there is no timer (a deadline already past, whose cancellation S does,
//   or no deadline at all).
// The coroutine may resume once D has come and T has come or can no longer
// come (its timer removed). Exactly one party resumes it:
// - D or T arriving before kSuspended does nothing more: S decides.
// - S, seeing kDone: if kFired is there too, or it removes the timer, it
//   does not suspend; if the removal fails, T is firing and resumes.
// - D, after kSuspended: if kFired is there, or it removes the timer, D
//   resumes; if the removal fails, T is firing and will see kSuspended and
//   kDone.
// - T, after its cancellation: resumes if it finds kSuspended and kDone.
// T only runs if its timer was not removed, and a removal after T started
// fails, so "a removal failed" and "T comes later" always go together. D
// never resumes before the work has settled and T has left this object
// alone: structured, and the awaiter may be destroyed as soon as the
// coroutine goes on.
//
// Nothing touches the state once the coroutine may have resumed: S uses only
// locals after setting kSuspended until it knows it keeps the coroutine; D
// and T touch it only when they are the one to resume, or before anyone can.
// T's cancellation of the work happens before its kFired, so the work (kept
// alive by the awaiter) is alive while T uses it.
//
// The awaiting task's cancellation reaches the work through a link: a Task
// started here becomes the awaiting task's child (TaskCore::adoptChild); a
// Future's task gets a registration on the awaiting task's token (unless it
// is that task's child already). Either cancels the work; D then resumes as
// usual, and the co_await rethrows what the work settled with.

#include "coexec/WithTimeout.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "coexec/Clock.h"
#include "coexec/detail/Bindings.h"
#include "engine/TimerService.h"

namespace coexec::detail {

TimeoutState::~TimeoutState() = default;

bool TimeoutState::suspend(std::coroutine_handle<> awaiting, TaskContext* context, TaskCore& work, bool start) {
  TaskCore* const self = taskOf(context);
  work_ = &work;
  if (start) {
    // A new task, still ours alone: linked to the awaiting task now, so that
    // cancelling the awaiting task cancels it. If that task is cancelled
    // already, the work never starts.
    // It sees the awaiting code's TaskLocal bindings, as a Task it awaited would.
    inheritBindings(work, self);
    if (self != nullptr && self->cancellable() && !self->adoptChild(work)) work.cancelFromLink();
  } else if (context != nullptr && !work.isChildOf(self)) {
    const CancellationToken token = context->cancellationToken();  // may throw std::bad_alloc
    registration_.emplace(token, [target = &work] {  // runs here if the token is cancelled already
      target->addRef();  // alive: the awaiter holds the Future until the registration is gone
      const Ref<TaskCore> keep = Ref<TaskCore>::adopt(target);
      keep->cancelFromLink();
    });
  }

  Scheduler* const scheduler = currentScheduler();
  TimerService* service = scheduler != nullptr ? scheduler->timerService() : nullptr;
  const Clock::time_point now = service != nullptr ? service->clock().now() : steadyClock().now();
  const Clock::time_point deadline = saturatedAdd(now, timeout_);
  TimerId timer;
  if (deadline <= now) {
    // Due already: the work is cancelled before it starts (a Task never
    // runs), as the timer would have done.
    timedOut_ = work.requestCancel();
    state_.store(kFired, std::memory_order_relaxed);  // nobody else can see this object yet
  } else if (deadline == Clock::time_point::max()) {
    state_.store(kFired, std::memory_order_relaxed);  // no deadline: nothing to wait for on that side
  } else {
    try {
      if (service == nullptr) service = &steadyTimerService();  // may throw std::system_error
      service_ = service;
      timer = service->schedule(deadline, &TimeoutState::onTimer, this);  // T may run from here on
    } catch (...) {
      registration_.reset();
      if (start) work.cancelFromLink();  // never started: settled, so that its parent's list lets it go
      throw;                             // not suspended: the coroutine goes on with the exception
    }
  }
  resumeAt_.record(awaiting, self, scheduler);
  task_ = self;
  timerSlot_ = timer.slot;
  timerGeneration_ = timer.generation;

  // D from now on (never before kSuspended: see the top of this file).
  const bool doneEarly = !work.setContinuation(&TimeoutState::onWorkDone, this);
  if (start && work.tryStart()) {
    work.addRef();                  // the task keeps it until its coroutine has finished
    work.startCoroutine(nullptr);   // runs here until it first suspends or finishes (D may run inside)
  }

  suspended_ = true;  // undone below on the paths that do not suspend
  const std::uint8_t bits = kSuspended | (doneEarly ? kDone : 0);
  // acq_rel: publishes the fields above to D and T, and lets us see what an
  // earlier D or T did (the work's result, timedOut_).
  const std::uint8_t state = state_.fetch_or(bits, std::memory_order_acq_rel) | bits;
  if ((state & kDone) == 0) return true;  // D resumes (T may come first)
  if ((state & kFired) != 0 || service->cancel(timer)) {
    // The work has settled and T is done or gone: go on here.
    resumeAt_.forget();
    suspended_ = false;
    return false;
  }
  return true;  // T is firing: it sees kSuspended and kDone, and resumes
}

void TimeoutState::onWorkDone(void* self) noexcept {
  auto* state = static_cast<TimeoutState*>(self);
  const std::uint8_t before = state->state_.fetch_or(kDone, std::memory_order_acq_rel);
  if ((before & kSuspended) == 0) return;  // S is still arming: it sees kDone and decides
  if ((before & kFired) != 0 || state->service_->cancel(TimerId{state->timerSlot_, state->timerGeneration_})) {
    state->resumeAwaiting();
  }
  // Otherwise T is firing: it sees kSuspended and kDone, and resumes.
}

void TimeoutState::onTimer(void* self) noexcept {
  auto* state = static_cast<TimeoutState*>(self);
  // Cancels the work (false if it had settled already: its result stands).
  // This may settle it and run D here, which finds no kFired and leaves the
  // resumption to us. Nobody resumes the coroutine before kFired, so the
  // work and this object are alive.
  state->timedOut_ = state->work_->requestCancel();
  const std::uint8_t before = state->state_.fetch_or(kFired, std::memory_order_acq_rel);
  if ((before & (kSuspended | kDone)) == (kSuspended | kDone)) state->resumeAwaiting();
}

void TimeoutState::resumeAwaiting() noexcept {
  resumeAt_.resume();  // this object may be gone once the coroutine runs
}

bool TimeoutState::resumed() noexcept {
  if (suspended_) setCurrentTask(task_);  // the coroutine goes on: its task's code again
  registration_.reset();                  // waits for its callback if it runs on another thread now
  return timedOut_;
}

void throwWithTimeoutError(std::chrono::steady_clock::duration timeout) {
  throw TimeoutError(fmt::format(
      "coexec::withTimeout: the work did not finish within {} (it was cancelled at the deadline and has settled)",
      std::chrono::duration_cast<std::chrono::microseconds>(timeout)));
}

}  // namespace coexec::detail
