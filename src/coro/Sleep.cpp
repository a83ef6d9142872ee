// sleepFor / sleepUntil: a suspended coroutine waits in the process-wide
// steady timer service; the timer's callback hands it back to the scheduler
// it was running on (see SleepAwaiter::fire).
//
// Once schedule() has recorded the timer, the timer thread may resume the
// coroutine and destroy the awaiter at any moment: await_suspend touches
// nothing of the awaiter afterwards.

#include "coexec/Sleep.h"

#include "scheduler/TimerService.h"

namespace coexec {
namespace detail {

bool SleepAwaiter::await_suspend(std::coroutine_handle<> awaiting) {
  Scheduler* const scheduler = currentScheduler();
  const bool retained = scheduler != nullptr && scheduler->retain();
  scheduler_ = scheduler;
  retained_ = retained;
  awaiting_ = awaiting;
  try {
    steadyTimerService().schedule(deadline_, &SleepAwaiter::fire, this);
  } catch (...) {
    if (retained) scheduler->release();
    throw;  // not suspended: the coroutine goes on with the exception
  }
  return true;
}

void SleepAwaiter::fire(void* self) noexcept {
  auto* awaiter = static_cast<SleepAwaiter*>(self);
  Scheduler* const scheduler = awaiter->scheduler_;  // the awaiter may be gone once resumed
  const bool retained = awaiter->retained_;
  resumeFor(scheduler, awaiter->awaiting_);
  if (retained) scheduler->release();
}

}  // namespace detail

detail::SleepAwaiter sleepUntil(std::chrono::steady_clock::time_point t) noexcept { return detail::SleepAwaiter(t); }

}  // namespace coexec
