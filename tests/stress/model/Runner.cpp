// SPDX-License-Identifier: BSL-1.0
#include "model/Runner.h"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "coexec/coexec.h"
#include "coexec/detail/FaultInjection.h"
#include "model/Run.h"
#include "model/Watchdog.h"

namespace coexec::stress {
namespace impl {

using namespace std::chrono_literals;

// ---- the run ------------------------------------------------------------

ThreadPoolOptions Run::options() {
  const PoolConfig& c = program_.config;
  ThreadPoolOptions o;
  o.name = "stress";
  o.corePoolSize = c.core;
  o.maximumPoolSize = c.max;
  o.keepAliveTime = std::chrono::microseconds(c.keepAliveMicros);
  o.allowCoreThreadTimeOut = c.coreTimeout;
  switch (c.queue) {
    case QueueKind::bounded: o.workQueue = WorkQueue::bounded(c.capacity); break;
    case QueueKind::unbounded: o.workQueue = WorkQueue::unbounded(); break;
    case QueueKind::synchronous: o.workQueue = WorkQueue::synchronous(); break;
    case QueueKind::priority: o.workQueue = WorkQueue::priority(c.capacity); break;
  }
  PolicyKind policy = c.policy;
  if (program_.faults.site == FaultSite::rejectionHandler) policy = PolicyKind::custom;
  switch (policy) {
    case PolicyKind::abort: o.rejectionPolicy = RejectionPolicy::abort(); break;
    case PolicyKind::callerRuns: o.rejectionPolicy = RejectionPolicy::callerRuns(); break;
    case PolicyKind::discard: o.rejectionPolicy = RejectionPolicy::discard(); break;
    case PolicyKind::discardOldest: o.rejectionPolicy = RejectionPolicy::discardOldest(); break;
    case PolicyKind::block: o.rejectionPolicy = RejectionPolicy::block(std::chrono::microseconds(c.blockMicros)); break;
    case PolicyKind::newThreadRuns: o.rejectionPolicy = RejectionPolicy::newThreadRuns(c.temporaryThreads); break;
    case PolicyKind::custom:
      // Runs every other refused task on the caller, drops the others (their
      // Futures report BrokenPromise).
      o.rejectionPolicy = RejectionPolicy([this](PendingTask& task, ThreadPoolExecutor& pool) {
        if (fire(FaultSite::rejectionHandler)) throwFault();
        if (pool.isShutdown()) throw RejectedExecution("stress: refused after shutdown", pool.stats());
        if ((customCalls_.fetch_add(1) & 1U) == 0) runPending(task);
      });
      break;
  }
  if (c.hooks || program_.faults.site == FaultSite::beforeExecute || program_.faults.site == FaultSite::afterExecute) {
    o.hooks.beforeExecute = [this](const TaskInfo&) {
      HarnessCode harness;
      beforeCalls_.fetch_add(1, std::memory_order_relaxed);
      if (fire(FaultSite::beforeExecute)) throwFault();
    };
    o.hooks.afterExecute = [this](const TaskInfo&, const std::exception_ptr&) {
      HarnessCode harness;
      afterCalls_.fetch_add(1, std::memory_order_relaxed);
      if (fire(FaultSite::afterExecute)) throwFault();
    };
  }
  if (c.hooks || program_.faults.site == FaultSite::threadFactory) {
    o.threadFactory = [this](const std::string& name, std::function<void()> body) {
      if (fire(FaultSite::threadFactory)) throwFault();
      return std::thread([name, body = std::move(body)] {
        pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
        body();
      });
    };
  }
  o.uncaughtExceptionHandler = [this](const std::exception_ptr& error, const TaskInfo& info) {
    HarnessCode harness;
    try {
      std::rethrow_exception(error);
    } catch (const StressError& e) {
      observe(e.id, info.unobserved ? "the uncaught handler (unobserved)" : "the uncaught handler");
    } catch (const PeriodicError& e) {
      records_[e.id].periodicReports.fetch_add(1);
    } catch (const FaultError&) {
      faultSeen("the uncaught handler");
    } catch (const std::bad_alloc&) {
      badAllocSeen("the uncaught handler");
    } catch (const std::exception& e) {
      violation(fmt::format("the uncaught handler got an unexpected exception: {}", e.what()));
    } catch (...) {
      violation("the uncaught handler got a non-std exception");
    }
    if (fire(FaultSite::uncaughtHandler)) throwFault();
  };
  o.runDelayedTasksAfterShutdown = c.runDelayedAfterShutdown;
  o.continuePeriodicTasksAfterShutdown = c.continuePeriodicAfterShutdown;
  return o;
}

/// Each call on the pool (or the KeyedExecutor) goes through call(): the
/// window of the globalNew fault site, which the harness's own bookkeeping
/// around it (records, tracking) stays out of.
void Run::runOp(std::size_t thread, const Op& op) {
  ThreadPoolExecutor& p = pool();
  const int priority = static_cast<int>(op.arg % 3);
  const bool aligned = op.body == Body::aligned;
  const auto call = [](auto&& f) -> decltype(auto) {
    const LibraryCall window;
    return f();
  };
  switch (op.kind) {
    case OpKind::submitCallable: {
      const std::uint32_t id = records_.add(Role::top);
      if (aligned) {
        trackWide(id, call([&] {
                    return p.submit(
                        [this, id, op, pad = padOf(id)](const CancellationToken& token) {
                          return alignedCallableBody(*this, id, op, token, pad);
                        },
                        priority);
                  }));
      } else {
        track(id, call([&] {
                return p.submit(
                    [this, id, op](const CancellationToken& token) { return callableBody(*this, id, op, token); },
                    priority);
              }));
      }
      break;
    }
    case OpKind::executeCallable: {
      const std::uint32_t id = records_.add(Role::top);
      call([&] {
        if (aligned) {
          p.execute([this, id, op, pad = padOf(id)](
                        const CancellationToken& token) { (void)alignedCallableBody(*this, id, op, token, pad); },
                    priority);
        } else {
          p.execute([this, id, op](const CancellationToken& token) { (void)callableBody(*this, id, op, token); },
                    priority);
        }
      });
      break;
    }
    case OpKind::submitCoroutine: {
      const std::uint32_t id = records_.add(Role::top);
      records_[id].allocationsBefore = detail::FaultInjection::frameAllocationCalls();
      if (aligned) {
        trackWide(id, call([&] { return p.submit(alignedCoroBody(this, id, op), priority); }));
      } else {
        track(id, call([&] { return p.submit(coroBody(this, id, op), priority); }));
      }
      break;
    }
    case OpKind::executeCoroutine: {
      const std::uint32_t id = records_.add(Role::top);
      call([&] { p.execute([this, id, op]() { return startFireAndForget(*this, id, op); }, priority); });
      break;
    }
    case OpKind::submitWithToken: {
      const std::uint32_t id = records_.add(Role::top);
      const std::uint32_t s = op.arg % 4;
      markSourceUsed(s, id);
      if (sourceCancelled(s)) records_[id].cancelRequested = true;
      const CancellationToken sourceToken = source(s).token();
      if ((op.arg & 4U) != 0) {
        track(id, call([&] { return p.submit(coroBody(this, id, op), sourceToken); }));
      } else {
        track(id, call([&] {
                return p.submit(
                    [this, id, op](const CancellationToken& token) { return callableBody(*this, id, op, token); },
                    sourceToken);
              }));
      }
      break;
    }
    case OpKind::cancelRecent: cancelRecent(op.arg); break;
    case OpKind::cancelSource: cancelSource(op.arg); break;
    case OpKind::resize: {
      const std::size_t size = op.arg % 5;
      try {
        call([&] {
          if (op.fanout % 2 == 0) {
            p.setMaximumPoolSize(std::max<std::size_t>(size, 1));
          } else {
            p.setCorePoolSize(size);
          }
        });
      } catch (const std::invalid_argument&) {
        // core > max or max < core: refused, and the pool unchanged.
      }
      break;
    }
    case OpKind::schedule: {
      const std::uint32_t id = records_.add(Role::top);
      const auto delay = std::chrono::microseconds(op.micros);
      if (aligned) {
        trackWide(id, call([&] {
                    return p.schedule(
                        [this, id, op, pad = padOf(id)](const CancellationToken& token) {
                          return alignedCallableBody(*this, id, op, token, pad);
                        },
                        delay);
                  }));
      } else {
        track(id, call([&] {
                return p.schedule(
                    [this, id, op](const CancellationToken& token) { return callableBody(*this, id, op, token); },
                    delay);
              }));
      }
      break;
    }
    case OpKind::scheduleAtFixedRate:
    case OpKind::scheduleWithFixedDelay: {
      const std::uint32_t id = records_.add(Role::periodic);
      const bool failing = op.body == Body::throws;
      const bool continueOnError = (op.arg & 1U) != 0;
      auto body = [this, id, failing](const CancellationToken&) {
        HarnessCode harness;
        Record& r = records_[id];
        const std::uint32_t run = r.starts.fetch_add(1) + 1;
        if (failing && run % 3 == 0) {
          r.periodicThrows.fetch_add(1);
          throw PeriodicError(id);
        }
      };
      const auto first = std::chrono::microseconds(op.micros);
      const auto period = std::chrono::microseconds(300 + op.micros);
      PeriodicHandle handle = call([&] {
        return op.kind == OpKind::scheduleAtFixedRate
                   ? p.scheduleAtFixedRate(body, first, period, PeriodicOptions{continueOnError})
                   : p.scheduleWithFixedDelay(body, first, period, PeriodicOptions{continueOnError});
      });
      trackPeriodic(id, continueOnError, std::move(handle));
      break;
    }
    case OpKind::cancelPeriodic: cancelPeriodic(op.arg); break;
    case OpKind::invokeAll:
    case OpKind::invokeAny: {
      combinatorsUsed_ = true;
      const std::uint32_t id = records_.add(Role::driver);
      track(id, call([&] { return p.submit(invokeDriver(this, id, op, op.kind == OpKind::invokeAny)); }));
      break;
    }
    case OpKind::whenAll: {
      combinatorsUsed_ = true;
      const std::uint32_t id = records_.add(Role::driver);
      track(id, call([&] { return p.submit(whenAllDriver(this, id, op)); }));
      break;
    }
    case OpKind::taskGroup: {
      combinatorsUsed_ = true;
      const std::uint32_t id = records_.add(Role::driver);
      track(id, call([&] { return p.submit(groupDriver(this, id, op)); }));
      break;
    }
    case OpKind::keyed: {
      if (keyed_ == nullptr) break;
      const std::uint32_t id = records_.add(Role::keyed);
      const std::uint32_t key = static_cast<std::uint32_t>(thread) * 8 + op.arg % 8;
      const std::uint32_t seq = nextKeySeq(key);
      track(id, call([&] {
              return keyed_->submit(key, [this, id, op, key, seq](const CancellationToken& token) {
                keyedStart(key, seq);
                struct Leave {
                  Run& run;
                  std::uint32_t key;
                  ~Leave() { run.keyedEnd(key); }
                } leave{*this, key};
                return callableBody(*this, id, op, token);
              });
            }));
      break;
    }
    case OpKind::purge: call([&] { (void)p.purge(); }); break;
    case OpKind::prestart:
      call([&] {
        if ((op.arg & 1U) != 0) {
          (void)p.prestartAllCoreThreads();
        } else {
          (void)p.prestartCoreThread();
        }
      });
      break;
    case OpKind::awaitTermination:
      call([&] { (void)p.awaitTermination(std::chrono::microseconds(op.micros % 500)); });
      break;
    case OpKind::pause:
      if (op.micros >= 1000) {
        std::this_thread::sleep_for(std::chrono::microseconds(op.micros / 10));
      } else {
        std::this_thread::yield();
      }
      break;
    case OpKind::shutdown:
      noteShutdown();
      p.shutdown();
      break;
    case OpKind::shutdownNow:
      stopNow(2, "a drained task run by the producer");  // every other one run here, the rest dropped
      break;
  }
}

/// shutdownNow(), then runs every `every`-th returned task here and drops
/// the rest (their Futures report BrokenPromise): both are accounted for.
void Run::stopNow(std::size_t every, const char* where) {
  std::vector<PendingTask> returned = pool().shutdownNow();
  noteShutdownNow(returned.size());
  for (std::size_t i = 0; i < returned.size(); i += every) {
    try {
      runPending(returned[i]);
    } catch (...) {
      classify(std::current_exception(), where);
    }
  }
}

void Run::producer(std::size_t index) {
  tlsProducer = true;
  for (const Op& op : program_.threads[index]) {
    try {
      runOp(index, op);
    } catch (const std::length_error&) {
      throw;
    } catch (...) {
      classify(std::current_exception(), "a producer's call");
    }
  }
}

/// After the faults: the pool still runs new tasks (unless it was shut down).
void Run::probe() {
  if (anyShutdown()) return;
  const auto deadline = Clock::now() + 20s;
  for (int i = 0; i < 3; ++i) {
    while (true) {
      const std::uint32_t id = records_.add(Role::top);
      Future<int> f;
      try {
        f = pool().submit([this, id](const CancellationToken& token) {
          return callableBody(*this, id, Op{}, token);
        });
      } catch (...) {
        classify(std::current_exception(), "the probe's submit");
        if (Clock::now() > deadline) {
          violation("the pool refused every probe task for 20 s after the program");
          return;
        }
        std::this_thread::sleep_for(1ms);
        continue;
      }
      if (!f.waitFor(20s)) {
        violation("a probe task did not finish within 20 s: the pool no longer runs tasks");
        track(id, std::move(f));
        return;
      }
      track(id, std::move(f));
      break;
    }
  }
}

void Run::ending() {
  if (keyed_ != nullptr) keyed_.reset();  // blocks until every keyed task settled
  if (program_.config.continuePeriodicAfterShutdown || program_.ending == Ending::close) {
    std::lock_guard lock(mutex_);
    for (auto& p : periodic_) {
      p->cancelledByUs = true;
      (void)p->handle.cancel();
    }
  }
  switch (program_.ending) {
    case Ending::shutdown:
      noteShutdown();
      pool().shutdown();
      break;
    case Ending::shutdownNow:
      stopNow(3, "a drained task run at the end");
      break;
    case Ending::close:
      noteShutdown();
      pool().close();
      break;
  }
  if (!pool().awaitTermination(60s)) {
    violation(fmt::format("the pool did not terminate within 60 s: {}", pool().stats()));
  }
}

void Run::execute() {
  const ProcessState before = processState();
  const std::uint64_t allocationsFailedBefore = detail::FaultInjection::frameAllocationsFailed();
  const std::uint64_t allocationCallsBefore = before.frameCalls;
  tlsProducer = true;
  pool_.emplace(options());
  if (program_.config.keyedLanes > 0) keyed_ = std::make_unique<KeyedExecutor>(*pool_, program_.config.keyedLanes);
  if (program_.faults.site == FaultSite::frameAllocator) {
    detail::FaultInjection::failFrameAllocation(program_.faults.nth);
  }
  if (program_.faults.site == FaultSite::globalNew) {
    globalNewCounters.calls = 0;
    globalNewCounters.failed = 0;
    globalNewCounters.nth = program_.faults.nth;
    globalNewCounters.counting = true;
  }
  {
    std::vector<std::thread> producers;
    producers.reserve(program_.threads.size());
    for (std::size_t i = 0; i < program_.threads.size(); ++i) producers.emplace_back([this, i] { producer(i); });
    for (auto& t : producers) t.join();
  }
  if (program_.faults.site == FaultSite::globalNew) {
    globalNewCounters.counting = false;  // the producers' calls, the only windows, are over
    globalNewCounters.nth = 0;
    report_.faultsFired = globalNewCounters.failed.load();
    report_.siteCalls = globalNewCounters.calls.load();
  }
  probe();
  ending();
  if (program_.faults.site == FaultSite::frameAllocator) {
    report_.faultsFired = detail::FaultInjection::frameAllocationsFailed() - allocationsFailedBefore;
    report_.siteCalls = detail::FaultInjection::frameAllocationCalls() - allocationCallsBefore;
    detail::FaultInjection::failFrameAllocation(0);
  }
  if (pool().isTerminated()) checkForeignHeld();
  check();
  tracked_.clear();
  trackedWide_.clear();
  periodic_.clear();
  pool_.reset();
  // Work outside any pool (a fire-and-forget coroutine run by
  // PendingTask::run() sleeps on the process's timer service) ends on its
  // own: wait for it, a bounded time (the check below reports it if not).
  const auto settleBy = Clock::now() + 10s;
  while (Clock::now() < settleBy && !allStartedEnded()) std::this_thread::sleep_for(1ms);
  checkRecords();
  if (program_.faults.site != FaultSite::frameAllocator && program_.faults.site != FaultSite::globalNew) {
    report_.faultsFired = faultsFired_.load();
    report_.siteCalls = siteCalls_.load();
  }
  checkFaultReports();
  if (options_.checkProcess) checkProcess(before);
}

namespace {

/// Starts what the process keeps for good once first used, so that the
/// thread count before a program is the one to come back to: the timer
/// service of sleeps outside any pool (a coroutine that callerRuns() ran on a
/// producer sleeps there), whose thread lives until the process exits.
void startProcessWideServices() {
  static std::once_flag once;
  std::call_once(once, [] {
    syncWait([]() -> Task<void> { co_await sleepFor(std::chrono::microseconds(1)); }());
  });
}

}  // namespace
}  // namespace impl

RunReport runProgram(const Program& program, const RunOptions& options) {
  RunReport report;
  impl::startProcessWideServices();
  // The watchdog's thread is started before the run counts threads.
  impl::Watchdog& watchdog = impl::Watchdog::instance();
  watchdog.arm(program, options.watchdogSeconds);
  struct Disarm {
    impl::Watchdog& watchdog;
    ~Disarm() { watchdog.disarm(); }
  } disarm{watchdog};
  {
    impl::Run run(program, options, report);
    run.execute();
  }
  return report;
}

}  // namespace coexec::stress
