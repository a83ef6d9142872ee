// SPDX-License-Identifier: BSL-1.0
// A task's run on the pool: what the engine's loop (src/engine/Engine.h)
// asks the pool to do with a task it took (runTask) or a join started
// (runJoined), and the end of a coroutine task (coroutineEnded): the hooks,
// the start under shutdownNow(), the in-flight count of a coroutine, the
// outcome counters, the failure report. The engine's loop is compiled here
// (runLoop()), so that these calls are inlined into it.
//
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
// - A task's outcome is counted before its Future settles, on the thread
//   that runs it (its worker's own counters) or in the outside ones.
// - A task started on a worker either is seen by shutdownNow() as the
//   worker's `current`, or sees STOP and starts with its token cancelled.
// - A coroutine task is in flight from its start (runStarted()) until
//   coroutineEnded() has settled it, run its hook and given the pool back
//   its count; the task's reference is dropped last.
// - The code a settlement resumes inline (the awaiter's continuation) runs
//   after the pool's accounting of the task: its counters, its afterExecute
//   hook and failure report, and, on a worker, a coroutine task's in-flight
//   count (off a worker that count holds the pool for the awaiter's code and
//   is given back after it). Only the engine's activeCount and the worker's
//   record of the task come after it.
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
//   The runtime's joinInline() checks both, and the stack, and calls join()
//   (Joiner) on the worker's thread.
// Locks: mutex_ (only after shutdown, to see whether the pool can
// terminate), then a worker's localMutex for its `current`.

#include "coexec/ThreadPoolExecutor.h"

#include "engine/EngineImpl.h"
#include "pool/PoolImpl.h"
#include "pool/PoolTimers.h"
#if defined(COEXEC_FAULT_INJECTION)
#include "coexec/detail/FaultInjection.h"
#endif

