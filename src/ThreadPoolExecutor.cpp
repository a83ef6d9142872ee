#include "coexec/ThreadPoolExecutor.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "PoolImpl.h"
#include "SpinWait.h"
#include "coexec/detail/Time.h"

namespace coexec {
namespace detail {
namespace {

thread_local PoolImpl* tlsPool = nullptr;
thread_local const std::string* tlsWorkerName = nullptr;
thread_local PoolImpl::Worker* tlsWorker = nullptr;
thread_local Scheduler* tlsScheduler = nullptr;

std::string describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception of a type not derived from std::exception";
  }
}

void setThreadName(const std::string& name) noexcept {
  // Linux limits thread names to 15 characters; the full name stays in TaskInfo.
  const std::string shortName = name.substr(0, 15);
  pthread_setname_np(pthread_self(), shortName.c_str());
}

std::thread defaultThreadFactory(std::string threadName, std::function<void()> body) {
  return std::thread([threadName = std::move(threadName), body = std::move(body)] {
    setThreadName(threadName);
    body();
  });
}

ThreadPoolOptions validated(ThreadPoolOptions options) {
  if (options.name.empty()) throw std::invalid_argument("coexec::ThreadPoolExecutor: name must not be empty");
  if (options.maximumPoolSize == 0) {
    throw std::invalid_argument("coexec::ThreadPoolExecutor: maximumPoolSize must be at least 1, got 0");
  }
  if (options.corePoolSize > options.maximumPoolSize) {
    throw std::invalid_argument(
        fmt::format("coexec::ThreadPoolExecutor: corePoolSize ({}) must not be greater than maximumPoolSize ({})",
                    options.corePoolSize, options.maximumPoolSize));
  }
  if (options.keepAliveTime < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(
        fmt::format("coexec::ThreadPoolExecutor: keepAliveTime must be non-negative, got {}", options.keepAliveTime));
  }
  if (!options.threadFactory) options.threadFactory = defaultThreadFactory;
  return options;
}

/// The ring of a bounded or unbounded queue: room for bounded(n)'s n (so
/// that it never overflows) up to 4096 slots (64 KiB); beyond, queue_ takes
/// the overflow.
std::size_t injectCapacity(const WorkQueue& spec) {
  constexpr std::size_t kMax = 4096;
  const std::size_t wanted = spec.kind() == WorkQueue::Kind::bounded ? std::min(spec.capacity(), kMax) : kMax;
  std::size_t capacity = 2;
  while (capacity < wanted)
    capacity *= 2;
  return capacity;
}

}  // namespace

PoolImpl* currentPool() noexcept { return tlsPool; }
Scheduler* currentScheduler() noexcept { return tlsScheduler; }
Scheduler* exchangeCurrentScheduler(Scheduler* scheduler) noexcept { return std::exchange(tlsScheduler, scheduler); }
const void* currentPoolIdentity() noexcept { return tlsPool; }

void printDropped(std::string_view what, std::string_view poolName, std::string_view threadName,
                  const std::exception_ptr& error) noexcept {
  try {
    fmt::print(stderr, "coexec: {} on pool '{}' thread '{}' threw: {}\n", what, poolName, threadName, describe(error));
  } catch (...) {
    std::fputs("coexec: an exception was dropped and could not be printed\n", stderr);
  }
}

PoolImpl::PoolImpl(ThreadPoolExecutor& owner, ThreadPoolOptions options)
    : owner_(owner),
      name_(std::move(options.name)),
      queueSpec_(options.workQueue),
      policy_(std::move(options.rejectionPolicy)),
      factory_(std::move(options.threadFactory)),
      hooks_(std::move(options.hooks)),
      uncaughtHandler_(std::move(options.uncaughtExceptionHandler)),
      localQueues_(options.workQueue.kind() == WorkQueue::Kind::bounded ||
                   options.workQueue.kind() == WorkQueue::Kind::unbounded),
      bounded_(options.workQueue.kind() == WorkQueue::Kind::bounded),
      inject_(localQueues_ ? std::make_unique<MpmcRing<TaskCore*>>(injectCapacity(options.workQueue)) : nullptr),
      corePoolSize_(options.corePoolSize),
      maximumPoolSize_(options.maximumPoolSize),
      keepAliveTime_(options.keepAliveTime),
      allowCoreThreadTimeOut_(options.allowCoreThreadTimeOut),
      queue_(options.workQueue) {
  coreMirror_.store(corePoolSize_, std::memory_order_relaxed);
}

bool PoolImpl::tryAdmitLocked(PendingTask& task, FactoryErrors& errors) {
  task.core_->owner = this;
  if (state_ != PoolState::running) return false;
  // 1. Below core: a new thread, even if others are idle.
  if (workers_.size() < corePoolSize_ && addWorkerLocked(task, errors)) return true;
  // 2. The queue (for synchronous(): a hand-off to an idle thread).
  if (queueSpec_.kind() == WorkQueue::Kind::synchronous) {
    if (handOffLocked(task)) return true;
  } else if (reserveQueued() && pushSharedLocked(task)) {  // a reserved place: cannot fail for bounded(n)
    publishSharedWorkLocked();
    countersHere().tasks.fetch_add(1, std::memory_order_relaxed);
    // A searching worker will find the task (it rechecks under this lock
    // after it stops searching): no wake-up, no syscall.
    if (searching_.load(std::memory_order_seq_cst) > 0) return true;
    if (!wakeOneLocked() && workers_.empty()) {
      // Core 0, or every thread failed to start or timed out: someone must run
      // it. If the factory fails here too, the task waits in the queue for the
      // next thread that starts (the next submission, or shutdown()).
      PendingTask none;
      addWorkerLocked(none, errors);
    }
    return true;
  }
  // 3. An extra thread, up to max.
  return workers_.size() < maximumPoolSize_ && addWorkerLocked(task, errors);
}

