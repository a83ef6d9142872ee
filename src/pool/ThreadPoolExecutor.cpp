// SPDX-License-Identifier: BSL-1.0
// The public face of ThreadPoolExecutor: construction and validation of the
// options, the default thread factory, the configuration getters and
// stats(). The behaviour lives in the files beside it:
//   PoolAdmission.cpp      admission (the Java routing, the local push), a
//                          place given back, the rejection policies' hooks
//                          into the pool, purge()
//   PoolTaskRun.cpp        a task's run: what the engine's loop and its
//                          join ask the pool to do with a task, counting its
//                          outcome, the end of a coroutine task
//   PoolWorker.cpp         a worker thread's start and end, when an idle
//                          worker exits and how it waits (the loop is
//                          src/engine/Engine.h's)
//   PoolLocalQueues.cpp    draining the local queues
//   PoolContinuations.cpp  coroutines resuming on the pool: post, yields,
//                          the in-flight hold, runs outside the workers
//   PoolLifecycle.cpp      RUNNING -> SHUTDOWN/STOP -> TERMINATED, resizing
//   PoolTermination.cpp    whenTerminated() awaiters
//   PoolTimers.cpp         schedule*() and the timers' hold on the pool
//   RoomWait.cpp           submitWhenRoom() producers
//   TemporaryThreads.cpp   newThreadRuns(): rejected tasks on their own thread
//   PoolLatency.cpp        recordLatency: timed runs, histograms
//   ThreadDump.cpp         dumpThreads()
// PoolImpl.h holds the state they share and says which lock guards what.

#include "coexec/ThreadPoolExecutor.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "coexec/detail/RunSegments.h"
#include "pool/PoolImpl.h"

