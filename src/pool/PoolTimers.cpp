// SPDX-License-Identifier: BSL-1.0
// A pool's timers: schedule(), scheduleAtFixedRate(), scheduleWithFixedDelay(),
// and the keep-alive alarms of a pool on a ManualClock.
//
// A timer item (ScheduledItem, PoolTimers.h) is live from schedule*() until
// it has nothing more to do for the pool, and armed while its timer is
// pending in timers_. When the timer fires (onTimer, on the timer thread or
// in ManualClock::advance()), the item's work is handed to engine_.due: a one-shot's
// task, or a periodic schedule's next run (a PeriodicRun task). Workers take
// engine_.due right after the continuations: due work is admitted work, never
// rejected and never bounded by the work queue.
//
// Who ends what:
// - Whoever disarms an armed item first (TimerService::cancel() returned
//   true, or the timer fired) decides its fate; a canceller whose cancel()
//   returns false leaves the item to onTimer, which sees why it was
//   cancelled (the task is done, the schedule's cancelRequested, the pool's
//   state).
// - A periodic schedule that is live but not armed has a run queued or
//   running: that run decides (periodicRunEnded) whether to re-arm or end.
// - The pool terminates only when no item is live, no pin is held and engine_.due
//   is empty (tryTerminateLocked).
//
// Locks: mutex_ guards the live list, every item's armed/timer/deadline/due
// fields and the counters; engine_.due has its own lock (DueWork.h). mutex_ is
// taken before engine_.due's lock, before TimerService's own lock
// and before an item's guard, never the other way round (a pin is taken
// under the guard, which is released before mutex_ is taken). User code
// (settling Futures and handles, token callbacks, dropping tasks) runs with
// no lock held: TimerWork collects it.

#include "pool/PoolTimers.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "coexec/Errors.h"
#include "coexec/detail/ResultCore.h"
#include "pool/PoolImpl.h"

namespace coexec {
namespace detail {

void TimerWork::run(PoolImpl& pool) noexcept {
  for (Ref<PeriodicState>& state : tokens)
    state->cancelRunToken();
  tokens.clear();
  for (auto& [state, error] : end)
    state->end(pool, std::move(error));
  for (Ref<TaskCore>& task : cancel)
    task->requestCancel();
  end.clear();
  cancel.clear();
  drop.clear();
  release.forEach([](ScheduledItem* item) { item->releaseItem(); });
  release.clear();
  pool.reportFactoryErrors(errors);
}

namespace {

std::exception_ptr cancelledByPool(const PoolImpl& pool, const char* how) {
  return std::make_exception_ptr(
      OperationCancelled(fmt::format("coexec: the periodic schedule was ended by {} of pool '{}'", how, pool.name_)));
}

}  // namespace

// ---- ScheduledItem ---------------------------------------------------------------

PoolImpl* ScheduledItem::pinPool() noexcept {
  std::lock_guard guarded(guard);
  // seq_cst: tryTerminateLocked reads the pins under mutex_ after the item
  // left the list (which cleared `pool` under this guard).
  if (pool != nullptr) pool->life_.pin();
  return pool;
}

void OneShotTimer::queuedTaskCancelled() noexcept {
  PoolImpl* pool = pinPool();
  if (pool == nullptr) return;  // fired (it is in engine_.due, where a worker skips it) or removed already
  TimerWork work;
  std::unique_lock lock(pool->mutex_);
  if (pool->liveItems_.disarmLocked(*this, pool->timers_)) {
    work.drop.push_back(std::move(task));
    pool->removeItemLocked(*this, work.release);
  }
  // Otherwise the timer is firing: onTimer finds the task done and drops it.
  // What is left to do needs no unlocking: the task's reference is not the
  // last (whoever cancels holds one), and the item's neither (the task's).
  work.drop.clear();
  work.release.forEach([](ScheduledItem* released) { released->releaseItem(); });
  work.release.clear();
  pool->unpinLocked(lock);
}

// ---- PeriodicState ---------------------------------------------------------------

class PeriodicState::Completion final : public ResultCore<void> {
 public:
  explicit Completion(const void* pool) : ResultCore<void>(/*hasFuture=*/true, /*wantsToken=*/false, 0) {
    owner = pool;  // a wait for it from one of the pool's own threads is refused
    (void)tryStart();
  }
  void complete(std::exception_ptr error) noexcept { (void)finish(std::move(error)); }

