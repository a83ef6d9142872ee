// SPDX-License-Identifier: BSL-1.0
// resumeOn(pool): the hop of a coroutine onto a pool.
//
// Invariants: a coroutine that suspends in the hop is resumed exactly once,
// by the hop's run or, if the hop settles without running, with its error;
// a hop that runs on the suspending thread inside await_suspend makes it
// return false instead (the coroutine goes on from its own frame).

#include "coexec/ResumeOn.h"

#include <atomic>
#include <coroutine>
#include <exception>
#include <thread>

#include "coexec/PendingTask.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/Scheduler.h"
#include "pool/PoolImpl.h"

namespace coexec {
namespace detail {
namespace {

/// The work item of a resumeOn() hop from outside the pool. Running it resumes
/// the coroutine on the running thread. If it settles without running
/// (rejected, discarded, dropped after shutdownNow), the coroutine is resumed
/// with that error instead: never left suspended.
///
/// A hop that runs on the very thread that is suspending the coroutine
/// (callerRuns, or a custom policy that runs the task in the caller) runs
/// inside await_suspend: resuming the coroutine there would nest its rest
/// in this call, and the next refused hop would nest again (the stack grows
/// with every hop). Instead the hop marks itself kRanInline and await_suspend
/// returns false, so the coroutine goes on from its own frame.
class HopTask final : public TaskCore {
 public:
  enum : int { kSuspending = 0, kSuspended = 1, kFailedEarly = 2, kRanInline = 3 };

  explicit HopTask(std::coroutine_handle<> coroutine)
      : TaskCore(/*hasFuture=*/true, false, 0), coroutine_(coroutine), suspender_(std::this_thread::get_id()) {
    setContinuation(&HopTask::onSettled, this);
  }

  std::atomic<int> phase{kSuspending};
  std::exception_ptr error;  // written before the coroutine resumes with it

 private:
  void invoke() override {
    ran_ = true;
    // On the suspending thread while await_suspend still runs: let it return
    // false (the coroutine then goes on without nesting). Only that thread can
    // see kSuspending here and be the suspender, so no other thread races us.
    if (std::this_thread::get_id() == suspender_ && phase.load(std::memory_order_acquire) == kSuspending) {
      phase.store(kRanInline, std::memory_order_release);
      return;
    }
    resume(coroutine_);
  }
  void discardValue() noexcept override {}

  // On the thread that settled the hop.
  static void onSettled(void* self) noexcept {
    auto* hop = static_cast<HopTask*>(self);
    if (hop->ran_) return;  // resumed by invoke()
    try {
      hop->error = hop->consume();
    } catch (...) {
      hop->error = std::current_exception();
    }
    int expected = kSuspending;
    // acq_rel: the suspending thread must see `error`; we must see that it
    // finished suspending before we resume.
    if (hop->phase.compare_exchange_strong(expected, kFailedEarly, std::memory_order_acq_rel)) {
      return;  // await_suspend is still running: it will not suspend
    }
    resume(hop->coroutine_);
  }

  std::coroutine_handle<> coroutine_;
  const std::thread::id suspender_;  // the thread in await_suspend
  bool ran_ = false;                 // written and read on the thread that runs the hop
};

}  // namespace

bool ResumeOnAwaiter::suspend(std::coroutine_handle<> awaiting) {
  PoolImpl& pool = *pool_->impl_;
  if (currentPool() == &pool) {
    task_ |= kSuspended;
    pool.postYield(awaiting);  // a yield: behind the work already waiting, never rejected
    return true;
  }
  auto* hop = new HopTask(awaiting);
  Ref<TaskCore> local = Ref<TaskCore>::adopt(hop);
  hop_ = local;
  task_ |= kSuspended;
  // From here on the coroutine may be resumed by another thread (and this
  // awaiter destroyed): only `local` and `hop` may be touched, until we know
  // it was not. The hop is not the coroutine's child: it is the coroutine
  // itself going on, so it is admitted without a link to the current task.
  try {
    // May throw (abort): the coroutine then resumes with the exception.
    pool_->admitUnlinked(PendingTaskAccess::make(local));
  } catch (...) {
    task_ &= ~kSuspended;  // not suspended: the exception comes out of the co_await here
    throw;
  }
  int expected = HopTask::kSuspending;
  // False (go on at once, on this thread) if the hop failed before we could
  // suspend, or ran here, inside admit (kRanInline: see HopTask).
  if (hop->phase.compare_exchange_strong(expected, HopTask::kSuspended, std::memory_order_acq_rel)) return true;
  task_ &= ~kSuspended;
  return false;
}

void ResumeOnAwaiter::await_resume() {
  // The coroutine goes on: its task's code again.
  auto* const task = reinterpret_cast<TaskCore*>(task_ & ~kSuspended);
  if ((task_ & kSuspended) != 0) setCurrentTask(task);
  segmentGoesOn(task);  // in a new run segment (RunSegments.h)
  if (!hop_) return;
  auto* hop = static_cast<HopTask*>(hop_.get());
  if (hop->error) std::rethrow_exception(hop->error);
}

}  // namespace detail

detail::ResumeOnAwaiter resumeOn(ThreadPoolExecutor& pool) noexcept { return detail::ResumeOnAwaiter(pool); }

}  // namespace coexec
