// SPDX-License-Identifier: BSL-1.0
// submitWhenRoom(): producers waiting for room (backpressure that suspends a
// coroutine instead of refusing its task or blocking its thread).
//
// The pool keeps a FIFO of waiting producers (RoomWaiter nodes, which live
// in the awaiting coroutines' frames), guarded by mutex_. Wherever room may
// appear (a task leaves a queue, a thread goes idle or exits, the sizes or
// the queue change) the pool serves the FIFO from its head: it admits the
// head's task there, under the lock (tryAdmitLocked: exactly submit()'s
// routing) and ends that wait; a head whose task finds no room stays the
// head, so a producer whose room a plain submit() took keeps its place, and
// nobody is woken for nothing. Room that appears without the lock (a worker
// popping the lock-free ring) serves at once, taking the lock, only while
// producers wait (Room::anyWaiting(), read after the place is given back:
// seq_cst on both sides, as for block()); room that appears under the lock
// inside a worker's search sets the room's signal, and the worker serves
// once it has released the lock.
//
// Ending a wait: exactly one party removes the node from the FIFO, under the
// lock, and sets its outcome: the pool serving it (admitted), shutdown()/
// shutdownNow() (refused), the timeout's timer (timed out), or the
// producer's cancellation callback (cancelled). It then calls finish()
// outside the lock. finish() and suspend() meet in state_ by one fetch_or
// each: the first of kServed and kSuspended leaves the coroutine to the
// other. If suspend() is still arming when the wait ends, it sees kServed
// and does not suspend; otherwise finish() hands the coroutine back: a
// party other than the callback first destroys the registration (which
// waits for a callback running elsewhere; that callback finds the node out
// of the FIFO and does nothing), so that no callback can reach the pool
// once the coroutine may have resumed (after which the pool may be
// destroyed). The callback, when it is the one that ended the wait, leaves
// its registration to await_resume (the registration's destructor then
// waits for the callback to return). The timer's context is the pool, not
// the node: it looks for the expired waits under the lock, so a timer that
// fires after its wait ended finds nothing; removal also cancels it.

#include "coexec/SubmitWhenRoom.h"

#include <mutex>

#include <stdexcept>

#include "coexec/Errors.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/Time.h"
#include "pool/PoolImpl.h"

