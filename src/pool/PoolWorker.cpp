// SPDX-License-Identifier: BSL-1.0
// The pool as the engine's host, the thread's side: a worker thread's start
// and end, and the decisions the engine's loop (src/engine/Engine.h, which
// states the order of service and the no-lost-wake-up and no-lost-work
// invariants) asks the pool for between tasks: when an idle worker exits
// (STOP, SHUTDOWN, maximumPoolSize, keepAliveTime) and how it waits (the
// pool's clock). What the loop asks the pool to do with a task is
// PoolTaskRun.cpp's; a task leaving a queue gives its place back through
// admission (PoolAdmission.cpp).
//
// Invariants:
// - A worker exits only by exitRuleLocked() or idleExpiredLocked(), under
//   mutex_, with its own in-flight counts brought to the lock; one that
//   exits after shutdown wakes the idle ones.
// - keepAliveTime runs on the pool's clock: a ManualClock's wait ends only
//   by advance() (an alarm on the pool's timers) or new work.
// Locks: mutex_.

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

  runLoop(*worker, std::move(first));         // the engine's loop (PoolTaskRun.cpp)
  if (room_.signalled()) serveRoomWaiters();  // this thread's exit made room
  exchangeCurrentScheduler(nullptr);
  leavePoolThread();
  tlsWorkerName = nullptr;
  tlsWorker = nullptr;
  tlsPool = nullptr;
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
