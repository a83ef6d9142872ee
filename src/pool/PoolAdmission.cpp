// SPDX-License-Identifier: BSL-1.0
// Admission: the Java routing of a new task (core thread -> queue -> extra
// thread -> rejection policy), the lock-free fast paths into the shared
// ring and a worker's local queue, thread creation (and its retry when the factory fails with work
// waiting and no thread), and the pool's side of the rejection policies
// (evictOldest for discardOldest, offerWithin for block) and purge().
//
// Invariants:
// - A task is admitted exactly once: it enters a queue, is handed to a
//   parked worker, or starts a worker, and only then is counted in
//   taskCount; otherwise it goes to the policy (rejectedCount).
// - bounded(n): a task holds one of n places (Room.h) from before it enters
//   the shared queue (SharedQueue.h) or a local queue until it leaves it
//   (leftQueue(): the place back, then the waiting producers served).
// - A local push (tryPushLocal(), from the pool's own threads) is admitted
//   work: counted in taskCount, holding a place of bounded(n), before any
//   thread can take it; the engine publishes it and wakes (Engine.h).
// - After a change of state, shutdown()/shutdownNow() wait out admitting_:
//   every lock-free push then either landed or saw the new state.
// - Work never waits with no thread and nothing due to start one: a failed
//   start with no worker left arms onThreadRetry on the pool's clock.
// Locks: mutex_ guards the shared queue's overflow, engine_.workers, the idle
// stack and the state (see PoolImpl.h); the ring and the counters are
// lock-free.

#include "coexec/ThreadPoolExecutor.h"

#include <memory>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "engine/EngineImpl.h"
#include "pool/PoolImpl.h"
#include "coexec/detail/Bindings.h"
#include "coexec/detail/Time.h"
#if defined(COEXEC_FAULT_INJECTION)
#include "coexec/detail/FaultInjection.h"
#endif

