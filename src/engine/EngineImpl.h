// SPDX-License-Identifier: BSL-1.0
#pragma once

// The definitions of Engine's loop (Engine.h states its order of service and
// invariants). Included by the one file that instantiates Engine for its
// host; every other file sees the declarations alone.

#include <chrono>
#include <thread>
#include <utility>

#include "coexec/detail/Scheduler.h"
#include "engine/Engine.h"
#include "foundation/SpinWait.h"

namespace coexec::detail {

template <class Host>
void Engine<Host>::run(PoolWorker& worker, Ref<TaskCore> first) {
  // A worker started with a first task counts as active from its creation,
  // so that activeCount never lags behind taskCount.
  if (first) execute(worker, Work{std::move(first), {}, true});
  while (true) {
    Work work;
    if (std::coroutine_handle<> next = worker.takeNext()) {
      work.continuation = next;
    } else if (std::coroutine_handle<> yielded = worker.takeYield(/*force=*/false)) {
      work = Work{{}, yielded, false, true};
    } else {
      work = popLocal(worker);
      // Due timer tasks before the shared queue: they are admitted work
      // whose time has come (a relaxed look first: nearly always none).
      if (!work && due.any(std::memory_order_relaxed)) work = popDue();
      if (!work) work = popInject(/*locked=*/false);
    }
    if (!work) {
      std::unique_lock lock(mutex_);
      work = takeLocked(worker, lock);
      if (!work) {
        host_.workerExitedLocked(&worker, lock);
        return;
      }
    }
    host_.tookWork();
    // Counts toward the yields waiting behind the work that was queued.
    if (!work.yield) worker.noteRan();
    execute(worker, std::move(work));
  }
}

template <class Host>
void Engine<Host>::execute(PoolWorker& worker, Work work) {
  PoolCounters& counters = worker.counters;  // this thread's own (see PoolCounters)
  if (!work.counted) addOwn<std::size_t>(counters.active, 1, std::memory_order_relaxed);
  if (work.continuation) {
    resume(work.continuation);
    addOwn<std::size_t>(counters.active, -1, std::memory_order_relaxed);
    return;
  }
  Ref<TaskCore> task = std::move(work.task);
  if (task->startedByJoin()) {
    // The entry of a task a join ran where it was awaited: it left its
    // queue now (its place is given back); nothing to run or count.
    task = Ref<TaskCore>();
    addOwn<std::size_t>(counters.active, -1, std::memory_order_relaxed);
    return;
  }
  // For dumpThreads(): which task runs, since when (a coarse clock: a few ns).
  counters.running.store(runningWord(task->nameId()), std::memory_order_relaxed);
  host_.runTask(worker, task);
  task = Ref<TaskCore>();  // user captures are destroyed here, outside every lock
  counters.running.store(0, std::memory_order_relaxed);
  addOwn<std::size_t>(counters.active, -1, std::memory_order_relaxed);
}

template <class Host>
typename Engine<Host>::Work Engine<Host>::popLocal(PoolWorker& worker) {
  TaskCore* raw = nullptr;
  if (!worker.local.pop(raw)) return {};
  host_.leftQueue(/*locked=*/false);
  return Work{Ref<TaskCore>::adopt(raw), {}, false};
}

template <class Host>
typename Engine<Host>::Work Engine<Host>::popInject(bool locked) {
  TaskCore* raw = nullptr;
  if (!shared.tryPopRing(raw)) return {};
  host_.leftQueue(locked);
  // More behind it and nobody searching: get a parked worker going. (Cheapest
  // test first: the parked count rarely changes, the ring's tail every push.)
  if (parking.anyParked() && !parking.anySearching() && !shared.ringEmpty()) {
    if (locked) {
      parking.wakeOneLocked();
    } else {
      std::lock_guard lock(mutex_);
      parking.wakeOneLocked();
    }
  }
  return Work{Ref<TaskCore>::adopt(raw), {}, false};
}

template <class Host>
typename Engine<Host>::Work Engine<Host>::popDue() {
  TaskCore* task = due.pop();
  if (task == nullptr) return {};
  return Work{Ref<TaskCore>::adopt(task), {}, false};
}

template <class Host>
typename Engine<Host>::Work Engine<Host>::stealLocked(PoolWorker& thief) {
  const StolenWork stolen = workers.stealLocked(thief, [this] { host_.leftQueue(/*locked=*/true); });
  if (stolen.task != nullptr) return Work{Ref<TaskCore>::adopt(stolen.task), {}, false};
  return Work{{}, stolen.continuation, false, stolen.yield};
}

template <class Host>
bool Engine<Host>::handOffLocked(PendingTask& task) {
  PoolWorker* worker = parking.nextLocked();
  if (worker == nullptr) return false;
  worker->handoff = std::move(PendingTaskAccess::core(task));
  worker->counters.active.fetch_add(1, std::memory_order_relaxed);
  worker->counters.tasks.fetch_add(1, std::memory_order_relaxed);
  parking.wakeOneLocked();  // wakes `worker`
  return true;
}

template <class Host>
void Engine<Host>::wakeHelperLocked() {
  // Work remains after the taker's share: get another worker going, unless
  // one is already searching (it will find the rest).
  const bool more = parking.sharedWork() > 0 || !shared.ringEmpty() || due.any(std::memory_order_relaxed);
  if (more && !parking.anySearching()) parking.wakeOneLocked();
}

/// How long a worker spins for work before it parks. Longer than a typical
/// gap between submissions of a busy producer, far shorter than the ~25 us
/// a futex wake-up costs the submitter and the wakee together.
inline constexpr auto kEngineSpinWindow = std::chrono::microseconds(20);

template <class Host>
void Engine<Host>::spinForWorkLocked(std::unique_lock<std::mutex>& lock) {
  // Synchronous and priority queues keep the plain protocol: a hand-off needs
  // a parked worker on the idle stack, and a priority queue is the slow path.
  if (!localQueues || !host_.runningLocked()) return;
  const std::size_t signal = parking.beginSearch();
  lock.unlock();
  spinUntil(
      [&] {
        // A fork that saw nobody searching does not signal; the recheck
        // under the lock after the window finds its task.
        return parking.sharedWork() > 0 || due.any() || parking.localWorkSignalled(signal) || !shared.ringEmpty() ||
               !host_.running();
      },
      kEngineSpinWindow);
  parking.endSearch();  // before the lock (Parking.h): the recheck under it finds what was published
  lock.lock();
}

template <class Host>
typename Engine<Host>::Work Engine<Host>::takeLocked(PoolWorker& worker, std::unique_lock<std::mutex>& lock) {
  IdleTime idle;
  bool spun = false;
  while (true) {
    if (worker.handoff) return Work{std::move(worker.handoff), {}, true};
    // Its own yields are continuations of admitted work too (run even after
    // shutdown): one that is due now, or any before the worker would exit.
    if (std::coroutine_handle<> yielded = worker.takeYield(/*force=*/false)) return Work{{}, yielded, false, true};
    const auto exitUnlessYields = [&worker]() -> Work {
      if (std::coroutine_handle<> yielded = worker.takeYield(/*force=*/true)) return Work{{}, yielded, false, true};
      return {};
    };
    // Continuations first: they finish work already admitted, even after shutdown.
    if (!continuations.empty()) {
      Work work{{}, continuations.pop(), false};
      publishSharedWorkLocked();
      wakeHelperLocked();
      return work;
    }
    // Then timer work that became due: admitted, never rejected, run even
    // after shutdown (the host drains it when it must not run).
    if (Work work = popDue()) return work;
    // (Pending timers do not keep a thread: the one that fires starts one.)
    switch (host_.exitRuleLocked(shared.sizeLocked())) {
      case WorkerExit::no: break;
      case WorkerExit::now: return {};
      case WorkerExit::unlessYields: return exitUnlessYields();
    }
    if (Work work = popInject(/*locked=*/true)) return work;
    if (!shared.ringEmpty()) {  // a push between claim and publish: a moment (SharedQueue.h)
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
      continue;
    }
    if (PendingTask next = shared.pollLocked(); next.valid()) {  // the overflow's oldest go back to the ring
      host_.leftQueue(/*locked=*/true);
      publishSharedWorkLocked();
      wakeHelperLocked();
      return Work{std::move(PendingTaskAccess::core(next)), {}, false};
    }
    if (Work stolen = stealLocked(worker)) return stolen;
    if (Work yielded = exitUnlessYields()) return yielded;  // nothing else is waiting
    if (!spun) {
      spun = true;
      spinForWorkLocked(lock);
      continue;  // the host's state may have changed while the lock was released
    }
    if (host_.idleExpiredLocked(workers.size(), idle)) return exitUnlessYields();
    parking.parkLocked(worker);
    // Pushed (locally or to the shared ring, without the lock) before it
    // could see us parked: take it instead of sleeping (Parking.h).
    if (anyLocalWorkLocked() || !shared.ringEmpty() || due.any()) {
      parking.unparkLocked(worker);
      continue;
    }
    host_.workerParkedLocked(lock);
    host_.waitParkedLocked(worker, lock, idle);
    if (!worker.signalled) parking.unparkLocked(worker);  // timed out
    idle.waited = true;
  }
}

}  // namespace coexec::detail
