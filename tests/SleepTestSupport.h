// SPDX-License-Identifier: BSL-1.0
#pragma once

// Helpers of the sleep tests (SleepTest.cpp, SleepCancellationTest.cpp): the
// timer service a sleep waits in, a record of how sleepers woke, a guard that
// stops a pool whose sleepers would otherwise keep it alive, and a scheduler
// whose sleeps wait in a given timer service.

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "CoroutineTestSupport.h"
#include "coexec/CancellationToken.h"
#include "coexec/Clock.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/ThisThread.h"
#include "engine/TimerService.h"

using coexec::CancellationToken;
using coexec::Future;
using coexec::ManualClock;
using coexec::OperationCancelled;
using coexec::sleepFor;
using coexec::sleepUntil;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::detail::TimerService;
using coexec::test::Counter;
using coexec::test::currentTag;
using coexec::test::eventually;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::taggedPool;
using coexec::test::throwsA;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

namespace {

/// The timer service a sleep on the calling thread waits in, chosen as
/// SleepAwaiter chooses it: the current scheduler's, or the process-wide one.
TimerService& sleepServiceHere() {
  coexec::detail::Scheduler* scheduler = coexec::detail::currentScheduler();
  TimerService* service = scheduler != nullptr ? scheduler->timerService() : nullptr;
  return service != nullptr ? *service : coexec::detail::steadyTimerService();
}

/// The timer service the sleeps of coroutines on `pool` wait in.
TimerService& sleepServiceOf(ThreadPoolExecutor& pool) {
  Future<TimerService*> service = pool.submit([] { return &sleepServiceHere(); });
  REQUIRE(service.waitFor(kLong));
  return *service.get();
}

/// What a sleeping coroutine saw, and where: filled in on the pool thread,
/// read by the test once the coroutine has finished (its Future settled).
struct Wake {
  std::atomic<int> normally{0};
  std::atomic<int> cancelled{0};
  std::atomic<bool> offPool{false};
  void record(bool byCancellation, std::string_view pool) {
    (byCancellation ? cancelled : normally).fetch_add(1);
    if (currentTag != pool) offPool = true;
  }
};

/// Sleeps for `d` after arriving at `sleeping`; records how it woke in
/// `wake` (the tag is the pool it must wake on) and rethrows a cancellation.
template <class Duration>
Task<void> recordedSleep(Duration d, Counter& sleeping, Wake& wake, std::string_view pool) {
  sleeping.arrive();
  try {
    co_await sleepFor(d);
  } catch (const OperationCancelled&) {
    wake.record(true, pool);
    throw;
  }
  wake.record(false, pool);
}

/// Declared right after the pool: when the test leaves its scope (a failed
/// REQUIRE included) it stops the pool, which cancels its sleepers, so that
/// the pool's destructor does not wait for a coroutine asleep for an hour.
/// A no-op for a pool already terminated.
class StopOnExit {
 public:
  explicit StopOnExit(ThreadPoolExecutor& pool) : pool_(pool) {}
  StopOnExit(const StopOnExit&) = delete;
  StopOnExit& operator=(const StopOnExit&) = delete;
  ~StopOnExit() { (void)pool_.shutdownNow(); }

 private:
  ThreadPoolExecutor& pool_;
};

/// A scheduler whose sleeps wait in `service` (say, on a ManualClock), made
/// current on the calling thread for as long as it lives.
class ScopedScheduler final : public coexec::detail::Scheduler {
 public:
  explicit ScopedScheduler(TimerService& service)
      : service_(service), previous_(coexec::detail::exchangeCurrentScheduler(this)) {}
  ScopedScheduler(const ScopedScheduler&) = delete;
  ScopedScheduler& operator=(const ScopedScheduler&) = delete;
  ~ScopedScheduler() { coexec::detail::exchangeCurrentScheduler(previous_); }

  void post(std::coroutine_handle<> handle) noexcept override {
    posted.fetch_add(1);
    coexec::detail::resume(handle);
  }
  TimerService* timerService() noexcept override { return &service_; }

  std::atomic<int> posted{0};

 private:
  TimerService& service_;
  Scheduler* previous_;
};

}  // namespace
