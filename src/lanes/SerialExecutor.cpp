// SPDX-License-Identifier: BSL-1.0
// The lane: a FIFO of tasks handed to a pool one at a time (LaneState), and
// the hop of `co_await resumeOn(lane)`.
//
// Invariants (LaneState):
// - At most one task of the lane is active: handed to the pool, running, or
//   a coroutine task not yet finished. It stops being active only in its
//   continuation (settled()), which runs exactly once, whichever way it
//   settles; a task refused by the pool is settled here with
//   RejectedExecution, which runs that continuation too.
// - One thread at a time dispatches (dispatching_). A task that settles
//   while another thread dispatches only clears active_: the dispatching
//   thread sees it and hands over the next task, so a run of refusals (a
//   shut-down pool) loops here instead of nesting continuations.
// - The lane is idle (no active task, no dispatcher) only with an empty
//   queue: whoever makes it idle has found the queue empty under the lock.
// Locks: mutex_ guards waiting_, active_ and dispatching_. The pool, the
// tasks and their continuations are called without it.

#include "coexec/SerialExecutor.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>

#include "coexec/detail/Scheduler.h"

namespace coexec {
namespace detail {

void LaneState::enqueue(PendingTask task, TaskCore& core, const CancellationToken* token, bool link) {
  // At submission, on the submitter's thread: the task is the running
  // task's child (and sees its bindings) as with the pool's submit().
  if (link && !LaneAccess::linkToCaller(pool_, task, token)) return;  // settled as cancelled already
  {
    std::lock_guard lock(mutex_);
    waiting_.push_back(Waiting{std::move(task), &core});
    if (active_ != nullptr || dispatching_) return;
    dispatching_ = true;
  }
  dispatch();
}

void LaneState::dispatch() noexcept {
  while (true) {
    PendingTask next;
    TaskCore* core = nullptr;
    bool turn = false;
    {
      std::lock_guard lock(mutex_);
      if (active_ != nullptr || waiting_.empty()) {
        dispatching_ = false;
        if (active_ == nullptr) drained_.notify_all();
        return;
      }
      next = std::move(waiting_.front().task);
      core = waiting_.front().core;
      waiting_.pop_front();
      // A task cancelled while it waited has settled (its continuation
      // found it not active): skip it. Dropped outside the lock, below.
      turn = !core->isDone();
      if (turn) active_ = core;
    }
    if (!turn) continue;
    std::exception_ptr error;
    try {
      if (LaneAccess::tryAdmit(pool_, next)) continue;  // the pool has it: `core` may be gone already
      error = std::make_exception_ptr(LaneAccess::rejection(pool_, next));
    } catch (...) {
      error = std::current_exception();  // out of memory admitting it, or building the message
    }
    // Refused: the task fails with the pool's reason; its continuation (on
    // this thread) clears active_, and the loop goes on.
    core->abandon(std::move(error));
  }
}

void LaneState::settled(const TaskCore& core) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (active_ != &core) return;  // it settled while waiting (cancelled): dispatch() skips it
    active_ = nullptr;
    if (dispatching_) return;  // that thread hands over the next one
    if (waiting_.empty()) {
      drained_.notify_all();
      return;
    }
    dispatching_ = true;
  }
  dispatch();
}

bool LaneState::holds(const TaskCore* task) const {
  std::lock_guard lock(mutex_);
  return task != nullptr && active_ == task;
}

std::size_t LaneState::queued() const {
  std::lock_guard lock(mutex_);
  return waiting_.size();
}

void LaneState::enterHop() noexcept { hopThread_.store(std::this_thread::get_id(), std::memory_order_relaxed); }
void LaneState::leaveHop() noexcept { hopThread_.store(std::thread::id(), std::memory_order_relaxed); }

void LaneState::waitDrained() {
  std::unique_lock lock(mutex_);
  // Called by the lane's own active task (its callable, or a coroutine that
  // hopped on with resumeOn(lane) and runs inside the hop on this thread):
  // that task cannot settle before the caller returns, nor can anything
  // queued behind it start, so there is nothing to wait for here. The lane
  // goes on once the caller leaves it (its tasks and hops hold this state).
  if (active_ != nullptr &&
      (active_ == currentTask() || hopThread_.load(std::memory_order_relaxed) == std::this_thread::get_id())) {
    return;
  }
  drained_.wait(lock, [this] { return active_ == nullptr && !dispatching_ && waiting_.empty(); });
}