bool PoolImpl::pushSharedLocked(PendingTask& task) {
  if (inject_ && !overflow_.load(std::memory_order_relaxed)) {
    std::size_t pos = 0;
    if (inject_->tryClaim(pos)) {
      inject_->publish(pos, task.core_.detach());
      return true;
    }
  }
  if (!queue_.offer(task)) return false;
  if (inject_) overflow_.store(true, std::memory_order_release);  // later submissions queue behind it
  return true;
}

bool PoolImpl::tryInject(PendingTask& task) {
  if (!inject_) return false;
  // Step 1 (below core: a new thread) and the overflow take the locked path.
  if (poolSizeMirror_.load(std::memory_order_relaxed) < coreMirror_.load(std::memory_order_relaxed)) return false;
  if (overflow_.load(std::memory_order_acquire)) return false;
  admitting_.fetch_add(1, std::memory_order_seq_cst);
  bool pushed = false;
  if (stateMirror_.load(std::memory_order_seq_cst) == PoolState::running && reserveQueued()) {
    std::size_t pos = 0;
    if (inject_->tryClaim(pos)) {
      task.core_->owner = this;
      countersHere().tasks.fetch_add(1, std::memory_order_relaxed);  // before anyone can run it
      inject_->publish(pos, task.core_.detach());
      pushed = true;
    } else {
      releaseQueued();
    }
  }
  admitting_.fetch_sub(1, std::memory_order_seq_cst);
  if (!pushed) return false;
  // Wake a parked worker only if nobody searches and someone sleeps (or no
  // thread is left: core 0, or all timed out). seq_cst loads after the
  // seq_cst claim: a worker that parks stores idleCount_ and then checks
  // inject_->size(), so one of the two sees the other.
  if (searching_.load(std::memory_order_seq_cst) == 0 &&
      (idleCount_.load(std::memory_order_seq_cst) > 0 || poolSizeMirror_.load(std::memory_order_seq_cst) == 0)) {
    FactoryErrors errors;
    {
      std::lock_guard lock(mutex_);
      if (!wakeOneLocked() && workers_.empty()) {
        PendingTask none;  // if the factory fails, the task waits for the next thread that starts
        addWorkerLocked(none, errors);
      }
    }
    reportFactoryErrors(errors);
  }
  return true;
}

void PoolImpl::waitAdmissionsLocked() const noexcept {
  while (admitting_.load(std::memory_order_seq_cst) != 0)
    std::this_thread::yield();
}

std::vector<PendingTask> PoolImpl::drainSharedLocked() {
  std::vector<PendingTask> tasks;
  if (inject_) {
    TaskCore* raw = nullptr;
    while (true) {
      if (inject_->tryPop(raw)) {
        tasks.push_back(PendingTask(Ref<TaskCore>::adopt(raw)));
      } else if (inject_->empty()) {
        break;
      } else {
        std::this_thread::yield();  // a push between claim and publish
      }
    }
  }
  for (PendingTask& task : queue_.drain())
    tasks.push_back(std::move(task));  // the overflow: newer than the ring's
  overflow_.store(false, std::memory_order_release);
  return tasks;
}

PoolImpl::Work PoolImpl::popInject(bool locked) {
  TaskCore* raw = nullptr;
  if (!inject_ || !inject_->tryPop(raw)) return {};
  releaseQueued();
  // A block() producer may be waiting for the place this task left.
  if (blockedMirror_.load(std::memory_order_seq_cst) > 0) {
    if (locked) {
      roomAvailable_.notify_all();
    } else {
      std::lock_guard lock(mutex_);
      roomAvailable_.notify_all();
    }
  }
  // More behind it and nobody searching: get a parked worker going. (Cheapest
  // test first: idleCount_ rarely changes, the ring's tail every push.)
  if (idleCount_.load(std::memory_order_seq_cst) > 0 && searching_.load(std::memory_order_seq_cst) == 0 &&
      !inject_->empty()) {
    if (locked) {
      wakeOneLocked();
    } else {
      std::lock_guard lock(mutex_);
      wakeOneLocked();
    }
  }
  return Work{Ref<TaskCore>::adopt(raw), {}, false};
}

bool PoolImpl::addWorkerLocked(PendingTask& first, FactoryErrors& errors) {
  // Room for every worker on the idle stack now, so that parking (which may
  // first happen long after the pool warmed up) never allocates.
  idleWorkers_.reserve(workers_.size() + 1);
  auto it = workers_.emplace(workers_.end());
  poolSizeMirror_.store(workers_.size(), std::memory_order_relaxed);
  Worker* worker = &*it;
  worker->number = ++threadsCreated_;
  worker->name = fmt::format("{}-{}", name_, worker->number);
  try {
    Ref<TaskCore> firstCore = first.core_;
    std::thread thread =
        factory_(worker->name, [this, worker, firstCore]() mutable { runWorker(worker, std::move(firstCore)); });
    if (!thread.joinable()) {
      throw std::runtime_error(fmt::format(
          "the thread factory of pool '{}' returned a thread that is not joinable for '{}'", name_, worker->name));
    }
    worker->thread = std::move(thread);
  } catch (...) {
    errors.push_back(std::current_exception());
    workers_.erase(it);
    poolSizeMirror_.store(workers_.size(), std::memory_order_relaxed);
    return false;
  }
  if (first.valid()) {
    std::lock_guard local(worker->localMutex);
    // The worker owns it now (firstCore, which keeps this reference from being
    // the last). Recorded for shutdownNow() only if it has a token, like in
    // execute(), which clears the record of just those.
    if (Ref<TaskCore> core = std::move(first.core_); core->hasToken()) worker->current = std::move(core);
    worker->counters.tasks.fetch_add(1, std::memory_order_relaxed);
    worker->counters.active.fetch_add(1, std::memory_order_relaxed);
  }
  largestPoolSize_ = std::max(largestPoolSize_, workers_.size());
  return true;
}

const char* PoolImpl::saturationReasonLocked(bool factoryFailed) const {
  if (state_ != PoolState::running) return "the pool is shut down and accepts no new tasks";
  if (factoryFailed) return "the thread factory failed to create a thread and the work queue has no room";
  return "the work queue is full and the pool has reached maximumPoolSize";
}