namespace coexec::detail {

void PoolImpl::runLoop(Worker& worker, Ref<TaskCore> first) { engine_.run(worker, std::move(first)); }

inline void PoolImpl::runTask(Worker& worker, Ref<TaskCore>& task) {
  // Only a task with a token can observe shutdownNow(): track just those.
  const bool tracked = task->hasToken();
  if (tracked) {
    bool stopped = false;
    {
      std::lock_guard local(worker.localMutex);
      worker.current = task;
      // shutdownNow() stores STOP and then reads every worker's current under
      // its localMutex: it either sees this task, or we see STOP here. A task
      // handed over or popped just before shutdownNow() (and so neither
      // drained nor seen running) starts with its token cancelled.
      stopped = stateMirror_.load(std::memory_order_seq_cst) == PoolState::stop;
    }
    if (stopped) task->requestTokenCancellation();  // outside the lock: callbacks are user code
  }
  if (!task->tryStart()) {
    // Cancelled while queued (or, since the engine's look, started by a
    // join: its entry counts nowhere).
    if (!task->startedByJoin()) addOwn<std::uint64_t>(worker.counters.cancelled, 1, std::memory_order_release);
  } else {
    runRecorded(worker, task);
  }
  if (tracked) {
    std::lock_guard local(worker.localMutex);
    worker.current = Ref<TaskCore>();
  }
}

void PoolImpl::runStarted(Worker& worker, Ref<TaskCore>& task) {
  Counters& counters = worker.counters;
  if (task->isCoroutine()) {
    const bool tracked = task->hasToken();
    bool started = true;
    if (hooks_.beforeExecute) {
      const TaskInfo info{name_, worker.name, task->hasFuture(), task->priority(), task->name()};
      try {
        hooks_.beforeExecute(info);
      } catch (...) {
        const std::exception_ptr error = std::current_exception();
        addOwn<std::uint64_t>(counters.failed, 1, std::memory_order_release);  // before the settlement
        task->failRunning(error);
        if (!task->hasFuture()) {
          reportUncaught(error, info);
        } else {
          sink_->armIfUnread(*task, worker.name);
        }
        started = false;
      }
    }
    if (started) {
      // In flight from now on, in this worker's own count (see PoolImpl.h).
      poolState(*task).enterFlight(static_cast<std::uint8_t>(worker.number % InFlight::kShards));
      addOwn<std::uint64_t>(counters.coroutinesStarted, 1, std::memory_order_relaxed);
      // shutdownNow() cancels the tokens of coroutines in flight.
      if (tracked) life_.inFlight.track(*task, poolState(*task).shard());
      // Hands over our reference. Counted, settled and let go by
      // coroutineEnded(), maybe before this returns.
      task.detach()->startCoroutine(this);
    }
  } else {
    runCallable(worker, *task);
  }
}

void PoolImpl::runCallable(Worker& worker, TaskCore& task) {
  // Built only for a hook or a report: a task that succeeds on a pool
  // without hooks reads none of it.
  const auto info = [&] { return TaskInfo{name_, worker.name, task.hasFuture(), task.priority(), task.name()}; };
  const bool counted = poolState(task).countsInStats();  // false: a periodic run
  if (hooks_.beforeExecute) {
    try {
      hooks_.beforeExecute(info());
    } catch (...) {
      const std::exception_ptr error = std::current_exception();
      if (counted) count(Outcome::failed);  // before the settlement
      task.failRunning(error);
      if (!task.hasFuture()) {
        reportUncaught(error, info());
      } else if (counted) {
        sink_->armIfUnread(task, worker.name);
      }
      if (!counted) periodicRunNotStarted(static_cast<PeriodicRun&>(task).state(), error);
      return;
    }
  }
  // Counted before the settlement (a periodic run counts with its schedule
  // instead). The awaiter's continuation runs after the hook and the report:
  // code resumed inline by the settlement finds the task accounted for.
  TaskCore::Deferred resumeAwaiter;
  const RunResult result = runAsCurrent(task, counted ? &PoolImpl::countBeforeSettle : nullptr, this, &resumeAwaiter);
  if (hooks_.afterExecute) {
    try {
      hooks_.afterExecute(info(), result.error);
    } catch (...) {
      printDropped("the afterExecute hook", name_, worker.name, std::current_exception());
    }
  }
  // A periodic run reports its own error, before its schedule ends. A
  // submitted task's failure is the Future's: reported only if nobody reads
  // it (armed here, reported when the task's last reference goes).
  if (result.outcome == Outcome::failed && counted) {
    if (!task.hasFuture()) {
      reportUncaught(result.error, info());
    } else {
      sink_->armIfUnread(task, worker.name);
    }
  }
  resumeAwaiter();  // the engine's caller still holds the task
}

void PoolImpl::count(Outcome outcome) noexcept {
  // release: a stats() reader that sees the outcome sees the task's admission
  // (which happened before the task was handed to this thread).
  const bool own = tlsPool == this && tlsWorker != nullptr;
  Counters& counters = own ? tlsWorker->counters : tallies_.outside();
  std::atomic<std::uint64_t>& counter = outcome == Outcome::completed ? counters.completed
                                        : outcome == Outcome::failed  ? counters.failed
                                                                      : counters.cancelled;
  if (own) {
    addOwn<std::uint64_t>(counter, 1, std::memory_order_release);
  } else {
    counter.fetch_add(1, std::memory_order_release);  // the outside counters have many writers
  }
}

void PoolImpl::join(TaskCore& task) noexcept {
  // The runtime's joinInline() calls this on one of our workers only, for a
  // joinable task of ours, with stack to spare.
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

void PoolImpl::coroutineEnded(TaskCore& task, std::exception_ptr error) noexcept {
  count(TaskCore::outcomeOf(error));  // before the settlement: whoever sees the Future settle sees the count
  // The awaiter's continuation runs after the pool's accounting of the task
  // (hook, report, in-flight count on a worker): code it resumes inline
  // finds the task accounted for, and none of that waits for the awaiter's
  // code.
  TaskCore::Deferred resumeAwaiter;
  const RunResult result = task.settleCoroutine(std::move(error), &resumeAwaiter);
  // Built only for a hook or a report: a coroutine that succeeds on a pool
  // without hooks reads none of it.
  if (hooks_.afterExecute || result.outcome == Outcome::failed) coroutineEndedSlow(task, result);
  if (task.runTiming.clock != nullptr) recordCoroutineRun(task);  // timed by runTimed(): recordLatency
  if (task.hasToken()) life_.inFlight.untrack(task, poolState(task).shard());
  if (Worker* const worker = tlsWorker; worker != nullptr && tlsPool == this) {
    // On one of our workers: its own count, a plain store (InFlight.h). The
    // pool cannot terminate under a live worker; after shutdown, see whether
    // it can now.
    addOwn<std::uint64_t>(worker->counters.coroutinesFinished, 1, std::memory_order_relaxed);
    if (stateMirror_.load(std::memory_order_acquire) != PoolState::running) {
      std::unique_lock lock(mutex_);
      if (inFlightLocked() == 0) {
        engine_.parking.wakeAllLocked();
        tryTerminateLocked(lock);
      }
    }
    // The pool cannot terminate under this worker: the awaiter's code may
    // touch it.
    resumeAwaiter();
  } else {
    // Elsewhere the task's in-flight count is what holds the pool for the
    // awaiter's code, which may touch it: given back after.
    resumeAwaiter();
    leaveFlight(poolState(task).shard());
  }
  // The reference the task handed over: dropped last (the task's state is
  // not the pool's, which may be gone by now). The continuation above ran
  // while the task was held, as inside a settlement.
  task.release();
}

void PoolImpl::coroutineEndedSlow(TaskCore& task, const RunResult& result) noexcept {
  const TaskInfo info{name_, tlsWorkerName ? std::string_view(*tlsWorkerName) : std::string_view("(outside the pool)"),
                      task.hasFuture(), task.priority(), task.name()};
  if (hooks_.afterExecute) {
    try {
      hooks_.afterExecute(info, result.error);
    } catch (...) {
      printDropped("the afterExecute hook", name_, info.threadName, std::current_exception());
    }
  }
  if (result.outcome == Outcome::failed) {
    if (!task.hasFuture()) {
      reportUncaught(result.error, info);
    } else {
      sink_->armIfUnread(task, info.threadName);  // before leaveFlight(): the pool is alive
    }
  }
}

}  // namespace coexec::detail
