// SPDX-License-Identifier: BSL-1.0
// The worker loop and scheduling: what a worker runs next and how it waits.
//
// Order of service for a worker: its next-continuation slot, a yield that is
// due, its own local queue (newest first), the shared ring (oldest first),
// then under mutex_ (takeWorkLocked): a hand-off, the shared continuations,
// the ring again, its overflow, other workers' slots, local queues (oldest first)
// and yields, a short search without the lock, and finally parking on its
// own condition variable (Parking.h). The local queue's own operations
// (pushes from the pool's threads, pops, steals, drains) are in
// PoolLocalQueues.cpp; running a task where it is awaited in PoolJoin.cpp.
//
// Invariants:
// - No lost wake-up: Parking.h states the protocol; this loop is its
//   worker side (a search, then a park that looks at every lock-free source
//   again).
// - A worker never exits while its yields or the pool's continuations wait.
// - activeCount counts a worker from the moment it is given work until the
//   item returns; a hand-off is counted by the thread that hands it over.
// Locks: mutex_ for the idle stack, the shared queue's overflow,
// continuations_ and the worker list; a worker's localMutex for its
// `current` task and its yields (lock order: mutex_, then localMutex).

#include "coexec/ThreadPoolExecutor.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "coexec/detail/Time.h"
#include "pool/PoolImpl.h"
#include "pool/PoolTimers.h"
#include "foundation/SpinWait.h"

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

  // A worker started with a first task counts as active from its creation
  // (addWorkerLocked), so that activeCount never lags behind taskCount.
  if (first) execute(*worker, Work{std::move(first), {}, true});
  while (true) {
    Work work;
    if (std::coroutine_handle<> next = worker->takeNext()) {
      work.continuation = next;
    } else if (std::coroutine_handle<> yielded = worker->takeYield(/*force=*/false)) {
      work = Work{{}, yielded, false, true};
    } else {
      work = popLocal(*worker);
      // Due timer tasks before the shared queue: they are admitted work
      // whose time has come (a relaxed look first: nearly always none).
      if (!work && due_.any(std::memory_order_relaxed)) work = popDue();
      if (!work) work = popInject(/*locked=*/false);
    }
    if (!work) {
      std::unique_lock lock(mutex_);
      work = takeWorkLocked(*worker, lock);
      if (!work) {
        workerExitedLocked(worker, lock);
        break;
      }
    }
    // Room that appeared under the lock, for producers waiting in submitWhenRoom().
    if (room_.signalled()) serveRoomWaiters();
    // Counts toward the yields waiting behind the work that was queued.
    if (!work.yield) worker->noteRan();
    execute(*worker, std::move(work));
  }
  if (room_.signalled()) serveRoomWaiters();  // this thread's exit made room
  exchangeCurrentScheduler(nullptr);
  leavePoolThread();
  tlsWorkerName = nullptr;
  tlsWorker = nullptr;
  tlsPool = nullptr;
}

void PoolImpl::execute(Worker& worker, Work work) {
  Counters& counters = worker.counters;  // this thread's own (see Counters)
  if (!work.counted) addOwn<std::size_t>(counters.active, 1, std::memory_order_relaxed);
  if (work.continuation) {
    resume(work.continuation);
    addOwn<std::size_t>(counters.active, -1, std::memory_order_relaxed);
    return;
  }
  Ref<TaskCore> task = std::move(work.task);
  if (task->startedByJoin()) {
    // The entry of a task a join ran where it was awaited (PoolJoin.cpp): it
    // left its queue now (its place is given back); nothing to run or count.
    task = Ref<TaskCore>();
    addOwn<std::size_t>(counters.active, -1, std::memory_order_relaxed);
    return;
  }
  // For dumpThreads(): which task runs, since when (a coarse clock: a few ns).
  counters.running.store(runningWord(task->nameId()), std::memory_order_relaxed);
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
    // Cancelled while queued (or, since the look above, started by a join:
    // its entry counts nowhere).
    if (!task->startedByJoin()) addOwn<std::uint64_t>(counters.cancelled, 1, std::memory_order_release);
  } else {
    runRecorded(worker, task);
  }
  if (tracked) {
    std::lock_guard local(worker.localMutex);
    worker.current = Ref<TaskCore>();
  }
  task = Ref<TaskCore>();  // user captures are destroyed here, outside every lock
  counters.running.store(0, std::memory_order_relaxed);
  addOwn<std::size_t>(counters.active, -1, std::memory_order_relaxed);
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
      // Hands over our reference. Counted by coroutineEnding() and let go
      // by coroutineFinished(), maybe before this returns.
      task.detach()->startCoroutine(this);
    }
  } else {
    runTask(worker, *task);
  }
}