void PoolImpl::runWorker(Worker* worker, Ref<TaskCore> first) {
  tlsPool = this;
  tlsWorker = worker;
  tlsWorkerName = &worker->name;
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
    if (void* next = worker->nextContinuation.exchange(nullptr, std::memory_order_acquire)) {
      work.continuation = std::coroutine_handle<>::from_address(next);
    } else {
      work = popLocal(*worker);
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
    execute(*worker, std::move(work));
  }
  exchangeCurrentScheduler(nullptr);
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
  // Only a task with a token can observe shutdownNow(): track just those.
  const bool tracked = task->hasToken();
  if (tracked) {
    std::lock_guard local(worker.localMutex);
    worker.current = task;
  }
  if (!task->tryStart()) {  // cancelled while queued
    addOwn<std::uint64_t>(counters.cancelled, 1, std::memory_order_release);
  } else if (task->isCoroutine()) {
    const TaskInfo info{name_, worker.name, task->hasFuture(), task->priority()};
    bool started = true;
    if (hooks_.beforeExecute) {
      try {
        hooks_.beforeExecute(info);
      } catch (...) {
        const std::exception_ptr error = std::current_exception();
        task->failRunning(error);
        if (!task->hasFuture()) reportUncaught(error, info);
        started = false;
        addOwn<std::uint64_t>(counters.failed, 1, std::memory_order_release);
      }
    }
    if (started) {
      const auto shard = static_cast<std::uint32_t>(worker.number % kInFlightShards);
      task->inFlightShard = shard;
      inFlight_[shard].count.fetch_add(1, std::memory_order_seq_cst);
      if (tracked) {  // shutdownNow() cancels the tokens of coroutines in flight
        std::lock_guard lock(inFlightMutex_);
        inFlightTasks_.push_back(task.get());
      }
      // Hands over our reference. Counted by coroutineFinished(), maybe
      // before this returns.
      task.detach()->startCoroutine(this);
    }
  } else {
    count(runTask(worker, *task).outcome);
  }
  if (tracked) {
    std::lock_guard local(worker.localMutex);
    worker.current = Ref<TaskCore>();
  }
  task = Ref<TaskCore>();  // user captures are destroyed here, outside every lock
  addOwn<std::size_t>(counters.active, -1, std::memory_order_relaxed);
}

PoolImpl::Counters& PoolImpl::countersHere() noexcept {
  return tlsPool == this && tlsWorker != nullptr ? tlsWorker->counters : outside_;
}

void PoolImpl::count(Outcome outcome) noexcept {
  // release: a stats() reader that sees the outcome sees the task's admission
  // (which happened before the task was handed to this thread).
  const bool own = tlsPool == this && tlsWorker != nullptr;
  Counters& counters = own ? tlsWorker->counters : outside_;
  std::atomic<std::uint64_t>& counter = outcome == Outcome::completed ? counters.completed
                                        : outcome == Outcome::failed  ? counters.failed
                                                                      : counters.cancelled;
  if (own) {
    addOwn<std::uint64_t>(counter, 1, std::memory_order_release);
  } else {
    counter.fetch_add(1, std::memory_order_release);  // outside_ has many writers
  }
}

bool PoolImpl::quiescentLocked() const noexcept {
  return continuations_.empty() && inFlightLocked() == 0 && !anyLocalWorkLocked();
}

bool PoolImpl::tryPushLocal(PendingTask& task) {
  Worker* worker = tlsWorker;
  if (!localQueues_ || worker == nullptr || tlsPool != this) return false;
  // Below corePoolSize, admission starts a new thread for the task (step 1):
  // the task must not wait behind its submitter.
  if (poolSizeMirror_.load(std::memory_order_relaxed) < coreMirror_.load(std::memory_order_relaxed)) return false;
  // The capacity of bounded(n) covers the local queues too.
  if (!reserveQueued()) return false;
  if (stateMirror_.load(std::memory_order_seq_cst) != PoolState::running) {
    releaseQueued();
    return false;
  }
  task.core_->owner = this;
  addOwn<std::uint64_t>(worker->counters.tasks, 1, std::memory_order_relaxed);  // before anyone can run it
  // The seq_cst push, then seq_cst loads of searching_ and idleCount_: pairs
  // with a parking worker that stores idleCount_ and then reads every local
  // queue's size, and with a searcher that decrements searching_ before it
  // looks again, so one of the two sees the other (no lost wake-up).
  //
  // shutdownNow() stores STOP and then drains the local queues. A push that
  // passed the check above just before it is either drained or, if it lands
  // after the drain, run by this worker (which pops its own queue before it
  // can exit), like a task a worker dequeued just before the drain.
  std::size_t queued = 0;
  try {
    queued = worker->local.push(task.core_.get());  // throws only if its array cannot grow
  } catch (...) {
    addOwn<std::uint64_t>(worker->counters.tasks, -1, std::memory_order_relaxed);
    releaseQueued();
    throw;
  }
  task.core_.detach();  // the queue holds the reference now
  if (searching_.load(std::memory_order_seq_cst) > 0) {
    // Tell the searcher only when there is more than this worker will take
    // next: a lone task (a chain, each task submitting the next) stays with
    // its submitter, which runs it as soon as the current task returns. If
    // the submitter blocks instead, the searcher steals it when its spin
    // window ends, on its way to parking.
    if (queued >= 2) localSignal_.fetch_add(1, std::memory_order_relaxed);
  } else if (idleCount_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard lock(mutex_);
    wakeOneLocked();
  }
  return true;
}

PoolImpl::Work PoolImpl::popLocal(Worker& worker) {
  TaskCore* raw = nullptr;
  if (!worker.local.pop(raw)) return {};
  releaseQueued();
  return Work{Ref<TaskCore>::adopt(raw), {}, false};
}

