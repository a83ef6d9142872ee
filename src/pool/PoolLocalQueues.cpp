// SPDX-License-Identifier: BSL-1.0
// A worker's local queue as the pool uses it: submissions from the pool's
// own threads (tryPushLocal), and the drains that take local work out for
// shutdownNow() and discardOldest(), with the places of bounded(n) given
// back (the engine pops and steals: Engine.h). The worker's own operations on its
// queue, its next-continuation slot and its yields are PoolWorker's
// (src/engine/PoolWorker.h), and the order a thief takes other workers'
// work in is WorkerList's (src/engine/WorkerList.h); each states its rules.
//
// Invariants (see src/engine/Engine.h for the worker loop that serves them):
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

#include "engine/EngineImpl.h"
#include "pool/PoolImpl.h"

namespace coexec::detail {

bool PoolImpl::tryPushLocal(PendingTask& task) {
  Worker* worker = tlsWorker;
  if (!engine_.localQueues || worker == nullptr || tlsPool != this) return false;
  // Below corePoolSize, admission starts a new thread for the task (step 1):
  // the task must not wait behind its submitter.
  if (sizes_.belowCore(engine_.sizeMirror.load(std::memory_order_relaxed))) return false;
  // The capacity of bounded(n) covers the local queues too.
  if (!room_.reserve()) return false;
  if (stateMirror_.load(std::memory_order_seq_cst) != PoolState::running) {
    room_.release();
    return false;
  }
  Ref<TaskCore>& core = PendingTaskAccess::core(task);
  core->owner = this;
  if (core->hasFuture()) core->markJoinable();  // an awaiter on this pool may run it (PoolJoin.cpp)
  stampAdmission(*core);
  addOwn<std::uint64_t>(worker->counters.tasks, 1, std::memory_order_relaxed);  // before anyone can run it
  // shutdownNow() stores STOP and then drains the local queues. A push that
  // passed the check above just before it is either drained or, if it lands
  // after the drain, run by this worker (which pops its own queue before it
  // can exit), like a task a worker dequeued just before the drain.
  try {
    engine_.pushLocal(*worker, core);  // publishes the task, then wakes as Parking.h asks
  } catch (...) {
    addOwn<std::uint64_t>(worker->counters.tasks, -1, std::memory_order_relaxed);
    room_.release();
    throw;
  }
  return true;
}

bool PoolImpl::stealFrom(Worker& victim, Ref<TaskCore>& out) noexcept {
  TaskCore* raw = nullptr;
  if (!WorkerList::stealTaskLocked(victim, raw, [this] { leftQueue(/*locked=*/true); })) return false;
  out = Ref<TaskCore>::adopt(raw);
  return true;
}

PendingTask PoolImpl::takeOldestLocked(std::vector<Ref<TaskCore>>& joined) {
  TaskCore* raw = nullptr;
  if (engine_.shared.tryPopRing(raw)) {  // the ring holds the oldest shared tasks
    leftQueue(/*locked=*/true);
    return PendingTaskAccess::make(Ref<TaskCore>::adopt(raw));
  }
  if (PendingTask task = engine_.shared.pollLocked(); task.valid()) {
    leftQueue(/*locked=*/true);
    return task;
  }
  // The shared queue is empty: any places are held by tasks the pool's own
  // threads submitted. The oldest of the first local queue that has one goes
  // (each worker's oldest: the one thieves take first).
  for (Worker& worker : engine_.workers) {
    for (Ref<TaskCore> task; stealFrom(worker, task);) {
      if (task->closeToJoins()) return PendingTaskAccess::make(std::move(task));  // from now on no join can start it
      joined.push_back(std::move(task));                              // the entry of a task a join ran: not a victim
    }
  }
  return {};
}

void PoolImpl::drainLocalsLocked(std::vector<PendingTask>& into, std::vector<Ref<TaskCore>>& joined) {
  for (Worker& worker : engine_.workers) {
    for (Ref<TaskCore> task; stealFrom(worker, task);) {  // oldest first
      if (task->closeToJoins()) {
        into.push_back(PendingTaskAccess::make(std::move(task)));  // from now on no join can start it
      } else {
        joined.push_back(std::move(task));  // the entry of a task a join ran: neither queued nor returned
      }
    }
  }
}

}  // namespace coexec::detail