namespace {

/// The work item of a resumeOn(lane) hop: running it resumes the coroutine,
/// which holds the lane until it suspends again (when invoke() returns). If
/// it settles without running (refused, dropped after shutdownNow), the
/// coroutine is resumed with that error instead, never left suspended: on
/// the settling thread, unless that is the thread still suspending it
/// (refused inside the co_await), which then goes on without suspending.
class LaneHop final : public TaskCore {
 public:
  enum : int { kSuspending = 0, kSuspended = 1, kFailedEarly = 2 };

  LaneHop(std::coroutine_handle<> coroutine, Ref<LaneState> lane)
      : TaskCore(/*hasFuture=*/true, false, 0), coroutine_(coroutine), lane_(std::move(lane)) {
    setContinuation(&LaneHop::onSettled, this);
  }

  std::atomic<int> phase{kSuspending};
  std::exception_ptr error;  // written before the coroutine resumes with it

 private:
  void invoke() override {
    ran_ = true;
    lane_->enterHop();
    resume(coroutine_);  // until the coroutine suspends or ends: then the lane goes on
    lane_->leaveHop();
  }
  void discardValue() noexcept override {}

  // On the thread that settled the hop.
  static void onSettled(void* self) noexcept {
    auto* hop = static_cast<LaneHop*>(self);
    hop->lane_->settled(*hop);
    if (hop->ran_) return;
    try {
      hop->error = hop->consume();
    } catch (...) {
      hop->error = std::current_exception();
    }
    int expected = kSuspending;
    // acq_rel: the suspending thread must see `error`; we must see that it
    // finished suspending before we resume.
    if (hop->phase.compare_exchange_strong(expected, kFailedEarly, std::memory_order_acq_rel)) return;
    resume(hop->coroutine_);
  }

  std::coroutine_handle<> coroutine_;
  const Ref<LaneState> lane_;
  bool ran_ = false;  // written and read on the thread that runs the hop
};

}  // namespace

bool LaneHopAwaiter::suspend(std::coroutine_handle<> awaiting) {
  if (lane_->holds(task_)) return false;  // the lane's own coroutine task: it holds the lane already
  lane_->addRef();
  auto* hop = new LaneHop(awaiting, Ref<LaneState>::adopt(lane_));
  Ref<TaskCore> local = Ref<TaskCore>::adopt(hop);
  hop_ = local;
  suspended_ = true;
  // From here on the coroutine may be resumed by another thread (and this
  // awaiter destroyed): only `local` and `hop` may be touched, until we know
  // it was not. Not linked: the hop is the coroutine going on, not a child.
  try {
    lane_->enqueue(LaneAccess::adopt(Ref<TaskCore>(local).detach()), *hop, nullptr, /*link=*/false);
  } catch (...) {
    suspended_ = false;  // never queued: the exception comes out of the co_await here
    hop_ = Ref<TaskCore>();
    throw;
  }
  int expected = LaneHop::kSuspending;
  if (hop->phase.compare_exchange_strong(expected, LaneHop::kSuspended, std::memory_order_acq_rel)) return true;
  suspended_ = false;  // refused on this thread: go on at once, with the error
  return false;
}

void LaneHopAwaiter::await_resume() {
  if (suspended_) setCurrentTask(task_);  // the coroutine goes on: its task's code again
  segmentGoesOn(task_);                   // in a new run segment (RunSegments.h)
  if (!hop_) return;
  auto* hop = static_cast<LaneHop*>(hop_.get());
  if (hop->error) std::rethrow_exception(hop->error);
}

}  // namespace detail

SerialExecutor::SerialExecutor(ThreadPoolExecutor& pool)
    : state_(detail::Ref<detail::LaneState>::adopt(new detail::LaneState(pool))) {}

SerialExecutor::~SerialExecutor() { state_->waitDrained(); }

std::size_t SerialExecutor::queued() const { return state_->queued(); }

ThreadPoolExecutor& SerialExecutor::pool() const noexcept { return state_->pool(); }

detail::LaneHopAwaiter resumeOn(SerialExecutor& lane) noexcept { return detail::LaneHopAwaiter(*lane.state_); }

}  // namespace coexec