bool PoolImpl::stealFrom(Worker& victim, Ref<TaskCore>& out) noexcept {
  TaskCore* raw = nullptr;
  while (true) {
    switch (victim.local.steal(raw)) {
      case WorkStealingDeque<TaskCore*>::Steal::taken:
        releaseQueued();
        out = Ref<TaskCore>::adopt(raw);
        return true;
      case WorkStealingDeque<TaskCore*>::Steal::empty: return false;
      case WorkStealingDeque<TaskCore*>::Steal::contended: break;  // someone else took that one: look again
    }
  }
}

PoolImpl::Work PoolImpl::stealLocked(Worker& thief) {
  for (Worker& victim : workers_) {
    // A continuation its worker has not resumed yet (it may be blocked).
    if (&victim == &thief || victim.nextContinuation.load(std::memory_order_relaxed) == nullptr) continue;
    if (void* next = victim.nextContinuation.exchange(nullptr, std::memory_order_acquire)) {
      return Work{{}, std::coroutine_handle<>::from_address(next), false};
    }
  }
  for (Worker& victim : workers_) {
    if (&victim == &thief) continue;
    if (Ref<TaskCore> task; stealFrom(victim, task)) return Work{std::move(task), {}, false};
  }
  return {};
}

bool PoolImpl::anyLocalWorkLocked() const noexcept {
  for (const Worker& worker : workers_) {
    if (worker.local.size() > 0) return true;
    if (worker.nextContinuation.load(std::memory_order_seq_cst) != nullptr) return true;
  }
  return false;
}

void PoolImpl::drainLocalsLocked(std::vector<PendingTask>& into) {
  for (Worker& worker : workers_) {
    for (Ref<TaskCore> task; stealFrom(worker, task);)  // oldest first
      into.push_back(PendingTask(std::move(task)));
  }
}

bool PoolImpl::wakeOneLocked() {
  if (idleWorkers_.empty()) return false;
  Worker* worker = idleWorkers_.back();
  idleWorkers_.pop_back();
  idleCount_.store(idleWorkers_.size(), std::memory_order_relaxed);
  worker->signalled = true;
  worker->wake.notify_one();
  return true;
}

void PoolImpl::wakeAllLocked() {
  while (wakeOneLocked()) {
  }
}

bool PoolImpl::handOffLocked(PendingTask& task) {
  if (idleWorkers_.empty()) return false;
  Worker* worker = idleWorkers_.back();
  worker->handoff = std::move(task.core_);
  worker->counters.active.fetch_add(1, std::memory_order_relaxed);
  worker->counters.tasks.fetch_add(1, std::memory_order_relaxed);
  wakeOneLocked();
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
  if (!localQueues_ || state_ != PoolState::running) return;
  searching_.fetch_add(1, std::memory_order_seq_cst);
  const std::size_t signal = localSignal_.load(std::memory_order_relaxed);
  lock.unlock();
  spinUntil(
      [&] {
        // A fork that saw searching_ == 0 does not signal; the recheck under
        // the lock after the window finds its task.
        return sharedWork_.load(std::memory_order_seq_cst) > 0 ||
               localSignal_.load(std::memory_order_relaxed) != signal || !inject_->empty() ||
               stateMirror_.load(std::memory_order_relaxed) != PoolState::running;
      },
      kSpinWindow);
  // Before the lock: a submitter that saw us searching (and did not wake
  // anyone) published its task before it read searching_, so the recheck
  // under the lock finds it.
  searching_.fetch_sub(1, std::memory_order_seq_cst);
  lock.lock();
}

void PoolImpl::wakeHelperLocked() {
  // Work remains after the taker's share: get another worker going, unless
  // one is already searching (it will find the rest).
  const bool more = sharedWork_.load(std::memory_order_relaxed) > 0 || (inject_ && !inject_->empty());
  if (more && searching_.load(std::memory_order_seq_cst) == 0) {
    wakeOneLocked();
  }
}

void PoolImpl::refillLocked() {
  // Moves the overflow's oldest tasks into the ring, in order, so that the
  // workers take them without the lock; new submissions keep going to queue_
  // (behind them) until it is empty.
  for (std::size_t moved = 0; moved < inject_->capacity() / 2 && !queue_.empty(); ++moved) {
    std::size_t pos = 0;
    if (!inject_->tryClaim(pos)) break;
    inject_->publish(pos, queue_.poll().core_.detach());
  }
  if (queue_.empty()) overflow_.store(false, std::memory_order_release);
}

