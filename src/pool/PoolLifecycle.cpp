// SPDX-License-Identifier: BSL-1.0
// The lifecycle: RUNNING -> SHUTDOWN (no new tasks; queued ones and
// continuations finish) or STOP (shutdownNow: queues drained and returned,
// tokens of running and suspended tasks cancelled) -> TERMINATED, and the
// runtime resizing that decides which workers stay.
//
// Invariants (the state's own rules, the holds and the hand-overs that
// close() waits for: Lifecycle.h):
// - TERMINATED is entered by tryTerminateLocked, when no worker is left and
//   nothing is queued, in flight, pinned or waiting to resume; the
//   terminated hook runs before it, with the lock released.
// - A worker's counters move to the pool's tallies when it exits, under
//   mutex_, so stats() never counts them twice or not at all (Tallies.h).

#include "coexec/ThreadPoolExecutor.h"

#include <cassert>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "pool/PoolImpl.h"
#include "pool/PoolTimers.h"
#include "coexec/detail/Time.h"

namespace coexec {
namespace detail {

void PoolImpl::workerExitedLocked(Worker* worker, std::unique_lock<std::mutex>& lock) {
  // Its counts move to the tallies under the lock stats() holds. Nothing
  // else writes them now (it is idle).
  tallies_.addExitedLocked(*worker);
  const Counters& gone = worker->counters;
  life_.inFlight.workerExitedLocked(gone.coroutinesStarted.load(std::memory_order_relaxed) -
                               gone.coroutinesFinished.load(std::memory_order_relaxed));
  exited_.push_back(std::move(worker->thread));
  engine_.workers.exitedLocked(worker);  // the size's mirror, seq_cst, before this thread reads the shared ring
  room_.appearedLocked();  // room for a new thread
  // After shutdown, the others look again: one parked on an in-flight total
  // it read before this worker's last finishes (plain stores, see PoolImpl.h)
  // would otherwise wait for a wake-up that never comes.
  if (life_.stateLocked() != PoolState::running) engine_.parking.wakeAllLocked();
  if (engine_.workers.empty() && workWaitsLocked()) {
    // Never leave queued work without a thread (the pool was resized or all
    // threads timed out while a task arrived).
    FactoryErrors errors;
    startThreadForWaitingWorkLocked(errors);
    if (!errors.empty()) {
      lock.unlock();
      reportFactoryErrors(errors);
      lock.lock();
    }
  }
  tryTerminateLocked(lock);
}

void PoolImpl::tryTerminateLocked(std::unique_lock<std::mutex>& lock) {
  if (life_.stateLocked() == PoolState::running || !life_.aliveLocked()) return;
  if (!engine_.workers.empty() || !quiescentLocked()) return;
  if (life_.stateLocked() == PoolState::shutdown && sharedQueuedLocked() > 0) return;
  // Timers it must still run (or end), due work, and threads on their way
  // here from a timer (see ScheduledItem).
  if (liveItems_.anyLocked() || engine_.due.any() || life_.pinned()) {
    return;
  }
  // RejectionPolicy::newThreadRuns(): the last temporary thread to end terminates it.
  if (starts_.temporaryAliveLocked() > 0) return;
  life_.beginTerminationLocked();
  if (hooks_.terminated) {
    lock.unlock();
    try {
      hooks_.terminated();
    } catch (...) {
      printDropped("the terminated hook", name_, tlsPool == this ? "(pool thread)" : "(caller)",
                   std::current_exception());
    }
    lock.lock();
  }
  life_.endTerminationLocked();
  if (life_.waiters != nullptr) resumeTerminationWaitersLocked(lock);
  life_.terminated.notify_all();
}

}  // namespace detail

void ThreadPoolExecutor::shutdown() {
  detail::PoolImpl& p = *impl_;
  std::unique_lock lock(p.mutex_);
  if (p.life_.stateLocked() == PoolState::running) p.life_.advanceLocked(PoolState::shutdown);
  p.waitAdmissionsLocked();  // every lock-free push has landed or will be refused
  p.life_.inFlight.waitLeaversLocked();  // every coroutine that finished unlocked is off the in-flight count
  detail::TimerWork timers;
  if (p.life_.stateLocked() == PoolState::shutdown) p.stopTimersLocked(/*now=*/false, timers, nullptr);
  // The timers it stopped are settled before the pool may terminate: a pin
  // holds it meanwhile (see ScheduledItem).
  p.life_.pin();
  lock.unlock();
  timers.run(p);
  lock.lock();
  p.life_.unpinLocked();
  detail::PoolImpl::FactoryErrors errors;
  if (p.engine_.workers.empty() && p.workWaitsLocked() && p.life_.stateLocked() == PoolState::shutdown) {
    p.startThreadForWaitingWorkLocked(errors);  // queued work whose thread failed to start: try again to drain it
  }
  p.engine_.parking.wakeAllLocked();
  p.room_.available.notify_all();
  detail::RoomWaiter* const refused = p.endRoomWaitsLocked();  // submitWhenRoom()'s producers: RejectedExecution
  p.tryTerminateLocked(lock);
  lock.unlock();
  p.finishRoomWaits(refused);
  p.reportFactoryErrors(errors);
}

std::vector<PendingTask> ThreadPoolExecutor::shutdownNow() {
  detail::PoolImpl& p = *impl_;
  std::vector<PendingTask> unrun;
  std::vector<PendingTask> cancelled;
  std::vector<detail::Ref<detail::TaskCore>> running;
  std::vector<detail::Ref<detail::TaskCore>> joined;  // entries of tasks joins ran: dropped after the lock
  detail::TimerWork timers;
  detail::RoomWaiter* refused = nullptr;  // submitWhenRoom()'s producers: RejectedExecution
  {
    std::unique_lock lock(p.mutex_);
    if (p.life_.stateLocked() == PoolState::running || p.life_.stateLocked() == PoolState::shutdown) p.life_.advanceLocked(PoolState::stop);
    p.waitAdmissionsLocked();  // every lock-free push has landed or will be refused
    p.life_.inFlight.waitLeaversLocked();  // every coroutine that finished unlocked is off the in-flight count
    std::vector<PendingTask> queued = p.drainSharedLocked();
    p.room_.release(queued.size());
    p.engine_.publishSharedWorkLocked();
    p.drainLocalsLocked(queued, joined);  // after the shared queue: it holds the older tasks
    // Pending timers are cancelled; one-shot tasks that became due and have
    // not started are returned after the queued ones.
    p.stopTimersLocked(/*now=*/true, timers, &queued);
    p.life_.pin();  // settled before the pool may terminate
    for (PendingTask& task : queued) {
      if (task.isCancelled()) {
        p.tallies_.outside().cancelled.fetch_add(1, std::memory_order_relaxed);
        cancelled.push_back(std::move(task));
      } else {
        p.tallies_.countDrainedLocked();
        unrun.push_back(std::move(task));
      }
    }
    for (auto& worker : p.engine_.workers) {
      std::lock_guard local(worker.localMutex);
      if (worker.current) running.push_back(worker.current);
    }
    p.life_.inFlight.collect(running);  // coroutine tasks in flight with a token
    p.engine_.parking.wakeAllLocked();
    p.room_.available.notify_all();
    refused = p.endRoomWaitsLocked();
    p.tryTerminateLocked(lock);
  }
  // Outside the lock: token callbacks and capture destructors are user code.
  p.finishRoomWaits(refused);
  timers.run(p);
  for (auto& task : running)
    task->requestTokenCancellation();
  {
    std::unique_lock lock(p.mutex_);
    p.unpinLocked(lock);
  }
  return unrun;
}

bool ThreadPoolExecutor::awaitTermination(std::chrono::nanoseconds timeout) {
  detail::PoolImpl& p = *impl_;
  if (detail::currentPool() == &p) {
    throw std::logic_error(fmt::format(
        "coexec::ThreadPoolExecutor::awaitTermination called from a thread of pool '{}' itself: the pool cannot "
        "terminate while this thread runs a task",
        p.name_));
  }
  std::unique_lock lock(p.mutex_);
  return p.life_.terminated.wait_until(lock, detail::deadlineAfter(timeout),
                                  [&] { return p.life_.stateLocked() == PoolState::terminated; });
}

void ThreadPoolExecutor::close() {
  detail::PoolImpl& p = *impl_;
  if (detail::currentPool() == &p) {
    throw std::logic_error(fmt::format(
        "coexec::ThreadPoolExecutor::close (or the destructor) called from a thread of pool '{}' itself: a pool "
        "cannot wait for its own threads",
        p.name_));
  }
  shutdown();
  std::vector<std::thread> threads;
  {
    std::unique_lock lock(p.mutex_);
    // And for the whenTerminated() awaiters still being handed back.
    p.life_.terminated.wait(lock, [&] { return p.life_.closableLocked(); });
    assert(p.life_.waiters == nullptr && "coexec: a whenTerminated() awaiter outlived the pool's termination");
    threads.swap(p.exited_);
  }
  for (std::thread& t : threads)
    t.join();
}

bool ThreadPoolExecutor::isShutdown() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->life_.stateLocked() != PoolState::running;
}