 private:
  void invoke() override {}
};

PeriodicState::PeriodicState(Ref<PeriodicBody> body, Clock& clock, Clock::time_point first, Clock::duration interval,
                             bool fixedRate, PeriodicOptions options, const void* poolIdentity)
    : options(options),
      fixedRate(fixedRate),
      interval(interval),
      due(first),
      body_(std::move(body)),
      clock_(clock),
      completion_(Ref<ResultCore<void>>::adopt(new Completion(poolIdentity))),
      nextRun_(first.time_since_epoch().count()) {}

Ref<ResultCore<void>> PeriodicState::completion() const noexcept { return completion_; }

bool PeriodicState::cancel() noexcept {
  if (ended_.load(std::memory_order_acquire)) return false;
  if (cancelRequested.exchange(true, std::memory_order_acq_rel)) return false;
  source_.requestCancellation();  // a run in progress sees its token (callbacks run here)
  PoolImpl* pool = pinPool();
  if (pool == nullptr) return true;  // being ended by the pool already
  TimerWork work;
  std::unique_lock lock(pool->mutex_);
  if (pool->liveItems_.disarmLocked(*this, pool->timers_)) {
    addRef();
    work.end.emplace_back(Ref<PeriodicState>::adopt(this), nullptr);
    pool->removeItemLocked(*this, work.release);
  }
  // Otherwise a run is queued or running, or the timer is firing: each of
  // them sees cancelRequested and ends the schedule normally.
  lock.unlock();
  work.run(*pool);
  lock.lock();
  pool->unpinLocked(lock);
  return true;
}

void PeriodicState::runOnce(PoolImpl& pool) {
  if (cancelRequested.load(std::memory_order_acquire)) {
    pool.periodicRunEnded(*this, nullptr);
    return;
  }
  runs_.fetch_add(1, std::memory_order_acq_rel);
  std::exception_ptr error;
  try {
    body_->run(source_.token());
  } catch (...) {
    error = std::current_exception();
  }
  if (error && !isOperationCancelled(error)) {
    // Reported before the handle settles: whoever sees the schedule end
    // with this error also sees the handler's call.
    pool.reportUncaught(error, TaskInfo{pool.name_, tlsWorkerName ? std::string_view(*tlsWorkerName) : "(caller)",
                                        false, 0});
  }
  pool.periodicRunEnded(*this, error);
  // For afterExecute; the pool does not report a periodic run's error again.
  if (error) std::rethrow_exception(error);
}

void PeriodicState::end(PoolImpl& pool, std::exception_ptr error) noexcept {
  if (ended_.exchange(true, std::memory_order_acq_rel)) return;
  nextRun_.store(Clock::time_point::min().time_since_epoch().count(), std::memory_order_release);
  source_.requestCancellation();
  if (counted) {
    pool.count(TaskCore::outcomeOf(error));
  }
  static_cast<Completion&>(*completion_).complete(std::move(error));
}

Clock::time_point PeriodicState::nextDeadline(Clock::time_point now) noexcept {
  if (!fixedRate) return saturatedAdd(now, interval);
  const Clock::time_point next = saturatedAdd(due, interval);
  if (next > now || next == Clock::time_point::max()) {
    due = next;
    return next;
  }
  // Late: the next run starts at once and stands for the latest grid point
  // that has passed; the ones before it are skipped.
  due += ((now - due) / interval) * interval;
  return now;
}

PeriodicRun::PeriodicRun(Ref<PeriodicState> state, PoolImpl& pool)
    : TaskCore(/*hasFuture=*/false, /*wantsToken=*/false, 0), state_(std::move(state)), pool_(pool) {
  poolState(*this).markPeriodicRun();
  owner = &pool;
}

// ---- PoolImpl ----------------------------------------------------------------------

TimerService* PoolImpl::timerService() noexcept { return &timers_; }

void PoolImpl::addItemLocked(ScheduledItem& item, Clock::time_point deadline, Clock::time_point now,
                             TimerWork& work) {
  if (life_.stateLocked() != PoolState::running) {
    tallies_.countRejectedLocked();
    throw RejectedExecution("the pool is shut down and accepts no new scheduled tasks", statsLocked());
  }
  // Room in engine_.due for the work of every live item and of what is already
  // there, so that handing work over (in a timer callback) never allocates.
  engine_.due.reserveMore(liveItems_.countLocked() + 1);
  liveItems_.addLocked(item);
  {
    std::lock_guard guarded(item.guard);
    item.pool = this;
  }
  try {
    armLocked(item, deadline, now, work);
  } catch (...) {
    removeItemLocked(item, work.release);
    throw;
  }
}

void PoolImpl::removeItemLocked(ScheduledItem& item, SmallList<ScheduledItem*, 2>& released) noexcept {
  (void)liveItems_.removeLocked(item);
  {
    std::lock_guard guarded(item.guard);
    item.pool = nullptr;  // later pins find nothing
  }
  released.push_back(&item);  // the list's reference
}

void PoolImpl::armLocked(ScheduledItem& item, Clock::time_point deadline, Clock::time_point now, TimerWork& work) {
  if (item.isPeriodic()) static_cast<PeriodicState&>(item).setNextRun(deadline);
  if (deadline <= now) {
    item.deadline = deadline;  // (its due time: the queue wait of a run counts from it)
    fireLocked(item, work);    // due already: no timer
    return;
  }
  liveItems_.armLocked(item, timers_.schedule(deadline, &PoolImpl::onTimer, &item), deadline);
}

void PoolImpl::fireLocked(ScheduledItem& item, TimerWork& work) {
  if (!item.isPeriodic()) {
    auto& oneShot = static_cast<OneShotTimer&>(item);
    Ref<TaskCore> task = std::move(oneShot.task);
    removeItemLocked(item, work.release);
    if (life_.stateLocked() == PoolState::stop || life_.stateLocked() == PoolState::terminated) {
      work.cancel.push_back(std::move(task));  // shutdownNow() raced with the firing
    } else if (task->isDone()) {
      work.drop.push_back(std::move(task));  // cancelled while its timer was firing: never admitted
    } else {
      countersHere().tasks.fetch_add(1, std::memory_order_relaxed);  // admitted now, once
      if (recordLatency_) poolState(*task).stampAdmission(item.deadline.time_since_epoch().count());  // waits from its due time
      pushDueLocked(task.detach(), work.errors);
    }
    return;
  }
  auto& state = static_cast<PeriodicState&>(item);
  const auto endWith = [&](std::exception_ptr error) {
    state.addRef();
    work.end.emplace_back(Ref<PeriodicState>::adopt(&state), std::move(error));
    removeItemLocked(item, work.release);
  };
  if (std::exception_ptr how; periodicMustEndLocked(state, how)) {
    endWith(std::move(how));
  } else {
    try {
      // The run's reference, held before the allocation: if `new` throws,
      // it goes with `held` (the schedule's own reference keeps the state).
      state.addRef();
      Ref<PeriodicState> held = Ref<PeriodicState>::adopt(&state);
      auto* run = new PeriodicRun(std::move(held), *this);
      if (!state.counted) {
        state.counted = true;
        countersHere().tasks.fetch_add(1, std::memory_order_relaxed);  // the schedule counts once
      }
      state.setNextRun(Clock::time_point::min());
      if (recordLatency_) poolState(*run).stampAdmission(item.deadline.time_since_epoch().count());  // waits from its due time
      pushDueLocked(run, work.errors);
    } catch (...) {
      endWith(std::current_exception());  // no memory for the run
    }
  }
}

bool PoolImpl::periodicMustEndLocked(const PeriodicState& state, std::exception_ptr& how) const {
  if (state.cancelRequested.load(std::memory_order_acquire)) {
    how = nullptr;  // cancel(): a normal end
    return true;
  }
  if (life_.stateLocked() == PoolState::stop || life_.stateLocked() == PoolState::terminated) {
    how = cancelledByPool(*this, "shutdownNow()");
    return true;
  }
  if (life_.stateLocked() == PoolState::shutdown && !continuePeriodicAfterShutdown_) {
    how = cancelledByPool(*this, "shutdown()");
    return true;
  }
  return false;
}

void PoolImpl::pushDueLocked(TaskCore* task, FactoryErrors& errors) {
  engine_.due.push(task);  // room reserved by addItemLocked
  // Below corePoolSize a new thread runs it, as admission's step 1 would:
  // a pool that only runs timers still grows to its core size, so one long
  // run does not hold up every other timer.
  if (sizes_.belowCoreLocked(engine_.workers.size())) {
    PendingTask none;
    if (addWorkerLocked(none, errors)) return;
  }
  if (engine_.parking.anySearching()) return;                        // a searching worker takes it
  if (engine_.parking.wakeOneLocked() || !engine_.workers.empty()) return;  // else a busy worker takes it next
  // Core 0, or every thread timed out: one must run it (and if the factory
  // fails, nothing else may ever start one: it is tried again soon).
  startThreadForWaitingWorkLocked(errors);
}

// The timer callbacks need no pin to reach the pool: they run on its timer
// service (its thread, or ManualClock::advance()), which the pool destroys
// first (timers_ is its last member), and ~TimerService waits for a callback
// in progress. They take one (under mutex_) only when work remains to do
// after unlocking, so that the pool does not terminate before it is done.

void PoolImpl::onTimer(void* context) noexcept {
  auto& item = *static_cast<ScheduledItem*>(context);
  PoolImpl* pool;
  {
    std::lock_guard guarded(item.guard);
    pool = item.pool;  // live: an armed item leaves the list only through whoever disarms it, us now
  }
  TimerWork work;
  std::unique_lock lock(pool->mutex_);
  pool->liveItems_.firedLocked(item);
  pool->fireLocked(item, work);
  pool->finishFiringLocked(lock, work);
}

void PoolImpl::fireBatch(void* owner, TimerService::Firing* batch, std::size_t count) noexcept {
  auto* pool = static_cast<PoolImpl*>(owner);
  std::size_t others = 0;  // callbacks that are not timer items (sleeps, alarms): run after the lock
  {
    TimerWork work;
    std::unique_lock lock(pool->mutex_);
    for (std::size_t i = 0; i < count; ++i) {
      if (batch[i].callback != &PoolImpl::onTimer) {
        batch[others++] = batch[i];
        continue;
      }
      auto& item = *static_cast<ScheduledItem*>(batch[i].context);
      pool->liveItems_.firedLocked(item);
      pool->fireLocked(item, work);
    }
    pool->finishFiringLocked(lock, work);
  }
  for (std::size_t i = 0; i < others; ++i)
    batch[i].callback(batch[i].context);
}

void PoolImpl::finishFiringLocked(std::unique_lock<std::mutex>& lock, TimerWork& work) noexcept {
  if (work.onlyReleases()) {
    // The common case (the work went to engine_.due): the items' other owners (a
    // task's cancelListener, a run) keep them, or nothing is left in them.
    work.release.forEach([](ScheduledItem* released) { released->releaseItem(); });
    work.release.clear();
    return;
  }
  life_.pin();
  lock.unlock();
  work.run(*this);
  lock.lock();
  unpinLocked(lock);
}

void PoolImpl::unpinLocked(std::unique_lock<std::mutex>& lock) noexcept {
  life_.unpinLocked();
  tryTerminateLocked(lock);
  // The caller releases the lock last: close() frees the pool only after it
  // has taken the lock and seen TERMINATED.
}

void PoolImpl::stopTimersLocked(bool now, TimerWork& work, std::vector<PendingTask>* drained) {
  const bool cancelOneShots = now || !runDelayedAfterShutdown_;
  const bool endPeriodic = now || !continuePeriodicAfterShutdown_;
  const char* how = now ? "shutdownNow()" : "shutdown()";
  for (ScheduledItem* item = liveItems_.firstLocked(); item != nullptr;) {
    ScheduledItem* const next = item->next;
    const bool periodic = item->isPeriodic();
    if (periodic ? endPeriodic : cancelOneShots) {
      if (liveItems_.disarmLocked(*item, timers_)) {
        if (periodic) {
          auto* state = static_cast<PeriodicState*>(item);
          state->addRef();
          work.end.emplace_back(Ref<PeriodicState>::adopt(state), cancelledByPool(*this, how));
        } else {
          work.cancel.push_back(std::move(static_cast<OneShotTimer*>(item)->task));
        }
        removeItemLocked(*item, work.release);
      } else if (periodic && now) {
        // A run is queued (drained below) or running (its token is
        // cancelled: it ends the schedule when it returns), or the timer is
        // firing (onTimer sees STOP).
        auto* state = static_cast<PeriodicState*>(item);
        state->addRef();
        work.tokens.push_back(Ref<PeriodicState>::adopt(state));
      }
    }
    item = next;
  }
  if (drained == nullptr) return;
  // shutdownNow(): the due one-shot tasks are ready tasks that never started,
  // appended to `drained` (the queue's); queued periodic runs end their
  // schedules.
  std::vector<TaskCore*> due;
  engine_.due.drainInto(due);
  for (TaskCore* raw : due) {
    Ref<TaskCore> task = Ref<TaskCore>::adopt(raw);
    if (poolState(*task).countsInStats()) {
      // Counted by shutdownNow(), with the queue's.
      drained->push_back(PendingTaskAccess::make(std::move(task)));
    } else {
      PeriodicState& state = static_cast<PeriodicRun&>(*task).state();
      state.addRef();
      work.end.emplace_back(Ref<PeriodicState>::adopt(&state), cancelledByPool(*this, how));
      removeItemLocked(state, work.release);  // live while its run is queued
      work.drop.push_back(std::move(task));
    }
  }
  engine_.publishSharedWorkLocked();
}

void PoolImpl::periodicRunEnded(PeriodicState& state, const std::exception_ptr& error) noexcept {
  TimerWork work;
  {
    std::unique_lock lock(mutex_);
    const auto endWith = [&](std::exception_ptr how) {
      state.addRef();
      work.end.emplace_back(Ref<PeriodicState>::adopt(&state), std::move(how));
      removeItemLocked(state, work.release);
    };
    const bool cancelled = state.cancelRequested.load(std::memory_order_acquire);
    if (error && isOperationCancelled(error)) {
      endWith(cancelled ? nullptr : error);
    } else if (error && !state.options.continueOnError) {
      endWith(error);
    } else if (std::exception_ptr how; periodicMustEndLocked(state, how)) {
      endWith(std::move(how));
    } else {
      try {
        const Clock::time_point now = clock_.now();
        armLocked(state, state.nextDeadline(now), now, work);
      } catch (...) {
        endWith(std::current_exception());  // the timer could not be armed
      }
    }
  }
  work.run(*this);
}

void PoolImpl::periodicRunNotStarted(PeriodicState& state, const std::exception_ptr& error) noexcept {
  // As a run that threw (the error already reached the handler).
  periodicRunEnded(state, error);
}

void PoolImpl::onKeepAliveAlarm(void* context) noexcept {
  auto* pool = static_cast<PoolImpl*>(context);
  std::lock_guard lock(pool->mutex_);
  pool->engine_.parking.wakeAllLocked();  // each idle worker reads the clock again
}

}  // namespace detail

Clock& ThreadPoolExecutor::clock() const noexcept { return impl_->clock_; }

void ThreadPoolExecutor::throwNotPositive(const char* operation, const char* what, double seconds) {
  throw std::invalid_argument(
      fmt::format("coexec::ThreadPoolExecutor::{}: {} must be positive, got {} s", operation, what, seconds));
}

Clock::time_point ThreadPoolExecutor::scheduleTask(PendingTask& task, Clock::time_point deadline,
                                                   Clock::time_point now) {
  detail::PoolImpl& p = *impl_;
  detail::Ref<detail::TaskCore>& core = detail::PendingTaskAccess::core(task);
  core->owner = &p;
  auto item = detail::Ref<detail::OneShotTimer>::adopt(new detail::OneShotTimer(core));
  core->cancelListener = item.copyAs<detail::QueuedCancelListener>();
  detail::TimerWork work;
  {
    std::unique_lock lock(p.mutex_);
    try {
      p.addItemLocked(*item, deadline, now, work);
    } catch (...) {
      item->task = detail::Ref<detail::TaskCore>();
      lock.unlock();
      work.run(p);
      core->cancelListener = detail::Ref<detail::QueuedCancelListener>();
      task = PendingTask();  // settles its Future (BrokenPromise) for whoever kept one
      throw;
    }
  }
  core = detail::Ref<detail::TaskCore>();  // the pool holds it now
  work.run(p);
  return deadline;
}

PeriodicHandle ThreadPoolExecutor::schedulePeriodic(detail::Ref<detail::PeriodicBody> body, Clock::time_point first,
                                                    Clock::time_point now, Clock::duration interval, bool fixedRate,
                                                    PeriodicOptions options) {
  detail::PoolImpl& p = *impl_;
  auto state = detail::Ref<detail::PeriodicState>::adopt(
      new detail::PeriodicState(std::move(body), p.clock_, first, interval, fixedRate, options, &p));
  Future<void> done(state->completion());
  detail::TimerWork work;
  {
    std::unique_lock lock(p.mutex_);
    try {
      p.addItemLocked(*state, first, now, work);
    } catch (...) {
      lock.unlock();
      work.run(p);
      throw;
    }
  }
  work.run(p);
  return PeriodicHandle(state.copyAs<detail::PeriodicControl>(), std::move(done));
}

}  // namespace coexec