PoolImpl::Work PoolImpl::takeWorkLocked(Worker& worker, std::unique_lock<std::mutex>& lock) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point idleSince{};  // read the clock only once there is nothing to do
  bool waited = false;
  bool spun = false;
  while (true) {
    if (worker.handoff) return Work{std::move(worker.handoff), {}, true};
    // Continuations first: they finish work already admitted, even after shutdown.
    if (!continuations_.empty()) {
      Work work{{}, continuations_.pop(), false};
      publishSharedWorkLocked();
      wakeHelperLocked();
      return work;
    }
    const std::size_t inFlight = inFlightLocked();
    if (state_ == PoolState::stop && inFlight == 0) return {};
    const std::size_t shared = sharedQueuedLocked();
    if (state_ == PoolState::shutdown && shared == 0 && inFlight == 0 && !anyLocalWorkLocked()) return {};
    const std::size_t size = workers_.size();
    // Above max (after setMaximumPoolSize): exit, unless we are the last thread
    // and there is queued work.
    if (size > maximumPoolSize_ && (size > 1 || shared == 0)) return {};
    if (Work work = popInject(/*locked=*/true)) return work;
    if (inject_ && !inject_->empty()) {  // a push between claim and publish: a moment
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
      continue;
    }
    if (PendingTask next = queue_.poll(); next.valid()) {
      releaseQueued();
      if (inject_) refillLocked();  // the ring is empty: the overflow's oldest go back to it
      publishSharedWorkLocked();
      wakeHelperLocked();
      if (blockedProducers_ > 0) roomAvailable_.notify_all();
      return Work{std::move(next.core_), {}, false};
    }
    if (Work stolen = stealLocked(worker)) return stolen;
    if (!spun) {
      spun = true;
      spinForWorkLocked(lock);
      continue;  // the state may have changed while the lock was released
    }
    const bool timed = allowCoreThreadTimeOut_ || size > corePoolSize_;
    if (idleSince == Clock::time_point{}) idleSince = Clock::now();
    const auto deadline = idleSince + std::chrono::duration_cast<Clock::duration>(keepAliveTime_);
    // An idle thread may time out even while coroutines are in flight: a
    // continuation posted to a pool without threads starts one.
    if (timed && waited && Clock::now() >= deadline) return {};
    worker.signalled = false;
    idleWorkers_.push_back(&worker);
    idleCount_.store(idleWorkers_.size(), std::memory_order_seq_cst);
    // Pushed (locally or to inject_, without the lock) before it could see us
    // idle: take it instead of sleeping.
    if (anyLocalWorkLocked() || (inject_ && !inject_->empty())) {
      idleWorkers_.pop_back();
      idleCount_.store(idleWorkers_.size(), std::memory_order_relaxed);
      continue;
    }
    if (blockedProducers_ > 0) roomAvailable_.notify_all();  // an idle thread is room for a hand-off
    if (timed) {
      worker.wake.wait_until(lock, deadline, [&] { return worker.signalled; });
    } else {
      worker.wake.wait(lock, [&] { return worker.signalled; });
    }
    if (!worker.signalled) {  // timed out: leave the idle stack
      idleWorkers_.erase(std::find(idleWorkers_.begin(), idleWorkers_.end(), &worker));
      idleCount_.store(idleWorkers_.size(), std::memory_order_relaxed);
    }
    waited = true;
  }
}

void PoolImpl::post(std::coroutine_handle<> handle) noexcept {
  if (Worker* worker = tlsWorker; worker != nullptr && tlsPool == this) {
    // A hop from one of our own threads: the worker's next-continuation slot.
    void* displaced = worker->nextContinuation.exchange(handle.address(), std::memory_order_seq_cst);
    if (displaced == nullptr) {
      // Paired like tryPushLocal: a parking worker stores idleCount_ and then
      // looks at every slot. Wake one only if nobody searches and someone
      // sleeps: in steady state the other workers spin or are busy.
      if (searching_.load(std::memory_order_seq_cst) == 0 && idleCount_.load(std::memory_order_seq_cst) > 0) {
        std::lock_guard lock(mutex_);
        wakeOneLocked();
      }
      return;
    }
    handle = std::coroutine_handle<>::from_address(displaced);  // the older one goes to the shared queue
  }
  FactoryErrors errors;
  {
    std::lock_guard lock(mutex_);
    if (state_ != PoolState::terminated) {
      continuations_.push(handle);
      publishSharedWorkLocked();
      if (searching_.load(std::memory_order_seq_cst) > 0) return;  // a searching worker takes it
      if (wakeOneLocked() || !workers_.empty()) return;            // else a busy worker takes it next
      PendingTask none;
      if (addWorkerLocked(none, errors)) return;
      continuations_.extractIf([handle](std::coroutine_handle<> h) { return h == handle; });
      publishSharedWorkLocked();
    }
  }
  // The pool has terminated, or no thread could be started for it: resume
  // here rather than lose the coroutine.
  reportFactoryErrors(errors);
  resume(handle);
}

void PoolImpl::coroutineFinished(TaskCore& task, const RunResult& result) noexcept {
  const TaskInfo info{name_, tlsWorkerName ? std::string_view(*tlsWorkerName) : std::string_view("(outside the pool)"),
                      task.hasFuture(), task.priority()};
  if (hooks_.afterExecute) {
    try {
      hooks_.afterExecute(info, result.error);
    } catch (...) {
      printDropped("the afterExecute hook", name_, info.threadName, std::current_exception());
    }
  }
  if (result.outcome == Outcome::failed && !task.hasFuture()) reportUncaught(result.error, info);
  count(result.outcome);
  if (task.hasToken()) {
    std::lock_guard inFlightLock(inFlightMutex_);
    const auto it = std::find(inFlightTasks_.begin(), inFlightTasks_.end(), &task);
    if (it != inFlightTasks_.end()) {
      *it = inFlightTasks_.back();
      inFlightTasks_.pop_back();
    }
  }
  inFlight_[task.inFlightShard].count.fetch_sub(1, std::memory_order_seq_cst);
  // seq_cst with the shutdown's seq_cst store of the state and its seq_cst
  // sum: either we see the shutdown, or it sees our decrement.
  if (stateMirror_.load(std::memory_order_seq_cst) == PoolState::running) return;
  std::unique_lock lock(mutex_);
  if (inFlightLocked() == 0 && state_ != PoolState::running) {
    wakeAllLocked();
    tryTerminateLocked(lock);
  }
}

RunResult PoolImpl::runTask(Worker& worker, TaskCore& task) {
  const TaskInfo info{name_, worker.name, task.hasFuture(), task.priority()};
  if (hooks_.beforeExecute) {
    try {
      hooks_.beforeExecute(info);
    } catch (...) {
      const std::exception_ptr error = std::current_exception();
      task.failRunning(error);
      if (!task.hasFuture()) reportUncaught(error, info);
      return {Outcome::failed, error};
    }
  }
  RunResult result = task.run();
  if (hooks_.afterExecute) {
    try {
      hooks_.afterExecute(info, result.error);
    } catch (...) {
      printDropped("the afterExecute hook", name_, worker.name, std::current_exception());
    }
  }
  if (result.outcome == Outcome::failed && !task.hasFuture()) reportUncaught(result.error, info);
  return result;
}

