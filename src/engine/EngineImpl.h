// SPDX-License-Identifier: BSL-1.0
#pragma once

// The definitions of Engine's operations (Engine.h states the order of
// service and the invariants). Included by the host's files that call them,
// where the host's definitions are visible too, so that a host call on a
// task's path compiles to no call at all.

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
  host_.leftLocalQueue(worker);
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
std::coroutine_handle<> Engine<Host>::post(PoolWorker* here, std::coroutine_handle<> handle) noexcept {
  if (here != nullptr) {
    // A hop from one of our own threads: the worker's next-continuation slot.
    const std::coroutine_handle<> displaced = here->putNext(handle);
    if (!displaced) {
      // Published by the seq_cst exchange (Parking.h; a parking worker looks
      // at every slot). In steady state the other workers search or are busy.
      if (parking.wakeWanted()) {
        std::lock_guard lock(mutex_);
        parking.wakeOneLocked();
      }
      return {};
    }
    handle = displaced;  // the older one goes to the shared continuations
  }
  typename Host::FactoryErrors errors;
  {
    std::lock_guard lock(mutex_);
    // A host that takes no more continuations (about to be gone: a thread
    // started now would outlive it) has the caller resume it instead.
    bool queued = false;
    if (host_.acceptsContinuationsLocked()) {
      try {
        continuations.push(handle);
        queued = true;
      } catch (...) {  // out of memory growing the ring: resumed by the caller
      }
    }
    if (queued) {
      publishSharedWorkLocked();
      if (parking.anySearching()) return {};                       // a searching worker takes it
      if (parking.wakeOneLocked() || !workers.empty()) return {};  // else a busy worker takes it next
      if (host_.startWorkerLocked(errors)) return {};
      (void)continuations.popBack();  // ours: the newest, the lock held since the push
      publishSharedWorkLocked();
    }
  }
  host_.reportFactoryErrors(errors);
  return handle;
}

template <class Host>
std::coroutine_handle<> Engine<Host>::postYield(PoolWorker& here, std::coroutine_handle<> handle) noexcept {
  // What is waiting now: this worker's slot and local queue, and the shared
  // queues (sizes read without the lock: a moment's count is enough).
  const std::size_t waiting = here.waitingHere() + parking.sharedWork() + shared.ringSize();
  if (waiting == 0 && here.yieldCount.load(std::memory_order_relaxed) == 0) {
    // Nothing to yield to: the slot, as any continuation (a yield in a loop
    // on an otherwise idle pool costs no lock).
    return post(&here, handle);
  }
  if (!here.pushYield(handle, waiting)) return post(&here, handle);  // out of memory: the plain continuation path
  return {};
}

template <class Host>
void Engine<Host>::pushLocal(PoolWorker& worker, Ref<TaskCore>& task) {
  // The seq_cst push publishes the task (Parking.h: a parking worker reads
  // every local queue's size).
  const std::size_t queued = worker.local.push(task.get());  // throws only if its array cannot grow
  (void)task.detach();                                       // the queue holds the reference now
  if (parking.anySearching()) {
    // Tell the searcher only when there is more than this worker will take
    // next: a lone task (a chain, each task submitting the next) stays with
    // its submitter, which runs it as soon as the current task returns. If
    // the submitter blocks instead, the searcher steals it when its spin
    // window ends, on its way to parking.
    if (queued >= 2) parking.signalLocalWork();
  } else if (parking.anyParked()) {
    std::lock_guard lock(mutex_);
    parking.wakeOneLocked();
  }
}

template <class Host>
void Engine<Host>::join(PoolWorker& worker, TaskCore& task) noexcept {
  Ref<TaskCore> ref;
  // The top of our own queue: entries of earlier joins go, and the task
  // itself, if it is next, comes out (no entry left behind).
  for (TaskCore* raw = nullptr; worker.local.pop(raw);) {
    if (raw == &task) {
      host_.leftLocalQueue(worker);
      ref = Ref<TaskCore>::adopt(raw);
      if (!task.tryStart()) {  // cancelled while queued: settled, counted as the loop counts it
        host_.cancelledInQueue(worker);
        return;
      }
      break;
    }
    if (raw->startedByJoin()) {
      host_.leftLocalQueue(worker);
      Ref<TaskCore>::adopt(raw);  // dropped: outside every lock
      continue;
    }
    worker.local.pushBack(raw);
    break;
  }
  if (!ref) {
    if (!task.tryStartJoined()) return;  // started, stolen or settled meanwhile: the await goes on as before
    task.addRef();                       // ours while it runs; its entry keeps the queue's
    ref = Ref<TaskCore>::adopt(&task);
  }
  PoolCounters& counters = worker.counters;
  const std::uint64_t outerRunning = counters.running.load(std::memory_order_relaxed);
  counters.running.store(runningWord(task.nameId()), std::memory_order_relaxed);
  host_.runJoined(worker, ref);
  ref = Ref<TaskCore>();  // a callable's captures and result go here, outside every lock
  counters.running.store(outerRunning, std::memory_order_relaxed);
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
