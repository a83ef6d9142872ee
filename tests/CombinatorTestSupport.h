// SPDX-License-Identifier: BSL-1.0
#pragma once

// Helpers shared by the combinator tests: children that block until their
// token is cancelled (or a gate opens), counting what they saw, so that a
// test can order "started", "saw the cancellation" and "returned" without
// sleeps; and a pool on a ManualClock.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>

#include "CoroutineTestSupport.h"
#include "TestSupport.h"
#include "coexec/CancellationToken.h"
#include "coexec/Clock.h"
#include "coexec/Errors.h"
#include "coexec/Sleep.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

namespace coexec::test {

/// Blocks until `token` is cancelled. If kLong passes first, fails the test
/// (see detail::failTimedOutWait): a child that is never cancelled means the
/// combinator is broken.
inline void waitForCancellation(const CancellationToken& token) {
  std::mutex mutex;
  std::condition_variable cv;
  bool cancelled = false;
  CancellationRegistration registration(token, [&] {
    std::lock_guard lock(mutex);
    cancelled = true;
    cv.notify_all();
  });
  std::unique_lock lock(mutex);
  if (cv.wait_for(lock, kLong, [&] { return cancelled; })) return;
  lock.unlock();
  detail::failTimedOutWait("a child's token was not cancelled within kLong");
}

/// What a set of children did. Declare it before the pools (the children
/// refer to it) and release it (a guard, or the destructor) before they
/// are destroyed.
struct Children {
  Counter started;    ///< bodies that began
  Counter cancelled;  ///< bodies that saw their token cancelled
  Counter returned;   ///< bodies that ended (returned or threw)
  Gate release;       ///< what a cancelled child waits for before it returns

  /// A child that arrives at `started`, blocks until its token is cancelled,
  /// arrives at `cancelled`, waits for `release` and throws
  /// OperationCancelled: a cooperative child the test can hold after the
  /// cancellation reached it.
  auto cooperative() {
    return [this](CancellationToken token) -> int {
      started.arrive();
      waitForCancellation(token);
      cancelled.arrive();
      release.wait();
      returned.arrive();
      throw OperationCancelled();
    };
  }
  /// A child that ignores its token: arrives at `started`, waits for
  /// `release`, returns `value`.
  auto uncooperative(int value) {
    return [this, value] {
      started.arrive();
      release.wait();
      returned.arrive();
      return value;
    };
  }
};

/// Options for a pool named `name` (tagged, see taggedPool) on `clock`.
/// `name` must outlive the pool (a string literal).
inline ThreadPoolOptions manualClockPool(std::string_view name, ManualClock& clock, std::size_t threads = 2) {
  ThreadPoolOptions options = taggedPool(name, threads, threads, WorkQueue::bounded(256));
  options.clock = &clock;
  return options;
}

/// The message of the exception `error` holds.
inline std::string messageOf(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "?";
  }
}

/// A Task that arrives at `sleeping` and sleeps for an hour unless its token
/// is cancelled (then it sets `wokeCancelled` and rethrows): it sees a
/// combinator's token, like any sleep of a task that the combinator runs.
inline Task<int> sleepsAnHour(Counter& sleeping, std::atomic<bool>& wokeCancelled) {
  sleeping.arrive();
  try {
    co_await sleepFor(std::chrono::hours(1));
  } catch (const OperationCancelled&) {
    wokeCancelled = true;
    throw;
  }
  co_return 0;
}

/// The set-up of the whenAll / whenAny tests that need a child already
/// running: a `driver` pool (one thread) for the awaiting coroutine, a `pool`
/// of two threads for the children, and `slow`, a cooperative child (see
/// Children) that has started on `pool`, so a cancel reaches its token
/// (queued, it would never start). Also `sleeping` and `sleepCancelled` for
/// a sleepsAnHour child. `children.release` opens before the pools go.
struct RunningChildSetup {
  Children children;
  Counter sleeping;
  std::atomic<bool> sleepCancelled{false};
  ThreadPoolExecutor driver{taggedPool("driver", 1, 1, WorkQueue::bounded(8))};
  ThreadPoolExecutor pool{taggedPool("when", 2, 2, WorkQueue::bounded(64))};
  OpenOnExit guard{children.release};
  Future<int> slow;

  RunningChildSetup() : slow(pool.submit(children.cooperative())) {
    if (!children.started.waitFor(1)) detail::failTimedOutWait("the slow child did not start within kLong");
  }
};

}  // namespace coexec::test