void PoolImpl::workerExitedLocked(Worker* worker, std::unique_lock<std::mutex>& lock) {
  // Its counts move to outside_ under the lock stats() holds: no snapshot
  // sees them twice or not at all. Nothing else writes them now (it is idle).
  const Counters& gone = worker->counters;
  outside_.tasks.fetch_add(gone.tasks.load(std::memory_order_relaxed), std::memory_order_relaxed);
  outside_.completed.fetch_add(gone.completed.load(std::memory_order_relaxed), std::memory_order_relaxed);
  outside_.failed.fetch_add(gone.failed.load(std::memory_order_relaxed), std::memory_order_relaxed);
  outside_.cancelled.fetch_add(gone.cancelled.load(std::memory_order_relaxed), std::memory_order_relaxed);
  exited_.push_back(std::move(worker->thread));
  workers_.remove_if([worker](const Worker& w) { return &w == worker; });
  // seq_cst, then the seq_cst size of inject_: a lock-free submitter pushes
  // and then reads poolSizeMirror_, so one of the two starts a thread.
  poolSizeMirror_.store(workers_.size(), std::memory_order_seq_cst);
  if (blockedProducers_ > 0) roomAvailable_.notify_all();  // room for a new thread
  if (workers_.empty() && ((sharedQueuedLocked() > 0 && state_ != PoolState::stop) || !continuations_.empty())) {
    // Never leave queued work without a thread (the pool was resized or all
    // threads timed out while a task arrived).
    FactoryErrors errors;
    PendingTask none;
    addWorkerLocked(none, errors);
    if (!errors.empty()) {
      lock.unlock();
      reportFactoryErrors(errors);
      lock.lock();
    }
  }
  tryTerminateLocked(lock);
}

void PoolImpl::tryTerminateLocked(std::unique_lock<std::mutex>& lock) {
  if (state_ == PoolState::running || state_ == PoolState::terminated || terminating_) return;
  if (!workers_.empty() || !quiescentLocked()) return;
  if (state_ == PoolState::shutdown && sharedQueuedLocked() > 0) return;
  terminating_ = true;
  if (hooks_.terminated) {
    lock.unlock();
    try {
      hooks_.terminated();
    } catch (...) {
      printDropped("the terminated hook", name_, tlsPool == this ? "(pool thread)" : "(caller)",
                   std::current_exception());
    }
    lock.lock();
  }
  setStateLocked(PoolState::terminated);
  terminating_ = false;
  terminated_.notify_all();
}

PoolStats PoolImpl::statsLocked() const {
  PoolStats s;
  // Outcomes before taskCount (acquire): every outcome counted was admitted
  // first, so the snapshot never shows more outcomes than tasks.
  const auto sum = [this](auto field, std::memory_order order) {
    std::uint64_t total = (outside_.*field).load(order);
    for (const Worker& worker : workers_)
      total += (worker.counters.*field).load(order);
    return total;
  };
  s.completedTaskCount = sum(&Counters::completed, std::memory_order_acquire);
  s.failedCount = sum(&Counters::failed, std::memory_order_acquire);
  s.cancelledCount = sum(&Counters::cancelled, std::memory_order_acquire);
  s.taskCount = sum(&Counters::tasks, std::memory_order_acquire);
  s.name = name_;
  s.state = state_;
  s.corePoolSize = corePoolSize_;
  s.maximumPoolSize = maximumPoolSize_;
  s.poolSize = workers_.size();
  s.activeCount = static_cast<std::size_t>(sum(&Counters::active, std::memory_order_relaxed));
  s.largestPoolSize = largestPoolSize_;
  s.queueSize = sharedQueuedLocked();
  s.localQueueSize = 0;
  for (const Worker& worker : workers_)
    s.localQueueSize += worker.local.size();
  s.queueCapacity = queueSpec_.capacity();
  s.rejectedCount = rejected_;
  s.discardedCount = discarded_;
  s.drainedCount = drained_;
  return s;
}

void PoolImpl::reportFactoryErrors(const FactoryErrors& errors) {
  for (const std::exception_ptr& error : errors) {
    reportUncaught(error, TaskInfo{name_, "(thread factory)", false, 0});
  }
}

void PoolImpl::reportUncaught(const std::exception_ptr& error, const TaskInfo& info) noexcept {
  if (!uncaughtHandler_) {
    printDropped("a task", info.poolName, info.threadName, error);
    return;
  }
  try {
    uncaughtHandler_(error, info);
  } catch (...) {
    printDropped("the uncaught-exception handler", info.poolName, info.threadName, std::current_exception());
  }
}

