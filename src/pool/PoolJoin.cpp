// SPDX-License-Identifier: BSL-1.0
// Joining where the joiner stands (ForkJoinPool's lesson): a coroutine on a
// thread of a pool that awaits the Future of a task the pool has not started
// yet, one that sits on a worker's local queue (fork/join work: submitted
// from the pool's own threads), runs that task at once on its own thread,
// inside the co_await, instead of suspending until a worker reaches it. Most
// children of a fork/join tree are never stolen: their parent runs them, as
// ForkJoinPool's join() does, without a trip through the scheduler. The
// queue's part is the engine's (Engine::join()); the pool's, here, the
// stack's bound and the run (runJoined()).
//
// Invariants:
// - A task runs once. The join starts it with tryStartJoined() (a CAS from
//   queued) and leaves its queue entry where it is; whoever takes that entry
//   later (the owner, a thief, a drain) finds it started by a join and drops
//   it, giving its queue place back as any dequeue does. A task on top of the
//   joiner's own queue is taken out instead, and so are the entries of
//   earlier joins found on top, so entries do not pile up under a recursion.
//   A drain that takes a task out of its entry to return or evict it
//   (shutdownNow(), discardOldest()) first closes it to joins
//   (closeToJoins(), a CAS too): the task a drain counts is never also run
//   by a join, and an entry a join started is dropped, not drained.
// - A joined task runs as a worker runs a dequeued one (the hooks, the
//   in-flight count of a coroutine, the outcome counters), on the joiner's
//   stack and without counting the thread active twice; the worker's record
//   of the task it runs (dumpThreads(), shutdownNow()'s `current`) is the
//   joined task's for the while, the joiner's again after.
// - Nesting is bounded by the thread's stack: no join once stackIsLow() (a
//   quarter of the stack, at least 64 KiB, is kept free; less under
//   ThreadSanitizer); the coroutine then suspends as before.
// - Only a worker of the pool that admitted the task joins it, and only a
//   task admitted to a local queue (TaskCore::joinable()): a scheduled task
//   waits for its deadline, a task of another pool for that pool's threads.
//   The runtime's joinInline() checks both and calls join() (Joiner) on the
//   worker's thread.
// Locks: a worker's localMutex for its `current`; no other.

#include "engine/EngineImpl.h"
#include "pool/PoolImpl.h"
#if defined(COEXEC_FAULT_INJECTION)
#include "coexec/detail/FaultInjection.h"
#endif

namespace coexec::detail {

void PoolImpl::join(TaskCore& task) noexcept {
  // The runtime's joinInline() calls this on one of our workers only, for a
  // joinable task of ours.
  if (stackIsLow()) return;  // deep enough: the coroutine suspends instead
#if defined(COEXEC_FAULT_INJECTION)
  FaultInjection::onBeforeJoin();  // race tests: a cancel between the await and the join
#endif
  engine_.join(*tlsWorker, task);  // takes the task off the queue, or starts it in place
}

void PoolImpl::cancelledInQueue(Worker& worker) noexcept {
  addOwn<std::uint64_t>(worker.counters.cancelled, 1, std::memory_order_release);
}

inline void PoolImpl::runJoined(Worker& worker, Ref<TaskCore>& task) noexcept {
  const bool tracked = task->hasToken();
  Ref<TaskCore> outerCurrent;
  if (tracked) {
    bool stopped = false;
    {
      std::lock_guard local(worker.localMutex);
      outerCurrent = std::exchange(worker.current, task);
      // As in runTask(): shutdownNow() either sees this task as current, or
      // we see STOP here and start it with its token cancelled.
      stopped = stateMirror_.load(std::memory_order_seq_cst) == PoolState::stop;
    }
    if (stopped) task->requestTokenCancellation();  // outside the lock: callbacks are user code
  }
  runRecorded(worker, task);
  if (tracked) {
    Ref<TaskCore> joined;
    {
      std::lock_guard local(worker.localMutex);
      joined = std::exchange(worker.current, std::move(outerCurrent));
    }
  }  // `joined` dropped here, outside the lock
}

}  // namespace coexec::detail
