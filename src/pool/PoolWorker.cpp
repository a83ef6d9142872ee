// SPDX-License-Identifier: BSL-1.0
// The pool as the engine's host: a worker thread's start and end, and the
// decisions the engine's loop (src/engine/Engine.h, which states the order
// of service and the no-lost-wake-up and no-lost-work invariants) asks the
// pool for: running a dequeued task (its hooks, its start under
// shutdownNow(), its count before its Future settles), a task leaving a
// queue (a place of bounded(n) given back, its waiting producers served),
// when an idle worker exits (STOP, SHUTDOWN, maximumPoolSize, keepAliveTime)
// and how it waits (the pool's clock).
//
// Invariants:
// - A task's outcome is counted before its Future settles, on the thread
//   that runs it (its worker's own counters) or in the outside ones.
// - A task started on a worker either is seen by shutdownNow() as the
//   worker's `current`, or sees STOP and starts with its token cancelled.
// Locks: mutex_, then a worker's localMutex for its `current`.

#include "coexec/ThreadPoolExecutor.h"

#include <thread>

#include "coexec/detail/Time.h"
#include "pool/PoolImpl.h"
#include "pool/PoolTimers.h"
#include "engine/EngineImpl.h"

namespace coexec::detail {

void PoolImpl::runWorker(Worker* worker, Ref<TaskCore> first) {
  tlsPool = this;
  tlsWorker = worker;
  tlsWorkerName = &worker->name;
  enterPoolThread(this, name_, *this);
  exchangeCurrentScheduler(this);
  std::vector<std::thread> toJoin;
  {
    std::lock_guard lock(mutex_);  // also waits until addWorkerLocked stored our std::thread
    toJoin.swap(exited_);
  }
  for (std::thread& t : toJoin)
    t.join();  // reap threads of workers that exited earlier
  toJoin.clear();

  engine_.run(*worker, std::move(first));
  if (room_.signalled()) serveRoomWaiters();  // this thread's exit made room
  exchangeCurrentScheduler(nullptr);
  leavePoolThread();
  tlsWorkerName = nullptr;
  tlsWorker = nullptr;
  tlsPool = nullptr;
}

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
      if (tracked) life_.inFlight.track(*task);  // shutdownNow() cancels the tokens of coroutines in flight
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
  // instead).
  const RunResult result = runAsCurrent(task, counted ? &PoolImpl::countBeforeSettle : nullptr, this);
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

std::size_t PoolImpl::inFlightLocked() const noexcept {
  // The live workers' own counts (wrapping; see InFlight.h).
  std::uint64_t net = 0;
  for (const Worker& worker : engine_.workers) {
    net += worker.counters.coroutinesStarted.load(std::memory_order_acquire);
    net -= worker.counters.coroutinesFinished.load(std::memory_order_acquire);
  }
  return life_.inFlight.totalLocked(net);
}

bool PoolImpl::quiescentLocked() const noexcept {
  return engine_.continuations.empty() && inFlightLocked() == 0 && !engine_.anyLocalWorkLocked();
}

void PoolImpl::leftQueue(bool locked) noexcept {
  // The place back, then the waiters read: either a waiting producer sees
  // the place, or we see it (Room.h).
  room_.release();
  const bool blocked = room_.anyBlocked();
  const bool waiting = room_.anyWaiting();
  if (!blocked && !waiting) return;
  if (locked) {
    room_.appearedLocked();
    return;
  }
  if (blocked) {
    std::lock_guard lock(mutex_);  // a producer between its check and its wait holds the lock
    room_.available.notify_all();
  }
  if (waiting) serveRoomWaiters();
}

WorkerExit PoolImpl::exitRuleLocked(std::size_t sharedQueued) const noexcept {
  const std::size_t inFlight = inFlightLocked();
  if (life_.stateLocked() == PoolState::stop && inFlight == 0) return WorkerExit::unlessYields;
  if (life_.stateLocked() == PoolState::shutdown && sharedQueued == 0 && inFlight == 0 &&
      !engine_.anyLocalWorkLocked()) {
    return WorkerExit::now;
  }
  // Above max (after setMaximumPoolSize): exit, unless we are the last thread
  // and there is queued work.
  const std::size_t size = engine_.workers.size();
  if (sizes_.aboveMaximumLocked(size) && (size > 1 || sharedQueued == 0)) return WorkerExit::unlessYields;
  return WorkerExit::no;
}

bool PoolImpl::idleExpiredLocked(std::size_t size, IdleTime& idle) const {
  idle.timed = sizes_.idleTimesOutLocked(size);
  idle.deadline = Clock::time_point::max();
  if (!idle.timed) return false;
  // keepAliveTime runs on the pool's clock: the steady clock's is the
  // condition variable's own timeout; a ManualClock's is an alarm on the
  // pool's timer service (onKeepAliveAlarm), fired by advance(). Only a
  // thread that may time out reads the clock.
  if (idle.since == Clock::time_point{}) idle.since = clock_.now();
  idle.deadline = detail::deadlineOn(idle.since, sizes_.keepAliveLocked());
  // An idle thread may time out even while coroutines are in flight: a
  // continuation posted to a pool without threads starts one.
  return idle.waited && clock_.now() >= idle.deadline;
}

void PoolImpl::workerParkedLocked(std::unique_lock<std::mutex>& lock) {
  if (room_.blockedLocked() > 0) room_.available.notify_all();  // an idle thread is room for a hand-off
  if (room_.waitersLocked() > 0) {  // so for submitWhenRoom(): serve without the lock (we stay on the idle stack)
    lock.unlock();
    serveRoomWaiters();
    lock.lock();
  }
}

void PoolImpl::waitParkedLocked(Worker& worker, std::unique_lock<std::mutex>& lock, const IdleTime& idle) {
  if (idle.timed && manualClock_ != nullptr) {
    bool alarmed = true;
    try {
      worker.keepAliveAlarm = timers_.schedule(idle.deadline, &PoolImpl::onKeepAliveAlarm, this);
    } catch (...) {
      alarmed = false;  // no memory for the alarm: wait for work, and look at the clock when woken
    }
    worker.wake.wait(lock, [&] { return worker.signalled; });
    if (alarmed) timers_.cancel(worker.keepAliveAlarm);  // fired already, or no longer needed
  } else if (idle.timed && idle.deadline != Clock::time_point::max()) {
    worker.wake.wait_for(lock, idle.deadline - clock_.now(), [&] { return worker.signalled; });
  } else {
    worker.wake.wait(lock, [&] { return worker.signalled; });
  }
}

}  // namespace coexec::detail