std::size_t PoolImpl::startWorkers(std::size_t count, bool onlyForQueuedWork) {
  FactoryErrors errors;
  std::size_t started = 0;
  {
    std::lock_guard lock(mutex_);
    while (started < count && state_ == PoolState::running && workers_.size() < corePoolSize_) {
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

// ---- ThreadPoolExecutor ------------------------------------------------------

ThreadPoolExecutor::ThreadPoolExecutor(ThreadPoolOptions options)
    : impl_(std::make_unique<detail::PoolImpl>(*this, detail::validated(std::move(options)))) {}

ThreadPoolExecutor::ThreadPoolExecutor(std::size_t corePoolSize, std::size_t maximumPoolSize,
                                       std::chrono::nanoseconds keepAliveTime, WorkQueue workQueue,
                                       RejectionPolicy rejectionPolicy)
    : ThreadPoolExecutor([&] {
        ThreadPoolOptions options;
        options.corePoolSize = corePoolSize;
        options.maximumPoolSize = maximumPoolSize;
        options.keepAliveTime = keepAliveTime;
        options.workQueue = workQueue;
        options.rejectionPolicy = std::move(rejectionPolicy);
        return options;
      }()) {}

ThreadPoolExecutor::~ThreadPoolExecutor() {
  try {
    close();
  } catch (const std::exception& e) {
    fmt::print(stderr, "coexec: fatal: ~ThreadPoolExecutor of pool '{}': {}\n", impl_->name_, e.what());
    std::abort();
  }
}

void ThreadPoolExecutor::throwEmptyCallable(const char* operation) {
  throw std::invalid_argument(fmt::format(
      "coexec::ThreadPoolExecutor::{}: the task is empty (an empty std::function or a null pointer)", operation));
}

void ThreadPoolExecutor::admit(PendingTask task) {
  if (!tryAdmit(task, /*countRejection=*/true)) impl_->policy_(task, *this);
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
      if (countRejection) ++p.rejected_;  // in the same snapshot as the refusal
      task.core_->rejectReason = p.saturationReasonLocked(!errors.empty());
    }
  }
  p.reportFactoryErrors(errors);
  return admitted;
}

RejectedExecution ThreadPoolExecutor::rejection(const PendingTask& task) const {
  // The reason the admission recorded, if it was this pool's; else the
  // pool's state now (a policy called directly, or on another pool's task).
  const bool ours = task.valid() && task.core_->owner == impl_.get() && task.core_->rejectReason != nullptr;
  const char* reason = ours           ? task.core_->rejectReason
                       : isShutdown() ? "the pool is shut down and accepts no new tasks"
                                      : "the rejection policy refused the task";
  return RejectedExecution(reason, stats());
}

bool ThreadPoolExecutor::evictOldest() {
  detail::PoolImpl& p = *impl_;
  PendingTask victim;
  {
    std::lock_guard lock(p.mutex_);
    if (p.state_ != PoolState::running) return false;
    detail::TaskCore* raw = nullptr;
    if (p.inject_ && p.inject_->tryPop(raw)) {  // the ring holds the oldest tasks
      victim = PendingTask(detail::Ref<detail::TaskCore>::adopt(raw));
    } else {
      victim = p.queue_.poll();
    }
    if (!victim.valid()) return false;
    p.releaseQueued();
    p.publishSharedWorkLocked();
    if (victim.isCancelled()) {
      p.outside_.cancelled.fetch_add(1, std::memory_order_relaxed);
    } else {
      ++p.discarded_;
    }
  }
  victim.core_->abandon(std::make_exception_ptr(
      RejectedExecution("the task was evicted from the queue by the discardOldest policy", stats())));
  return true;
}

bool ThreadPoolExecutor::offerWithin(PendingTask& task, std::chrono::nanoseconds timeout) {
  detail::PoolImpl& p = *impl_;
  const auto deadline = detail::deadlineAfter(timeout);
  detail::PoolImpl::FactoryErrors errors;
  bool admitted = false;
  {
    std::unique_lock lock(p.mutex_);
    p.blockedMirror_.store(++p.blockedProducers_, std::memory_order_seq_cst);
    while (true) {
      if (p.tryAdmitLocked(task, errors)) {
        admitted = true;
        break;
      }
      if (p.state_ != PoolState::running) {
        task.core_->rejectReason = p.saturationReasonLocked(false);
        break;
      }
      if (p.roomAvailable_.wait_until(lock, deadline) == std::cv_status::timeout) {
        admitted = p.tryAdmitLocked(task, errors);
        if (!admitted) task.core_->rejectReason = "the work queue stayed full for the whole block() timeout";
        break;
      }
    }
    p.blockedMirror_.store(--p.blockedProducers_, std::memory_order_seq_cst);
  }
  p.reportFactoryErrors(errors);
  return admitted;
}

void ThreadPoolExecutor::shutdown() {
  detail::PoolImpl& p = *impl_;
  std::unique_lock lock(p.mutex_);
  if (p.state_ == PoolState::running) p.setStateLocked(PoolState::shutdown);
  p.waitAdmissionsLocked();  // every lock-free push has landed or will be refused
  detail::PoolImpl::FactoryErrors errors;
  if (p.workers_.empty() && p.sharedQueuedLocked() > 0 && p.state_ == PoolState::shutdown) {
    PendingTask none;  // queued work whose thread failed to start: try again to drain it
    p.addWorkerLocked(none, errors);
  }
  p.wakeAllLocked();
  p.roomAvailable_.notify_all();
  p.tryTerminateLocked(lock);
  lock.unlock();
  p.reportFactoryErrors(errors);
}

std::vector<PendingTask> ThreadPoolExecutor::shutdownNow() {
  detail::PoolImpl& p = *impl_;
  std::vector<PendingTask> unrun;
  std::vector<PendingTask> cancelled;
  std::vector<detail::Ref<detail::TaskCore>> running;
  {
    std::unique_lock lock(p.mutex_);
    if (p.state_ == PoolState::running || p.state_ == PoolState::shutdown) p.setStateLocked(PoolState::stop);
    p.waitAdmissionsLocked();  // every lock-free push has landed or will be refused
    std::vector<PendingTask> queued = p.drainSharedLocked();
    p.releaseQueued(queued.size());
    p.publishSharedWorkLocked();
    p.drainLocalsLocked(queued);  // after the shared queue: it holds the older tasks
    for (PendingTask& task : queued) {
      if (task.isCancelled()) {
        p.outside_.cancelled.fetch_add(1, std::memory_order_relaxed);
        cancelled.push_back(std::move(task));
      } else {
        ++p.drained_;
        unrun.push_back(std::move(task));
      }
    }
    for (auto& worker : p.workers_) {
      std::lock_guard local(worker.localMutex);
      if (worker.current) running.push_back(worker.current);
    }
    {
      std::lock_guard inFlightLock(p.inFlightMutex_);
      for (detail::TaskCore* task : p.inFlightTasks_) {
        task->addRef();  // alive: coroutineFinished() removes it under this mutex before releasing it
        running.push_back(detail::Ref<detail::TaskCore>::adopt(task));
      }
    }
    p.wakeAllLocked();
    p.roomAvailable_.notify_all();
    p.tryTerminateLocked(lock);
  }
  // Outside the lock: token callbacks and capture destructors are user code.
  for (auto& task : running)
    task->requestTokenCancellation();
  return unrun;
}

bool ThreadPoolExecutor::awaitTermination(std::chrono::nanoseconds timeout) {
  detail::PoolImpl& p = *impl_;
  if (detail::currentPool() == &p) {
    throw std::logic_error(fmt::format(
        "coexec::ThreadPoolExecutor::awaitTermination called from thread of pool '{}' itself: the pool cannot "
        "terminate while this thread runs a task",
        p.name_));
  }
  std::unique_lock lock(p.mutex_);
  return p.terminated_.wait_until(lock, detail::deadlineAfter(timeout),
                                  [&] { return p.state_ == PoolState::terminated; });
}

void ThreadPoolExecutor::close() {
  detail::PoolImpl& p = *impl_;
  if (detail::currentPool() == &p) {
    throw std::logic_error(fmt::format(
        "coexec::ThreadPoolExecutor::close (or the destructor) called from a thread of pool '{}' itself: a pool "
        "cannot wait for its own threads",
        p.name_));
  }
  shutdown();
  std::vector<std::thread> threads;
  {
    std::unique_lock lock(p.mutex_);
    p.terminated_.wait(lock, [&] { return p.state_ == PoolState::terminated; });
    threads.swap(p.exited_);
  }
  for (std::thread& t : threads)
    t.join();
}

bool ThreadPoolExecutor::isShutdown() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->state_ != PoolState::running;
}