namespace coexec {
namespace detail {

RoomWaiter::~RoomWaiter() = default;  // an unawaited task_ is released unrun by ~PendingTask

bool RoomWaiter::suspend(std::coroutine_handle<> awaiting, TaskContext* context) {
  if (awaited_) {
    throw std::logic_error(
        "coexec::ThreadPoolExecutor::submitWhenRoom: this awaitable was already awaited; it hands its task to the "
        "pool once (call submitWhenRoom() again for another task)");
  }
  awaited_ = true;
  ThreadPoolExecutor& pool = *pool_;
  PoolImpl& p = *pool.impl_;
  if (context != nullptr) {
    producerToken_ = context->cancellationToken();  // may throw std::bad_alloc: not suspended
    if (producerToken_.isCancellationRequested()) {
      outcome_ = Outcome::cancelled;
      dropTask();
      return false;
    }
  }
  const auto refuseNow = [&] {
    {
      std::lock_guard lock(p.mutex_);
      p.tallies_.countRejectedLocked();
    }
    error_ = std::make_exception_ptr(
        RejectedExecution("the pool is shut down and accepts no new tasks (submitWhenRoom)", pool.stats()));
    outcome_ = Outcome::shutDown;
    dropTask();
    return false;
  };
  if (pool.isShutdown()) return refuseNow();
  // The task's links (to the running task, and to `link_`): as submit()'s.
  if (!pool.linkToCaller(task_, linked_ ? &link_ : nullptr)) {
    outcome_ = Outcome::admitted;  // settled as cancelled, counted as submit() counts it
    return false;
  }
  // Room now, and nobody waiting before us: submit()'s own path.
  if (!p.room_.anyWaiting() && pool.tryAdmit(task_)) {
    outcome_ = Outcome::admitted;
    return false;
  }
  producerTask_ = taskOf(context);
  parked_.record(awaiting, producerTask_);
  PoolImpl::FactoryErrors errors;
  RoomWaiter* ended = nullptr;
  bool refused = false;
  try {
    std::lock_guard lock(p.mutex_);
    if (p.life_.stateLocked() != PoolState::running) {
      p.tallies_.countRejectedLocked();
      refused = true;
    } else {
      if (timed_) {
        deadline_ = deadlineOn(p.clock_.now(), timeout_);
        const TimerId timer = p.timers_.schedule(deadline_, &PoolImpl::onRoomTimeout, &p);  // may throw: not queued
        timerSlot_ = timer.slot;
        timerGeneration_ = timer.generation;
      }
      p.appendRoomWaiterLocked(*this);
      // Last: room that appeared since the look above (or, with a timeout
      // already over, the one try it gets). The head first: FIFO.
      p.serveRoomWaitersLocked(ended, errors);
      if (queued_ && timed_ && p.clock_.now() >= deadline_) {
        p.removeRoomWaiterLocked(*this);
        outcome_ = Outcome::timedOut;
        nextEnded_ = ended;
        ended = this;
      }
    }
  } catch (...) {  // std::bad_alloc, std::system_error (the timer thread)
    {
      std::lock_guard lock(p.mutex_);
      if (queued_) p.removeRoomWaiterLocked(*this);
    }
    p.finishRoomWaits(ended);  // the others served before the failure
    parked_.forget();
    dropTask();
    throw;
  }
  p.reportFactoryErrors(errors);
  if (refused) {
    parked_.forget();
    error_ = std::make_exception_ptr(
        RejectedExecution("the pool is shut down and accepts no new tasks (submitWhenRoom)", pool.stats()));
    outcome_ = Outcome::shutDown;
    dropTask();
    return false;
  }
  p.finishRoomWaits(ended);  // this one among them, maybe: it then sees kSuspended unset and leaves it to us
  if (producerToken_.canBeCancelled()) {
    try {
      // Runs onProducerCancelled() at once if the token was cancelled since
      // we looked: it ends the wait (if it still runs) and leaves the rest to us.
      registration_.emplace(producerToken_, [this] { onProducerCancelled(); });
    } catch (...) {
      // No registration: end the wait here as a cancellation would, if it
      // still runs, and rethrow once it has ended.
      bool ours = false;
      {
        std::lock_guard lock(p.mutex_);
        if (queued_) {
          p.removeRoomWaiterLocked(*this);
          outcome_ = Outcome::cancelled;
          ours = true;
        }
      }
      if (ours) {
        dropTask();
        parked_.forget();
        throw;
      }
      // Served meanwhile: go on as below (its finish() came or will come).
    }
  }
  suspended_ = true;
  // acq_rel: publishes the registration to finish(), and sees the outcome
  // the ending party wrote before its kServed.
  const std::uint8_t before = state_.fetch_or(kSuspended, std::memory_order_acq_rel);
  if ((before & kServed) == 0) return true;  // the party that ends the wait resumes us, maybe already
  // Ended while we armed: go on without suspending.
  registration_.reset();  // waits for a callback running on another thread (it has done its part)
  parked_.forget();
  suspended_ = false;
  return false;
}

void RoomWaiter::onProducerCancelled() noexcept {
  PoolImpl& p = *pool_->impl_;
  {
    std::lock_guard lock(p.mutex_);
    if (!queued_) return;  // ended already: its party resumes the coroutine
    p.removeRoomWaiterLocked(*this);
    outcome_ = Outcome::cancelled;
  }
  dropTask();
  finish(/*fromCallback=*/true);
}

void RoomWaiter::finish(bool fromCallback) noexcept {
  const std::uint8_t before = state_.fetch_or(kServed, std::memory_order_acq_rel);
  if ((before & kSuspended) == 0) return;  // suspend() is still arming: it sees kServed and goes on
  if (!fromCallback) registration_.reset();  // waits for a callback running elsewhere: it finds us ended
  ResumePoint parked = parked_;          // the awaiter may be gone once resumed
  {
    const NoInlineResumption posted;
    parked.resume();
  }
}

void RoomWaiter::dropTask() noexcept {
  if (!task_.valid()) return;
  TaskCore& core = *PendingTaskAccess::core(task_);
  core.owner = pool_->impl_;
  core.requestCancel();  // releases its links; its Future (ours, dropped) reports OperationCancelled
  task_ = PendingTask();
}

void RoomWaiter::resumed() {
  if (suspended_) setCurrentTask(producerTask_);  // the coroutine goes on: its task's code again
  registration_.reset();  // the callback that ended the wait may still be returning: waits for it
  switch (outcome_) {
    case Outcome::waiting:
    case Outcome::admitted: return;
    case Outcome::cancelled: throw OperationCancelled();
    case Outcome::timedOut:
      throw TimeoutError("no room appeared in the pool before the submitWhenRoom() timeout (nothing was submitted)");
    case Outcome::shutDown: std::rethrow_exception(error_);
  }
}

// ---- the pool's side ----------------------------------------------------------

void PoolImpl::appendRoomWaiterLocked(RoomWaiter& waiter) noexcept { room_.appendLocked(waiter); }

void PoolImpl::removeRoomWaiterLocked(RoomWaiter& waiter) noexcept {
  room_.removeLocked(waiter);
  if (waiter.timerGeneration_ != 0) {
    (void)timers_.cancel(TimerId{waiter.timerSlot_, waiter.timerGeneration_});  // firing: it finds nothing
    waiter.timerGeneration_ = 0;
  }
}

void PoolImpl::serveRoomWaitersLocked(RoomWaiter*& ended, FactoryErrors& errors) {
  while (RoomWaiter* head = room_.headLocked()) {
    if (life_.stateLocked() != PoolState::running) return;  // shutdown()/shutdownNow() end them all
    if (head->task_.isCancelled()) {
      // Cancelled while it waited (its token, or the producer's task): not
      // admitted. The producer learns it from the Future, as from submit()
      // with a cancelled token, unless its own task was cancelled.
      removeRoomWaiterLocked(*head);
      if (head->producerToken_.isCancellationRequested()) {
        head->outcome_ = RoomWaiter::Outcome::cancelled;
      } else {
        head->outcome_ = RoomWaiter::Outcome::admitted;
        detail::PendingTaskAccess::core(head->task_)->owner = this;
        head->task_ = PendingTask();
        countCancelledAtSubmission();
      }
    } else if (tryAdmitLocked(head->task_, errors)) {
      removeRoomWaiterLocked(*head);
      head->outcome_ = RoomWaiter::Outcome::admitted;
      ++room_.waitedForRoom;
    } else {
      return;  // no room for the head: everyone waits on
    }
    head->nextEnded_ = ended;
    ended = head;
  }
}

void PoolImpl::serveRoomWaiters() noexcept {
  room_.clearSignal();
  RoomWaiter* ended = nullptr;
  FactoryErrors errors;
  {
    std::lock_guard lock(mutex_);
    try {
      serveRoomWaitersLocked(ended, errors);
    } catch (...) {  // std::bad_alloc from the factory's error list: the next room serves again
    }
  }
  try {
    reportFactoryErrors(errors);
  } catch (...) {  // the handler's own failure was printed by it; nothing to add here
  }
  finishRoomWaits(ended);
}

RoomWaiter* PoolImpl::endRoomWaitsLocked() noexcept {
  RoomWaiter* ended = nullptr;
  while (RoomWaiter* head = room_.headLocked()) {
    removeRoomWaiterLocked(*head);
    head->outcome_ = RoomWaiter::Outcome::shutDown;
    tallies_.countRejectedLocked();
    head->nextEnded_ = ended;
    ended = head;
  }
  return ended;
}

void PoolImpl::finishRoomWaits(RoomWaiter* ended) noexcept {
  if (ended == nullptr) return;
  std::exception_ptr refused;  // one error for every producer a shutdown refused
  for (RoomWaiter* waiter = ended; waiter != nullptr; waiter = waiter->nextEnded_) {
    if (waiter->outcome_ != RoomWaiter::Outcome::shutDown) continue;
    if (!refused) {
      try {
        refused = std::make_exception_ptr(RejectedExecution(
            "the pool was shut down while the producer waited for room (submitWhenRoom; nothing was submitted)",
            owner_.stats()));
      } catch (...) {
        refused = std::current_exception();  // std::bad_alloc: the producer gets that
      }
    }
    waiter->error_ = refused;
  }
  while (ended != nullptr) {
    RoomWaiter* const waiter = ended;
    ended = waiter->nextEnded_;  // read first: the waiter may be gone once finished
    if (waiter->outcome_ != RoomWaiter::Outcome::admitted) waiter->dropTask();
    waiter->finish(/*fromCallback=*/false);
  }
}

void PoolImpl::onRoomTimeout(void* context) noexcept {
  auto& p = *static_cast<PoolImpl*>(context);
  RoomWaiter* ended = nullptr;
  {
    std::lock_guard lock(p.mutex_);
    const Clock::time_point now = p.clock_.now();
    for (RoomWaiter* waiter = p.room_.headLocked(); waiter != nullptr;) {
      RoomWaiter* const next = waiter->next_;
      if (waiter->timed_ && waiter->deadline_ <= now) {
        waiter->timerGeneration_ = 0;  // this timer, or one that will find nothing
        p.removeRoomWaiterLocked(*waiter);
        waiter->outcome_ = RoomWaiter::Outcome::timedOut;
        waiter->nextEnded_ = ended;
        ended = waiter;
      }
      waiter = next;
    }
  }
  p.finishRoomWaits(ended);
}

}  // namespace detail
}  // namespace coexec
