// SPDX-License-Identifier: BSL-1.0
// Coroutines on the pool: a continuation resuming here after an await
// (post), a coroutine yielding to the work already waiting (postYield), the
// pool's hold on a coroutine in flight (retain(), release(), leaveFlight();
// a coroutine task's end, which may come on any thread, is PoolTaskRun.cpp's
// coroutineEnded()), a coroutine task run outside the workers (runOutside())
// and a coroutine task creating its token on demand (coroutineTokenCreated).
//
// Invariants:
// - Continuations are never rejected, even after shutdown; if the pool has
//   terminated (or is running its terminated hook), or no thread can be
//   started, the continuation runs on the posting thread, never lost.
// - A coroutine task is in flight from its start to its finish, and the pool
//   does not terminate while one is. Its finish touches the pool only until
//   the decrement that may let the pool terminate (InFlight.h).
// - A guest coroutine (running on a worker, not a task in flight here) is
//   held in flight by each awaiter it suspends in (retain()) until that
//   awaiter has posted it back (release()): the same count, the same rule.
// - A coroutine task the pool runs outside its workers (runOutside(): a
//   caller under callerRuns(), a temporary thread) is held in flight the
//   same way from its start until its state is released, wherever it
//   finishes: it never outlives the pool, nor does its report.
// Locks: mutex_ for engine_.continuations; InFlight's own for the tracked tasks;
// a worker's localMutex for its yields.

// In flight: the counts and the rules of a finish on another thread are
// InFlight's (InFlight.h). On the pool's side: a worker brings its own
// counts to the lock before it parks or exits (Engine::takeLocked() asks exitRuleLocked()), and one
// that exits after shutdown wakes the idle ones (workerExitedLocked), so
// that none stays parked on a total it read before another worker's last
// finish. A worker's own finish needs no announcement (it is alive: the
// pool cannot terminate under it); after shutdown it takes mutex_ to see
// whether the pool can now terminate (coroutineEnded()).

#include "coexec/ThreadPoolExecutor.h"

#include <algorithm>
#include <cassert>
#include <cstdint>

#include "engine/EngineImpl.h"
#include "pool/PoolImpl.h"

namespace coexec::detail {

void PoolImpl::post(std::coroutine_handle<> handle) noexcept {
  // From one of our own threads: its worker's slot (the engine's post()).
  Worker* const here = tlsPool == this ? tlsWorker : nullptr;
  // Not queued: the pool has terminated (or is running its terminated
  // hook), no thread could be started for it, or there was no memory to
  // queue it. Resumed here rather than lost.
  if (const std::coroutine_handle<> unqueued = engine_.post(here, handle)) resume(unqueued);
}

void PoolImpl::postYield(std::coroutine_handle<> handle) noexcept {
  Worker* worker = tlsWorker;
  assert(worker != nullptr && tlsPool == this && "postYield: only from a thread of this pool");
  if (const std::coroutine_handle<> unqueued = engine_.postYield(*worker, handle)) resume(unqueued);
}

bool PoolImpl::startWorkerLocked(FactoryErrors& errors) {
  PendingTask none;
  return addWorkerLocked(none, errors);
}

bool PoolImpl::runOutside(Ref<TaskCore>& task, Outside where) noexcept {
  if (where == Outside::caller) {
    // Under the lock: the pool cannot terminate meanwhile, and one that is
    // not running refuses the task (as callerRuns() does after shutdown).
    std::lock_guard lock(mutex_);
    if (life_.stateLocked() != PoolState::running) return false;
    life_.inFlight.hold();
  } else {
    // A temporary thread keeps the pool from terminating (its place in starts_)
    // until it has dropped its references: the increment cannot race with
    // termination, and the thread's lock on its way out publishes it.
    life_.inFlight.hold();
  }
  Ref<TaskCore> core = std::move(task);
  if (!core->tryStart()) {  // cancelled meanwhile: settled, nothing to run or wait for
    core = Ref<TaskCore>();
    release();
    return true;
  }
  // Hands our reference over: the watch drops it, then the hold.
  core.detach()->startCoroutine(where == Outside::caller ? &callerWatch_ : &temporaryWatch_);
  return true;
}

void PoolImpl::OutsideWatch::coroutineEnded(TaskCore& task, std::exception_ptr error) noexcept {
  const RunResult result = task.settleCoroutine(std::move(error));
  if (result.outcome == Outcome::failed) {
    if (!task.hasFuture()) {
      pool_.reportUncaught(result.error, TaskInfo{pool_.name_, threadName_, false, task.priority(), task.name()});
    } else {
      pool_.sink_->armIfUnread(task, threadName_);
    }
  }
  // The task's state goes before the hold: a pool that waits for the
  // coroutine (close(), the destructor) returns only after it is released
  // (and after a failure nobody reads, if the Future is gone already, has
  // been reported from its destructor).
  task.release();
  pool_.release();  // the last access to the pool
}

bool PoolImpl::retain(const TaskCore* task) noexcept {
  // Called on one of our workers (the only threads whose scheduler we are),
  // which keeps the pool from terminating meanwhile: the increment cannot
  // race with termination. A coroutine of one of our tasks in flight needs
  // no hold: that task keeps the pool. Any other (a foreign coroutine type,
  // a coroutine of another pool's task, a guest) takes one.
  if (task != nullptr && task->owner == this && poolState(*task).inFlight()) return false;
  life_.inFlight.hold();
  return true;
}

void PoolImpl::release() noexcept { leaveFlight(InFlight::kGuestShard); }

void PoolImpl::leaveFlight(std::uint8_t shard) noexcept {
  // Nothing below may touch the pool after the decrement that can let it
  // terminate (InFlight.h).
  if (life_.leaveIfRunning(shard)) return;
  std::unique_lock lock(mutex_);
  life_.inFlight.leaveLocked(shard);
  if (inFlightLocked() == 0) {
    engine_.parking.wakeAllLocked();
    tryTerminateLocked(lock);
  }
  // The lock is released last: close() frees the pool only after it has
  // taken the lock and seen TERMINATED.
}

void PoolImpl::coroutineTokenCreated(TaskCore& task) {
  // Only a task runStarted() started has the pool as its observer: it is in
  // flight, in its shard.
  life_.inFlight.track(task, poolState(task).shard());  // untracked by coroutineEnded(): the task has a token now
  // As in runTask(): shutdownNow() stores STOP and then collects the tracked
  // tasks (InFlight.h). If it collected them before we added the task, its
  // store happened before our lock and we see STOP here; otherwise it
  // cancels the token itself.
  if (stateMirror_.load(std::memory_order_seq_cst) == PoolState::stop) task.requestTokenCancellation();
}

}  // namespace coexec::detail