bool ThreadPoolExecutor::isTerminating() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->life_.stateLocked() == PoolState::shutdown || impl_->life_.stateLocked() == PoolState::stop;
}

bool ThreadPoolExecutor::isTerminated() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->life_.stateLocked() == PoolState::terminated;
}

bool ThreadPoolExecutor::prestartCoreThread() { return impl_->startWorkers(1, false) == 1; }

std::size_t ThreadPoolExecutor::prestartAllCoreThreads() {
  return impl_->startWorkers(std::numeric_limits<std::size_t>::max(), false);
}

void ThreadPoolExecutor::setCorePoolSize(std::size_t corePoolSize) {
  detail::PoolImpl& p = *impl_;
  std::size_t grow = 0;
  {
    std::lock_guard lock(p.mutex_);
    grow = p.sizes_.setCoreLocked(corePoolSize);
    if (p.engine_.workers.size() > corePoolSize) p.engine_.parking.wakeAllLocked();  // surplus threads become timed
  }
  if (grow > 0) p.startWorkers(grow, true);
  if (grow > 0 && p.room_.anyWaiting()) p.serveRoomWaiters();  // room for a thread
}

void ThreadPoolExecutor::setMaximumPoolSize(std::size_t maximumPoolSize) {
  detail::PoolImpl& p = *impl_;
  {
    std::lock_guard lock(p.mutex_);
    p.sizes_.setMaximumLocked(maximumPoolSize);
    p.engine_.parking.wakeAllLocked();
    if (p.room_.blockedLocked() > 0) p.room_.available.notify_all();
  }
  if (p.room_.anyWaiting()) p.serveRoomWaiters();  // room for more threads
}

void ThreadPoolExecutor::setKeepAliveTime(std::chrono::nanoseconds keepAliveTime) {
  detail::PoolSizes::checkKeepAlive(keepAliveTime);  // before the lock
  detail::PoolImpl& p = *impl_;
  std::lock_guard lock(p.mutex_);
  p.sizes_.setKeepAliveLocked(keepAliveTime);
  p.engine_.parking.wakeAllLocked();
}

void ThreadPoolExecutor::allowCoreThreadTimeOut(bool value) {
  detail::PoolImpl& p = *impl_;
  std::lock_guard lock(p.mutex_);
  p.sizes_.setCoreTimesOutLocked(value);
  p.engine_.parking.wakeAllLocked();
}

}  // namespace coexec