bool ThreadPoolExecutor::isTerminating() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->state_ == PoolState::shutdown || impl_->state_ == PoolState::stop;
}

bool ThreadPoolExecutor::isTerminated() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->state_ == PoolState::terminated;
}

bool ThreadPoolExecutor::prestartCoreThread() { return impl_->startWorkers(1, false) == 1; }

std::size_t ThreadPoolExecutor::prestartAllCoreThreads() {
  return impl_->startWorkers(std::numeric_limits<std::size_t>::max(), false);
}

void ThreadPoolExecutor::setCorePoolSize(std::size_t corePoolSize) {
  detail::PoolImpl& p = *impl_;
  std::size_t grow = 0;
  {
    std::lock_guard lock(p.mutex_);
    if (corePoolSize > p.maximumPoolSize_) {
      throw std::invalid_argument(
          fmt::format("coexec::ThreadPoolExecutor::setCorePoolSize: corePoolSize ({}) must not be greater than "
                      "maximumPoolSize ({})",
                      corePoolSize, p.maximumPoolSize_));
    }
    grow = corePoolSize > p.corePoolSize_ ? corePoolSize - p.corePoolSize_ : 0;
    p.corePoolSize_ = corePoolSize;
    p.coreMirror_.store(corePoolSize, std::memory_order_relaxed);
    if (p.workers_.size() > corePoolSize) p.wakeAllLocked();  // surplus threads become timed
  }
  if (grow > 0) p.startWorkers(grow, true);
}

void ThreadPoolExecutor::setMaximumPoolSize(std::size_t maximumPoolSize) {
  detail::PoolImpl& p = *impl_;
  std::lock_guard lock(p.mutex_);
  if (maximumPoolSize == 0 || maximumPoolSize < p.corePoolSize_) {
    throw std::invalid_argument(
        fmt::format("coexec::ThreadPoolExecutor::setMaximumPoolSize: maximumPoolSize must be at least 1 and at least "
                    "corePoolSize ({}), got {}",
                    p.corePoolSize_, maximumPoolSize));
  }
  p.maximumPoolSize_ = maximumPoolSize;
  p.wakeAllLocked();
  if (p.blockedProducers_ > 0) p.roomAvailable_.notify_all();
}

void ThreadPoolExecutor::setKeepAliveTime(std::chrono::nanoseconds keepAliveTime) {
  if (keepAliveTime < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(fmt::format(
        "coexec::ThreadPoolExecutor::setKeepAliveTime: keepAliveTime must be non-negative, got {}", keepAliveTime));
  }
  detail::PoolImpl& p = *impl_;
  std::lock_guard lock(p.mutex_);
  p.keepAliveTime_ = keepAliveTime;
  p.wakeAllLocked();
}

void ThreadPoolExecutor::allowCoreThreadTimeOut(bool value) {
  detail::PoolImpl& p = *impl_;
  std::lock_guard lock(p.mutex_);
  p.allowCoreThreadTimeOut_ = value;
  p.wakeAllLocked();
}

std::size_t ThreadPoolExecutor::corePoolSize() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->corePoolSize_;
}

std::size_t ThreadPoolExecutor::maximumPoolSize() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->maximumPoolSize_;
}

std::chrono::nanoseconds ThreadPoolExecutor::keepAliveTime() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->keepAliveTime_;
}

bool ThreadPoolExecutor::allowsCoreThreadTimeOut() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->allowCoreThreadTimeOut_;
}

std::string_view ThreadPoolExecutor::name() const noexcept { return impl_->name_; }

const WorkQueue& ThreadPoolExecutor::workQueue() const noexcept { return impl_->queueSpec_; }

const RejectionPolicy& ThreadPoolExecutor::rejectionPolicy() const noexcept { return impl_->policy_; }

std::size_t ThreadPoolExecutor::purge() {
  detail::PoolImpl& p = *impl_;
  std::vector<PendingTask> removed;
  {
    std::lock_guard lock(p.mutex_);
    // The ring cannot remove from its middle: every queued task moves to
    // queue_, in order, the cancelled ones are taken out, and submissions
    // queue behind the rest (overflow) until the workers have taken them.
    for (PendingTask& task : p.drainSharedLocked()) {
      if (task.isCancelled()) {
        removed.push_back(std::move(task));
      } else {
        p.queue_.offer(task);  // cannot fail: no more tasks than before
      }
    }
    if (p.inject_ && !p.queue_.empty()) p.overflow_.store(true, std::memory_order_release);
    p.releaseQueued(removed.size());
    p.publishSharedWorkLocked();
    p.outside_.cancelled.fetch_add(removed.size(), std::memory_order_relaxed);
    if (!removed.empty() && p.blockedProducers_ > 0) p.roomAvailable_.notify_all();
  }
  return removed.size();  // destroyed here, outside the lock
}

PoolStats ThreadPoolExecutor::stats() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->statsLocked();
}

}  // namespace coexec