namespace coexec {
namespace detail {
namespace {

/// Why the pool has just refused a task, for the rejection policy it calls
/// next on the same thread (ThreadPoolExecutor::rejection()). Kept per
/// thread rather than in every task: only a refused task has one.
struct RejectNote {
  const TaskCore* task = nullptr;
  const char* reason = nullptr;  // a string literal
};
thread_local RejectNote tlsRejectNote;

void noteRejectReason(const TaskCore* task, const char* reason) noexcept { tlsRejectNote = {task, reason}; }

/// The stats() a RejectedExecution carries: without the latency histograms,
/// whose merge would make every rejection cost O(threads x buckets).
PoolStats snapshotForRejection(PoolImpl& pool) {
  std::lock_guard lock(pool.mutex_);
  return pool.statsLocked(/*withLatency=*/false);
}

}  // namespace

bool PoolImpl::tryAdmitLocked(PendingTask& task, FactoryErrors& errors) {
  TaskCore& core = *PendingTaskAccess::core(task);
  core.owner = this;
  if (life_.stateLocked() != PoolState::running) return false;
  stampAdmission(core);
  // 1. Below core: a new thread, even if others are idle.
  if (sizes_.belowCoreLocked(engine_.workers.size()) && addWorkerLocked(task, errors)) return true;
  // 2. The queue (for synchronous(): a hand-off to an idle thread).
  if (queueSpec_.kind() == WorkQueue::Kind::synchronous) {
    if (engine_.handOffLocked(task)) return true;
  } else if (room_.reserve() && pushQueuedLocked(task)) {  // a reserved place: cannot fail for bounded(n)
    engine_.publishSharedWorkLocked();
    countersHere().tasks.fetch_add(1, std::memory_order_relaxed);
    // A searching worker will find the task (it rechecks under this lock
    // after it stops searching): no wake-up, no syscall.
    if (engine_.parking.anySearching()) return true;
    // Core 0, or every thread failed to start or timed out: someone must run
    // it (if the factory fails here too, it is tried again soon).
    if (!engine_.parking.wakeOneLocked() && engine_.workers.empty()) startThreadForWaitingWorkLocked(errors);
    return true;
  }
  // 3. An extra thread, up to max.
  return sizes_.belowMaximumLocked(engine_.workers.size()) && addWorkerLocked(task, errors);
}

bool PoolImpl::pushQueuedLocked(PendingTask& task) {
  try {
    return pushSharedLocked(task);
  } catch (...) {
    room_.release();  // out of memory growing a queue: the task is still the caller's, its place is given back
    throw;
  }
}

bool PoolImpl::pushSharedLocked(PendingTask& task) { return engine_.shared.pushLocked(task); }

bool PoolImpl::tryInject(PendingTask& task) {
  if (!engine_.shared.hasRing()) return false;
  // Step 1 (below core: a new thread) and the overflow take the locked path.
  if (sizes_.belowCore(engine_.sizeMirror.load(std::memory_order_relaxed))) return false;
  if (engine_.shared.overflowing()) return false;
  admitting_.fetch_add(1, std::memory_order_seq_cst);
  bool pushed = false;
  // seq_cst after the announcement: purge() stores purging_ and then waits
  // for admitting_ to drain, so it either sees us or we see it. The overflow
  // again after that: a purge that ran while we were between the first check
  // and the announcement moved the ring's tasks to the overflow before it
  // ended (this thread's own earlier tasks among them), so a push to the
  // ring now would overtake them.
  if (stateMirror_.load(std::memory_order_seq_cst) == PoolState::running && !purging_.load(std::memory_order_seq_cst) &&
      !engine_.shared.overflowing() && room_.reserve()) {
    std::size_t pos = 0;
    if (engine_.shared.tryClaim(pos)) {
      Ref<TaskCore>& core = PendingTaskAccess::core(task);
      core->owner = this;
      stampAdmission(*core);
      countersHere().tasks.fetch_add(1, std::memory_order_relaxed);  // before anyone can run it
      engine_.shared.publish(pos, core.detach());
      pushed = true;
    } else {
      room_.release();
    }
  }
  admitting_.fetch_sub(1, std::memory_order_seq_cst);
  if (!pushed) return false;
#if defined(COEXEC_FAULT_INJECTION)
  FaultInjection::onLockFreePush();  // race tests: the window before the wake-up below
#endif
  // Wake a parked worker only if nobody searches and someone sleeps (or no
  // thread is left: core 0, or all timed out). The seq_cst claim above
  // published the task (Parking.h).
  if (!engine_.parking.anySearching() && (engine_.parking.anyParked() || engine_.sizeMirror.load(std::memory_order_seq_cst) == 0)) {
    FactoryErrors errors;
    {
      std::lock_guard lock(mutex_);
      // Since the push, a shutdownNow() may have drained the task and the
      // pool, left without a thread, terminated (or be running its
      // terminated hook): a thread started now would outlive it, and the
      // destructor would wait for it forever.
      if (!engine_.parking.wakeOneLocked() && engine_.workers.empty() && life_.aliveLocked()) {
        startThreadForWaitingWorkLocked(errors);  // if the factory fails, it is tried again soon
      }
    }
    reportFactoryErrors(errors);
  }
  return true;
}

bool PoolImpl::tryPushLocal(PendingTask& task) {
  Worker* worker = tlsWorker;
  if (!engine_.localQueues || worker == nullptr || tlsPool != this) return false;
  // Below corePoolSize, admission starts a new thread for the task (step 1):
  // the task must not wait behind its submitter.
  if (sizes_.belowCore(engine_.sizeMirror.load(std::memory_order_relaxed))) return false;
  // The capacity of bounded(n) covers the local queues too.
  const std::size_t slot = worker->number % Room::kCreditSlots;
  if (!room_.reserve(slot)) return false;
  if (stateMirror_.load(std::memory_order_seq_cst) != PoolState::running) {
    room_.release(1, slot);
    return false;
  }
  Ref<TaskCore>& core = PendingTaskAccess::core(task);
  core->owner = this;
  if (core->hasFuture()) core->markJoinable();  // an awaiter on this pool may run it (PoolTaskRun.cpp)
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
    room_.release(1, slot);
    throw;
  }
  return true;
}

void PoolImpl::leftQueue(bool locked) noexcept {
  // The place back, then the waiters read: either a waiting producer sees
  // the place, or we see it (Room.h).
  room_.release();
  servePlaceLeft(locked);
}

void PoolImpl::leftLocalQueue(PoolWorker& worker) noexcept {
  // The task left this worker's own queue: a fork/join run pushes and pops
  // there, so the place may stay as the worker's credit (Room.h). Then the
  // waiters read, as in leftQueue().
  room_.release(1, worker.number % Room::kCreditSlots);
  servePlaceLeft(/*locked=*/false);
}

void PoolImpl::servePlaceLeft(bool locked) noexcept {
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

void PoolImpl::waitAdmissionsLocked() const noexcept {
  while (admitting_.load(std::memory_order_seq_cst) != 0)
    std::this_thread::yield();
}

namespace {
/// Keeps a failure to start a worker for the uncaught-exception handler; out
/// of memory for that too, it is dropped (the task still goes on to the queue
/// or the policy). Never throws.
void noteFactoryError(PoolImpl::FactoryErrors& errors, std::exception_ptr error) noexcept {
  try {
    errors.push_back(std::move(error));
  } catch (...) {
  }
}
}  // namespace

bool PoolImpl::addWorkerLocked(PendingTask& first, FactoryErrors& errors) {
  // Everything a worker needs that may fail to allocate comes before it is
  // added: room for every worker on the idle stack (so that parking, which
  // may first happen long after the pool warmed up, never allocates), its
  // name, its launch block and its node. Out of memory there, no worker is
  // added, and the failure is treated as the factory's (the task goes on to
  // the queue or the policy).
  std::string name;
  std::shared_ptr<Launch> launch;
  WorkerList::iterator it;
  try {
    engine_.parking.reserveLocked(engine_.workers.size() + 1);
    name = fmt::format("{}-{}", name_, starts_.nextWorkerNumberLocked());
    // The body waits for the verdict on its thread: a factory may start the
    // body and then throw, or detach the thread and return an empty one;
    // such a thread must leave the pool alone (its worker is erased, and the
    // pool may be gone by the time the thread runs).
    launch = std::make_shared<Launch>();
    it = engine_.workers.addLocked();
  } catch (...) {
    noteFactoryError(errors, std::current_exception());
    return false;
  }
  Worker* worker = &*it;
  worker->number = starts_.takeWorkerNumberLocked();
  worker->name = std::move(name);
  try {
    if (recordLatency_) worker->latency = std::make_unique<WorkerLatency>();
    Ref<TaskCore> firstCore = PendingTaskAccess::core(first);
    std::thread thread = factory_(worker->name, [this, worker, firstCore, launch]() mutable {
      if (launch->awaitVerdict()) runWorker(worker, std::move(firstCore));
    });
    if (!thread.joinable()) {
      throw std::runtime_error(fmt::format(
          "the thread factory of pool '{}' returned a thread that is not joinable for '{}' (a detached thread "
          "cannot be joined when the pool closes; it was told to exit without running tasks)",
          name_, worker->name));
    }
    worker->thread = std::move(thread);
  } catch (...) {
    launch->decide(false);
    engine_.workers.discardLocked(it);
    noteFactoryError(errors, std::current_exception());
    return false;
  }
  launch->decide(true);
  if (first.valid()) {
    std::lock_guard local(worker->localMutex);
    // The worker owns it now (firstCore, which keeps this reference from being
    // the last). Recorded for shutdownNow() only if it has a token, like in
    // runTask(), which clears the record of just those.
    if (Ref<TaskCore> core = std::move(PendingTaskAccess::core(first)); core->hasToken())
      worker->current = std::move(core);
    worker->counters.tasks.fetch_add(1, std::memory_order_relaxed);
    worker->counters.active.fetch_add(1, std::memory_order_relaxed);
  }
  sizes_.noteThreadsLocked(engine_.workers.size());
  return true;
}

bool PoolImpl::workWaitsLocked() const noexcept {
  return (sharedQueuedLocked() > 0 && life_.stateLocked() != PoolState::stop) || !engine_.continuations.empty() || engine_.due.any();
}

void PoolImpl::startThreadForWaitingWorkLocked(FactoryErrors& errors) {
  PendingTask none;
  if (!addWorkerLocked(none, errors) && engine_.workers.empty()) armThreadRetryLocked();
}

void PoolImpl::armThreadRetryLocked() noexcept {
  if (starts_.retryArmedLocked() || life_.stateLocked() == PoolState::terminated) return;
  try {
    (void)timers_.schedule(detail::deadlineOn(clock_.now(), starts_.retryDelayLocked()), &PoolImpl::onThreadRetry,
                           this);
    starts_.noteRetryArmedLocked();
  } catch (...) {  // std::bad_alloc, std::system_error: the next due timer or submission tries again
  }
}

void PoolImpl::onThreadRetry(void* context) noexcept {
  auto* pool = static_cast<PoolImpl*>(context);
  FactoryErrors errors;
  {
    std::lock_guard lock(pool->mutex_);
    pool->starts_.noteRetryFiredLocked();
    if (!pool->life_.aliveLocked() || !pool->engine_.workers.empty() || !pool->workWaitsLocked()) {
      pool->starts_.resetRetryLocked();
    } else {
      PendingTask none;
      if (pool->addWorkerLocked(none, errors) || !pool->engine_.workers.empty()) {
        pool->starts_.resetRetryLocked();
      } else {
        pool->starts_.backOffRetryLocked();
        pool->armThreadRetryLocked();
      }
    }
  }
  pool->reportFactoryErrors(errors);  // outside the lock: the uncaught handler is user code
}

const char* PoolImpl::saturationReasonLocked(bool factoryFailed) const {
  if (life_.stateLocked() != PoolState::running) return "the pool is shut down and accepts no new tasks";
  if (factoryFailed) return "the thread factory failed to create a thread and the work queue has no room";
  return "the work queue is full and the pool has reached maximumPoolSize";
}

std::size_t PoolImpl::startWorkers(std::size_t count, bool onlyForQueuedWork) {
  FactoryErrors errors;
  std::size_t started = 0;
  {
    std::lock_guard lock(mutex_);
    while (started < count && life_.stateLocked() == PoolState::running && sizes_.belowCoreLocked(engine_.workers.size())) {
      if (onlyForQueuedWork && sharedQueuedLocked() <= started) break;
      PendingTask none;
      if (!addWorkerLocked(none, errors)) break;
      ++started;
    }
  }
  reportFactoryErrors(errors);
  return started;
}

}  // namespace detail

void ThreadPoolExecutor::admit(PendingTask task, const CancellationToken* token) {
  if (!linkToCaller(task, token)) return;  // settled as cancelled: nothing to admit
  admitUnlinked(std::move(task));
}

void ThreadPoolExecutor::admitUnlinked(PendingTask task) {
  if (!tryAdmit(task, /*countRejection=*/true)) impl_->policy_(task, *this);
}

bool ThreadPoolExecutor::linkToCaller(PendingTask& task, const CancellationToken* token) {
  detail::TaskCore& core = *detail::PendingTaskAccess::core(task);
  bool cancelled = false;
  detail::TaskCore* const parent = detail::currentTask();
  // The code that submits the task lends it its TaskLocal bindings.
  detail::inheritBindings(core, parent);
  // The running task (of any pool) whose body submits this one: its child.
  // A parent nothing can cancel gets no list (fire-and-forget callables).
  if (parent != nullptr && parent->cancellable()) cancelled = !parent->adoptChild(core);
  if (!cancelled && token != nullptr) cancelled = !core.linkToken(*token);  // may throw: the task is then dropped
  if (!cancelled) return true;
  // Cancelled before admission: settled at once (if the token's callback has
  // not done it already), never run, counted as a task that was cancelled so
  // that the ledger adds up (PoolStats), and not as a rejection.
  core.owner = impl_;
  core.requestCancel();
  impl_->countCancelledAtSubmission();
  task = PendingTask();  // settled: dropping it does nothing more
  return false;
}

bool ThreadPoolExecutor::tryAdmit(PendingTask& task, bool countRejection) {
  detail::PoolImpl& p = *impl_;
  if (p.tryPushLocal(task)) return true;  // from one of our own threads: its local queue
  if (p.tryInject(task)) return true;     // the lock-free shared queue
  detail::PoolImpl::FactoryErrors errors;
  bool admitted = false;
  {
    std::lock_guard lock(p.mutex_);
    admitted = p.tryAdmitLocked(task, errors);
    if (!admitted) {
      // In the same snapshot as the refusal. Under block() the count waits
      // for the policy's verdict (offerWithin): a task admitted after
      // waiting for room was not refused.
      if (countRejection && p.policy_.name() != "block") p.tallies_.countRejectedLocked();
      detail::noteRejectReason(detail::PendingTaskAccess::core(task).get(), p.saturationReasonLocked(!errors.empty()));
    }
  }
  p.reportFactoryErrors(errors);
  return admitted;
}

RejectedExecution ThreadPoolExecutor::rejection(const PendingTask& task) const {
  // The reason the admission recorded, if it was this pool's; else the
  // pool's state now (a policy called directly, or on another pool's task).
  const detail::RejectNote note = detail::tlsRejectNote;
  const detail::TaskCore* const core = detail::PendingTaskAccess::core(task).get();
  const bool ours = core != nullptr && core->owner == impl_ && note.task == core && note.reason != nullptr;
  const char* reason = ours           ? note.reason
                       : isShutdown() ? "the pool is shut down and accepts no new tasks"
                                      : "the rejection policy refused the task";
  return RejectedExecution(reason, detail::snapshotForRejection(*impl_));
}

bool ThreadPoolExecutor::evictOldest() {
  detail::PoolImpl& p = *impl_;
  PendingTask victim;
  std::vector<detail::Ref<detail::TaskCore>> joined;  // dropped after the lock
  {
    std::lock_guard lock(p.mutex_);
    if (p.life_.stateLocked() != PoolState::running) return false;
    victim = p.takeOldestLocked(joined);
    if (!victim.valid()) return false;
    p.engine_.publishSharedWorkLocked();
    if (victim.isCancelled()) {
      p.tallies_.outside().cancelled.fetch_add(1, std::memory_order_relaxed);
    } else {
      p.tallies_.countDiscardedLocked();
    }
  }
  detail::PendingTaskAccess::core(victim)->abandon(std::make_exception_ptr(RejectedExecution(
      "the task was evicted from the queue by the discardOldest policy", detail::snapshotForRejection(*impl_))));
  return true;
}

bool ThreadPoolExecutor::offerWithin(PendingTask& task, std::chrono::nanoseconds timeout) {
  detail::PoolImpl& p = *impl_;
  detail::TaskCore* const core = detail::PendingTaskAccess::core(task).get();
  const auto deadline = detail::deadlineAfter(timeout);
  detail::PoolImpl::FactoryErrors errors;
  bool admitted = false;
  {
    std::unique_lock lock(p.mutex_);
    p.room_.blockLocked();
    bool waited = false;
    while (true) {
      if (p.tryAdmitLocked(task, errors)) {
        admitted = true;
        break;
      }
      if (p.life_.stateLocked() != PoolState::running) {
        detail::noteRejectReason(core, p.saturationReasonLocked(false));
        break;
      }
      waited = true;
      if (p.room_.available.wait_until(lock, deadline) == std::cv_status::timeout) {
        admitted = p.tryAdmitLocked(task, errors);
        if (!admitted) detail::noteRejectReason(core, "the work queue stayed full for the whole block() timeout");
        break;
      }
    }
    p.room_.unblockLocked();
    // The pool's own block() policy: the refusal was not counted yet (see
    // tryAdmit); a wait that ended in admission is a wait, not a refusal.
    const bool ownBlock = p.policy_.name() == "block";
    if (!admitted && ownBlock) p.tallies_.countRejectedLocked();
    if (admitted && (waited || ownBlock)) ++p.room_.waitedForRoom;
  }
  p.reportFactoryErrors(errors);
  return admitted;
}

std::size_t ThreadPoolExecutor::purge() {
  detail::PoolImpl& p = *impl_;
  std::vector<PendingTask> removed;
  if (p.engine_.shared.hasRing()) {
    // Lock-free submissions take the locked path while we purge; those
    // already under way publish their slot before we drain, so the drain
    // below never waits, under the lock, for a slot claimed and not yet
    // published. The wait for them is here, without the lock.
    p.purging_.fetch_add(1, std::memory_order_seq_cst);
    while (p.admitting_.load(std::memory_order_seq_cst) != 0)
      std::this_thread::yield();
  }
  struct EndPurge {  // also if the drain throws (out of memory)
    detail::PoolImpl& pool;
    ~EndPurge() {
      if (pool.engine_.shared.hasRing()) pool.purging_.fetch_sub(1, std::memory_order_seq_cst);
    }
  };
  {
    std::lock_guard lock(p.mutex_);
    const EndPurge end{p};  // released under the lock, after the overflow is set
    // The ring cannot remove from its middle: every queued task moves to
    // the overflow, in order, the cancelled ones are taken out, and
    // submissions queue behind the rest until the workers have taken them.
    // Room for them all first: out of memory, purge() throws before any
    // task has moved, and none is lost.
    const std::size_t queued = p.engine_.shared.sizeLocked();
    removed.reserve(queued);
    p.engine_.shared.reserveLocked(queued);
    for (PendingTask& task : p.drainSharedLocked()) {
      if (task.isCancelled()) {
        removed.push_back(std::move(task));
      } else {
        p.engine_.shared.requeueLocked(task);
      }
    }
    p.room_.release(removed.size());
    p.engine_.publishSharedWorkLocked();
    p.tallies_.outside().cancelled.fetch_add(removed.size(), std::memory_order_relaxed);
    if (!removed.empty() && p.room_.blockedLocked() > 0) p.room_.available.notify_all();
  }
  if (!removed.empty() && p.room_.anyWaiting()) p.serveRoomWaiters();
  return removed.size();  // destroyed here, outside the lock
}

}  // namespace coexec