void PoolImpl::runTask(Worker& worker, TaskCore& task) {
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
  for (const Worker& worker : workers_) {
    net += worker.counters.coroutinesStarted.load(std::memory_order_acquire);
    net -= worker.counters.coroutinesFinished.load(std::memory_order_acquire);
  }
  return life_.inFlight.totalLocked(net);
}

bool PoolImpl::quiescentLocked() const noexcept {
  return continuations_.empty() && inFlightLocked() == 0 && !anyLocalWorkLocked();
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

PoolImpl::Work PoolImpl::popInject(bool locked) {
  TaskCore* raw = nullptr;
  if (!shared_.tryPopRing(raw)) return {};
  leftQueue(locked);
  // More behind it and nobody searching: get a parked worker going. (Cheapest
  // test first: the parked count rarely changes, the ring's tail every push.)
  if (parking_.anyParked() && !parking_.anySearching() && !shared_.ringEmpty()) {
    if (locked) {
      parking_.wakeOneLocked();
    } else {
      std::lock_guard lock(mutex_);
      parking_.wakeOneLocked();
    }
  }
  return Work{Ref<TaskCore>::adopt(raw), {}, false};
}

PoolImpl::Work PoolImpl::popDue() {
  TaskCore* task = due_.pop();
  if (task == nullptr) return {};
  return Work{Ref<TaskCore>::adopt(task), {}, false};
}

bool PoolImpl::handOffLocked(PendingTask& task) {
  Worker* worker = parking_.nextLocked();
  if (worker == nullptr) return false;
  worker->handoff = std::move(PendingTaskAccess::core(task));
  worker->counters.active.fetch_add(1, std::memory_order_relaxed);
  worker->counters.tasks.fetch_add(1, std::memory_order_relaxed);
  parking_.wakeOneLocked();  // wakes `worker`
  return true;
}

namespace {

/// How long a worker spins for work before it parks. Longer than a typical
/// gap between submissions of a busy producer, far shorter than the ~25 us
/// a futex wake-up costs the submitter and the wakee together.
constexpr auto kSpinWindow = std::chrono::microseconds(20);

}  // namespace

void PoolImpl::spinForWorkLocked(std::unique_lock<std::mutex>& lock) {
  // Synchronous and priority queues keep the plain protocol: a hand-off needs
  // a parked worker on the idle stack, and a priority queue is the slow path.
  if (!localQueues_ || life_.stateLocked() != PoolState::running) return;
  const std::size_t signal = parking_.beginSearch();
  lock.unlock();
  spinUntil(
      [&] {
        // A fork that saw nobody searching does not signal; the recheck
        // under the lock after the window finds its task.
        return parking_.sharedWork() > 0 || due_.any() || parking_.localWorkSignalled(signal) || !shared_.ringEmpty() ||
               stateMirror_.load(std::memory_order_relaxed) != PoolState::running;
      },
      kSpinWindow);
  parking_.endSearch();  // before the lock (Parking.h): the recheck under it finds what was published
  lock.lock();
}

void PoolImpl::wakeHelperLocked() {
  // Work remains after the taker's share: get another worker going, unless
  // one is already searching (it will find the rest).
  const bool more = parking_.sharedWork() > 0 || !shared_.ringEmpty() || due_.any(std::memory_order_relaxed);
  if (more && !parking_.anySearching()) parking_.wakeOneLocked();
}

PoolImpl::Work PoolImpl::takeWorkLocked(Worker& worker, std::unique_lock<std::mutex>& lock) {
  Clock::time_point idleSince{};  // read the clock only once there is nothing to do
  bool waited = false;
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
    if (!continuations_.empty()) {
      Work work{{}, continuations_.pop(), false};
      publishSharedWorkLocked();
      wakeHelperLocked();
      return work;
    }
    // Then timer work that became due: admitted, never rejected, run even
    // after shutdown() (shutdownNow() drains it).
    if (Work work = popDue()) return work;
    const std::size_t inFlight = inFlightLocked();
    if (life_.stateLocked() == PoolState::stop && inFlight == 0) return exitUnlessYields();
    const std::size_t shared = sharedQueuedLocked();
    // (Pending timers do not keep a thread: the one that fires starts one.)
    if (life_.stateLocked() == PoolState::shutdown && shared == 0 && inFlight == 0 && !anyLocalWorkLocked()) return {};
    const std::size_t size = workers_.size();
    // Above max (after setMaximumPoolSize): exit, unless we are the last thread
    // and there is queued work.
    if (sizes_.aboveMaximumLocked(size) && (size > 1 || shared == 0)) return exitUnlessYields();
    if (Work work = popInject(/*locked=*/true)) return work;
    if (!shared_.ringEmpty()) {  // a push between claim and publish: a moment (SharedQueue.h)
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
      continue;
    }
    if (PendingTask next = shared_.pollLocked(); next.valid()) {  // the overflow's oldest go back to the ring
      room_.release();
      publishSharedWorkLocked();
      wakeHelperLocked();
      room_.appearedLocked();
      return Work{std::move(PendingTaskAccess::core(next)), {}, false};
    }
    if (Work stolen = stealLocked(worker)) return stolen;
    if (Work yielded = exitUnlessYields()) return yielded;  // nothing else is waiting
    if (!spun) {
      spun = true;
      spinForWorkLocked(lock);
      continue;  // the state may have changed while the lock was released
    }
    const bool timed = sizes_.idleTimesOutLocked(size);
    // keepAliveTime runs on the pool's clock: the steady clock's is the
    // condition variable's own timeout; a ManualClock's is an alarm on the
    // pool's timer service (onKeepAliveAlarm), fired by advance().
    // Only a thread that may time out reads the clock.
    Clock::time_point deadline = Clock::time_point::max();
    if (timed) {
      if (idleSince == Clock::time_point{}) idleSince = clock_.now();
      deadline = detail::deadlineOn(idleSince, sizes_.keepAliveLocked());
      // An idle thread may time out even while coroutines are in flight: a
      // continuation posted to a pool without threads starts one.
      if (waited && clock_.now() >= deadline) return exitUnlessYields();
    }
    parking_.parkLocked(worker);
    // Pushed (locally or to the shared ring, without the lock) before it could see us
    // parked: take it instead of sleeping (Parking.h).
    if (anyLocalWorkLocked() || !shared_.ringEmpty() || due_.any()) {
      parking_.unparkLocked(worker);
      continue;
    }
    if (room_.blockedLocked() > 0) room_.available.notify_all();  // an idle thread is room for a hand-off
    if (room_.waitersLocked() > 0) {  // so for submitWhenRoom(): serve without the lock (we stay on the idle stack)
      lock.unlock();
      serveRoomWaiters();
      lock.lock();
    }
    if (timed && manualClock_ != nullptr) {
      bool alarmed = true;
      try {
        worker.keepAliveAlarm = timers_.schedule(deadline, &PoolImpl::onKeepAliveAlarm, this);
      } catch (...) {
        alarmed = false;  // no memory for the alarm: wait for work, and look at the clock when woken
      }
      worker.wake.wait(lock, [&] { return worker.signalled; });
      if (alarmed) timers_.cancel(worker.keepAliveAlarm);  // fired already, or no longer needed
    } else if (timed && deadline != Clock::time_point::max()) {
      worker.wake.wait_for(lock, deadline - clock_.now(), [&] { return worker.signalled; });
    } else {
      worker.wake.wait(lock, [&] { return worker.signalled; });
    }
    if (!worker.signalled) parking_.unparkLocked(worker);  // timed out
    waited = true;
  }
}

}  // namespace coexec::detail