namespace coexec {
namespace detail {
namespace {

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
  // Unset: as many threads as corePoolSize, and at least one. A value set is
  // checked as given.
  if (!options.maximumPoolSize) options.maximumPoolSize = std::max<std::size_t>(options.corePoolSize, 1);
  if (*options.maximumPoolSize == 0) {
    throw std::invalid_argument("coexec::ThreadPoolExecutor: maximumPoolSize must be at least 1, got 0");
  }
  if (options.corePoolSize > *options.maximumPoolSize) {
    throw std::invalid_argument(
        fmt::format("coexec::ThreadPoolExecutor: corePoolSize ({}) must not be greater than maximumPoolSize ({})",
                    options.corePoolSize, *options.maximumPoolSize));
  }
  if (options.keepAliveTime < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(
        fmt::format("coexec::ThreadPoolExecutor: keepAliveTime must be non-negative, got {}", options.keepAliveTime));
  }
  if (!options.threadFactory) options.threadFactory = defaultThreadFactory;
  return options;
}

/// The ring of a bounded or unbounded queue: room for bounded(n)'s n (so
/// that it never overflows) up to 4096 slots (64 KiB); beyond, the shared
/// queue's overflow takes the rest.
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

PoolImpl::PoolImpl(ThreadPoolExecutor& owner, ThreadPoolOptions options)
    : owner_(owner),
      name_(std::move(options.name)),
      queueSpec_(options.workQueue),
      policy_(std::move(options.rejectionPolicy)),
      factory_(std::move(options.threadFactory)),
      hooks_(std::move(options.hooks)),
      sink_(Ref<UncaughtSink>::adopt(
          new UncaughtSink(name_, std::move(options.uncaughtExceptionHandler), options.reportUnobservedFailures))),
      tallies_(options.recordLatency),
      engine_(*this, mutex_, options.workQueue, injectCapacity(options.workQueue),
              options.workQueue.kind() == WorkQueue::Kind::bounded ||
                  options.workQueue.kind() == WorkQueue::Kind::unbounded),
      room_(options.workQueue.kind() == WorkQueue::Kind::bounded, options.workQueue.capacity()),
      sizes_(coreMirror_, options.corePoolSize, *options.maximumPoolSize,  // maximumPoolSize: set by validated()
             options.keepAliveTime, options.allowCoreThreadTimeOut),
      clock_(options.clock != nullptr ? *options.clock : steadyClock()),
      manualClock_(dynamic_cast<ManualClock*>(&clock_)),
      runDelayedAfterShutdown_(options.runDelayedTasksAfterShutdown),
      continuePeriodicAfterShutdown_(options.continuePeriodicTasksAfterShutdown),
      recordLatency_(options.recordLatency),
      timers_(clock_) {
  if (recordLatency_) {
    enableRunSegments();  // resume() keeps the threads' claims from now on (RunSegments.h)
  }
  timers_.setBatchFirer(&PoolImpl::fireBatch, this);
}

PoolStats PoolImpl::statsLocked(bool withLatency) const {
  PoolStats s;
  if (withLatency && recordLatency_) {
    PoolLatency latency = latencyLocked();
    s.queueWait = LatencySummary::of(std::move(latency.queueWait));
    s.runTime = LatencySummary::of(std::move(latency.runTime));
  }
  // Outcomes before taskCount (acquire; Tallies.h): the snapshot never shows
  // more outcomes than tasks.
  s.completedTaskCount = tallies_.sum(&Counters::completed, engine_.workers, std::memory_order_acquire);
  s.failedCount = tallies_.sum(&Counters::failed, engine_.workers, std::memory_order_acquire);
  s.cancelledCount = tallies_.sum(&Counters::cancelled, engine_.workers, std::memory_order_acquire);
  s.taskCount = tallies_.sum(&Counters::tasks, engine_.workers, std::memory_order_acquire);
  s.name = name_;
  s.state = life_.stateLocked();
  s.corePoolSize = sizes_.coreLocked();
  s.maximumPoolSize = sizes_.maximumLocked();
  s.poolSize = engine_.workers.size();
  s.activeCount = tallies_.active(engine_.workers);
  s.largestPoolSize = sizes_.largestLocked();
  // Each queue's size at one instant (sizeAtOneInstant, not size(), which
  // may count a ring's pops and pushes from two moments and so report more
  // than the ring ever held). The queues are read one after another while
  // workers pop without the lock, so queueSize and each local queue are
  // exact at their own instants, not at one common instant (see PoolStats).
  s.queueSize = engine_.shared.sizeAtOneInstantLocked();
  s.localQueueSize = 0;
  for (const Worker& worker : engine_.workers)
    s.localQueueSize += worker.local.sizeAtOneInstant();
  s.queueCapacity = queueSpec_.capacity();
  s.rejectedCount = tallies_.rejectedLocked();
  s.waitedForRoomCount = room_.waitedForRoom;
  s.waitingProducers = room_.waitersLocked() + room_.blockedLocked();
  s.discardedCount = tallies_.discardedLocked();
  s.drainedCount = tallies_.drainedLocked();
  s.scheduledCount = liveItems_.armedLocked();
  s.temporaryThreadRuns = starts_.temporaryRunsLocked();
  return s;
}

void PoolImpl::reportFactoryErrorsSlow(const FactoryErrors& errors) {
  for (const std::exception_ptr& error : errors) {
    reportUncaught(error, TaskInfo{name_, "(thread factory)", false, 0});
  }
}

void PoolImpl::reportUncaught(const std::exception_ptr& error, const TaskInfo& info) noexcept {
  sink_->report(error, info);
}

}  // namespace detail

ThreadPoolExecutor::ThreadPoolExecutor(ThreadPoolOptions options)
    : impl_(new detail::PoolImpl(*this, detail::validated(std::move(options)))) {}

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
  delete impl_;
}

void ThreadPoolExecutor::throwEmptyCallable(const char* operation) {
  throw std::invalid_argument(fmt::format("coexec::{}{}: the task is empty (an empty std::function or a null pointer)",
                                          scopeOf(operation), operation));
}

std::size_t ThreadPoolExecutor::corePoolSize() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->sizes_.coreLocked();
}

std::size_t ThreadPoolExecutor::maximumPoolSize() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->sizes_.maximumLocked();
}

std::chrono::nanoseconds ThreadPoolExecutor::keepAliveTime() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->sizes_.keepAliveLocked();
}

bool ThreadPoolExecutor::allowsCoreThreadTimeOut() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->sizes_.coreTimesOutLocked();
}

std::string_view ThreadPoolExecutor::name() const noexcept { return impl_->name_; }

const WorkQueue& ThreadPoolExecutor::workQueue() const noexcept { return impl_->queueSpec_; }

const RejectionPolicy& ThreadPoolExecutor::rejectionPolicy() const noexcept { return impl_->policy_; }

PoolStats ThreadPoolExecutor::stats() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->statsLocked();
}

}  // namespace coexec
