// SPDX-License-Identifier: BSL-1.0
// A worker's local queue as the pool's drains use it: they take local work
// out for shutdownNow() and discardOldest(), with the places of bounded(n)
// given back (the pool's own threads push through admission:
// PoolAdmission.cpp's tryPushLocal(); the engine pops and steals: Engine.h).
// The worker's own operations on its queue, its next-continuation slot and
// its yields are PoolWorker's (src/engine/PoolWorker.h), and the order a
// thief takes other workers' work in is WorkerList's
// (src/engine/WorkerList.h); each states its rules.
//
// Invariants (see src/engine/Engine.h for the worker loop that serves them):
// - A drain takes the oldest task of each queue, under mutex_, and gives its
//   place back; a queue entry of a task a join started is dropped, never
//   returned or evicted (PoolTaskRun.cpp), and a task a drain returns is
//   closed to joins first.
// Locks: mutex_.

#include "coexec/ThreadPoolExecutor.h"

#include <vector>

#include "engine/EngineImpl.h"
#include "pool/PoolImpl.h"

namespace coexec::detail {

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
