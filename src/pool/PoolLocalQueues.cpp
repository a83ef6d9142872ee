// SPDX-License-Identifier: BSL-1.0
// A worker's local queue and its neighbours: submissions from the pool's own
// threads (tryPushLocal), the worker's yields, popping and stealing, and the
// drains that take local work out for shutdownNow() and discardOldest().
//
// Invariants (see PoolWorker.cpp for the worker loop that serves them):
// - A local push is admitted work: counted in taskCount, holding a place of
//   bounded(n), before any thread can take it.
// - A push publishes its task (seq_cst) and then looks for searchers and
//   parked workers; a parking worker announces itself and then looks at
//   every local queue: one of the two sees the other (no lost wake-up).
// - Thieves take the oldest task of a victim's queue, under mutex_, and
//   give its place back; a queue entry of a task a join started is dropped,
//   never returned or evicted (PoolJoin.cpp).
// Locks: mutex_ for stealing and the drains; a worker's localMutex for its
// yields (lock order: mutex_, then localMutex).

#include "coexec/ThreadPoolExecutor.h"

#include <vector>

#include "pool/PoolImpl.h"

namespace coexec::detail {

bool PoolImpl::tryPushLocal(PendingTask& task) {
  Worker* worker = tlsWorker;
  if (!localQueues_ || worker == nullptr || tlsPool != this) return false;
  // Below corePoolSize, admission starts a new thread for the task (step 1):
  // the task must not wait behind its submitter.
  if (sizes_.belowCore(poolSizeMirror_.load(std::memory_order_relaxed))) return false;
  // The capacity of bounded(n) covers the local queues too.
  if (!room_.reserve()) return false;
  if (stateMirror_.load(std::memory_order_seq_cst) != PoolState::running) {
    room_.release();
    return false;
  }
  task.core_->owner = this;
  task.core_->joinable = task.core_->hasFuture();  // an awaiter on this pool may run it (PoolJoin.cpp)
  stampAdmission(*task.core_);
  addOwn<std::uint64_t>(worker->counters.tasks, 1, std::memory_order_relaxed);  // before anyone can run it
  // The seq_cst push publishes the task (Parking.h: a parking worker reads
  // every local queue's size).
  //
  // shutdownNow() stores STOP and then drains the local queues. A push that
  // passed the check above just before it is either drained or, if it lands
  // after the drain, run by this worker (which pops its own queue before it
  // can exit), like a task a worker dequeued just before the drain.
  std::size_t queued = 0;
  try {
    queued = worker->local.push(task.core_.get());  // throws only if its array cannot grow
  } catch (...) {
    addOwn<std::uint64_t>(worker->counters.tasks, -1, std::memory_order_relaxed);
    room_.release();
    throw;
  }
  task.core_.detach();  // the queue holds the reference now
  if (parking_.anySearching()) {
    // Tell the searcher only when there is more than this worker will take
    // next: a lone task (a chain, each task submitting the next) stays with
    // its submitter, which runs it as soon as the current task returns. If
    // the submitter blocks instead, the searcher steals it when its spin
    // window ends, on its way to parking.
    if (queued >= 2) parking_.signalLocalWork();
  } else if (parking_.anyParked()) {
    std::lock_guard lock(mutex_);
    parking_.wakeOneLocked();
  }
  return true;
}

std::coroutine_handle<> PoolImpl::takeYield(Worker& worker, bool force) noexcept {
  if (worker.yieldCount.load(std::memory_order_relaxed) == 0) return {};
  std::lock_guard local(worker.localMutex);
  if (worker.yields.empty()) return {};
  if (!force && worker.ranSinceYield.load(std::memory_order_relaxed) < worker.yields.at(0).waiting) return {};
  const std::coroutine_handle<> handle = worker.yields.pop().handle;
  worker.yieldCount.store(worker.yields.size(), std::memory_order_relaxed);
  worker.ranSinceYield.store(0, std::memory_order_relaxed);
  return handle;
}

PoolImpl::Work PoolImpl::popLocal(Worker& worker) {
  TaskCore* raw = nullptr;
  if (!worker.local.pop(raw)) return {};
  leftQueue(/*locked=*/false);
  return Work{Ref<TaskCore>::adopt(raw), {}, false};
}

bool PoolImpl::stealFrom(Worker& victim, Ref<TaskCore>& out) noexcept {
  // Requires: mutex_ held (every caller holds it).
  TaskCore* raw = nullptr;
  while (true) {
    switch (victim.local.steal(raw)) {
      case WorkStealingDeque<TaskCore*>::Steal::taken:
        leftQueue(/*locked=*/true);
        out = Ref<TaskCore>::adopt(raw);
        return true;
      case WorkStealingDeque<TaskCore*>::Steal::empty: return false;
      case WorkStealingDeque<TaskCore*>::Steal::contended: break;  // someone else took that one: look again
    }
  }
}

PoolImpl::Work PoolImpl::stealLocked(Worker& thief) {
  for (Worker& victim : workers_) {
    // A continuation its worker has not resumed yet (it may be blocked).
    if (&victim == &thief || victim.nextContinuation.load(std::memory_order_relaxed) == nullptr) continue;
    if (void* next = victim.nextContinuation.exchange(nullptr, std::memory_order_acquire)) {
      return Work{{}, std::coroutine_handle<>::from_address(next), false};
    }
  }
  for (Worker& victim : workers_) {
    if (&victim == &thief) continue;
    if (Ref<TaskCore> task; stealFrom(victim, task)) return Work{std::move(task), {}, false};
  }
  for (Worker& victim : workers_) {  // a yield its worker has not come back to (it may be blocked)
    if (&victim == &thief) continue;
    if (std::coroutine_handle<> yielded = takeYield(victim, /*force=*/true)) return Work{{}, yielded, false, true};
  }
  return {};
}

bool PoolImpl::anyLocalWorkLocked() const noexcept {
  for (const Worker& worker : workers_) {
    if (worker.local.size() > 0) return true;
    if (worker.nextContinuation.load(std::memory_order_seq_cst) != nullptr) return true;
    if (worker.yieldCount.load(std::memory_order_seq_cst) > 0) return true;
  }
  return false;
}

PendingTask PoolImpl::takeOldestLocked(std::vector<Ref<TaskCore>>& joined) {
  TaskCore* raw = nullptr;
  if (shared_.tryPopRing(raw)) {  // the ring holds the oldest shared tasks
    leftQueue(/*locked=*/true);
    return PendingTask(Ref<TaskCore>::adopt(raw));
  }
  if (PendingTask task = shared_.pollLocked(); task.valid()) {
    leftQueue(/*locked=*/true);
    return task;
  }
  // The shared queue is empty: any places are held by tasks the pool's own
  // threads submitted. The oldest of the first local queue that has one goes
  // (each worker's oldest: the one thieves take first).
  for (Worker& worker : workers_) {
    for (Ref<TaskCore> task; stealFrom(worker, task);) {
      if (task->closeToJoins()) return PendingTask(std::move(task));  // from now on no join can start it
      joined.push_back(std::move(task));                              // the entry of a task a join ran: not a victim
    }
  }
  return {};
}

void PoolImpl::drainLocalsLocked(std::vector<PendingTask>& into, std::vector<Ref<TaskCore>>& joined) {
  for (Worker& worker : workers_) {
    for (Ref<TaskCore> task; stealFrom(worker, task);) {  // oldest first
      if (task->closeToJoins()) {
        into.push_back(PendingTask(std::move(task)));  // from now on no join can start it
      } else {
        joined.push_back(std::move(task));  // the entry of a task a join ran: neither queued nor returned
      }
    }
  }
}

}  // namespace coexec::detail
