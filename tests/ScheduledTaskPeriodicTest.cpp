// SPDX-License-Identifier: BSL-1.0
// Periodic schedules (scheduleAtFixedRate, scheduleWithFixedDelay) and their PeriodicHandle: the
// grid and the delay, errors, cancel, the steady clock, misuse, a run that cannot be allocated.
#include "coexec/ThreadPoolExecutor.h"

// On a ManualClock (deterministic: timers fire inside advance(), and the test
// decides how long each run lasts by advancing the clock while the run is
// held; what a test may rely on after advance() returns is in
// ScheduledTaskTestSupport.h), plus one on the steady clock.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "ScheduledTaskTestSupport.h"
#include "TestSupport.h"
#include "coexec/Clock.h"
#include "coexec/PeriodicHandle.h"
#include "coexec/Task.h"
#include "coexec/detail/FaultInjection.h"

using namespace std::chrono_literals;
using coexec::CancellationToken;
using coexec::Clock;
using coexec::Future;
using coexec::ManualClock;
using coexec::OperationCancelled;
using coexec::PeriodicHandle;
using coexec::PeriodicOptions;
using coexec::PoolStats;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::test::armed;
using coexec::test::checkLedgerAddsUp;
using coexec::test::Counter;
using coexec::test::eventually;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::manualPool;
using coexec::test::OpenOnExit;

namespace {

/// manualPool() whose uncaught-exception handler counts what it receives.
ThreadPoolOptions countingPool(ManualClock& clock, std::atomic<int>& handled) {
  ThreadPoolOptions options = manualPool(clock);
  options.uncaughtExceptionHandler = [&handled](std::exception_ptr, const coexec::TaskInfo&) { ++handled; };
  return options;
}

/// Times as offsets from the clock's start, in ms, for readable failures.
std::int64_t msSince(Clock::time_point start, Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t - start).count();
}

/// A periodic body the test steps through: each run records when it started
/// (on the pool's clock), announces itself and waits until the test lets it
/// return, so the test decides how long (on the clock) each run lasts.
class Stepper {
 public:
  explicit Stepper(ManualClock& clock) : clock_(clock), start_(clock.now()) {}

  void run() {
    std::size_t index;
    {
      std::lock_guard lock(mutex_);
      starts_.push_back(msSince(start_, clock_.now()));
      index = starts_.size();
    }
    started_.arrive();
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, kLong, [&] { return released_ >= index; })) throw std::runtime_error("never released");
  }
  /// Waits until run number `n` (from 1) has started.
  [[nodiscard]] bool waitStarted(std::size_t n) { return started_.waitFor(n); }
  /// Lets runs up to number `n` return.
  void release(std::size_t n) {
    std::lock_guard lock(mutex_);
    released_ = n;
    cv_.notify_all();
  }
  void releaseAll() { release(SIZE_MAX); }
  std::vector<std::int64_t> starts() const {
    std::lock_guard lock(mutex_);
    return starts_;
  }
  std::size_t startedCount() const { return started_.count(); }

 private:
  ManualClock& clock_;
  const Clock::time_point start_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::int64_t> starts_;
  std::size_t released_ = 0;
  Counter started_;
};

/// Releases every run of a Stepper when the test leaves (a failed REQUIRE
/// must not leave a run blocked in the pool's destructor).
struct ReleaseOnExit {
  Stepper& stepper;
  ~ReleaseOnExit() { stepper.releaseAll(); }
};

}  // namespace

// ---- periodic -------------------------------------------------------------------------

TEST_CASE("fixed rate keeps the grid when runs are short, fixed delay counts from each run's end",
          "[periodic][manual]") {
  ManualClock clock;
  Stepper stepper(clock);
  ThreadPoolExecutor pool(manualPool(clock));
  ReleaseOnExit releaser{stepper};
  const bool fixedRate = GENERATE(true, false);
  PeriodicHandle handle = fixedRate ? pool.scheduleAtFixedRate([&] { stepper.run(); }, 10ms, 10ms)
                                    : pool.scheduleWithFixedDelay([&] { stepper.run(); }, 10ms, 10ms);
  CHECK(handle.delay() == 10ms);
  for (std::size_t n = 1; n <= 4; ++n) {
    REQUIRE(armed(pool));
    clock.advance(handle.delay());  // to the next run
    REQUIRE(stepper.waitStarted(n));
    CHECK(handle.runCount() == n);
    clock.advance(3ms);  // the run lasts 3 ms on the clock
    stepper.release(n);
  }
  REQUIRE(armed(pool));
  CHECK(handle.cancel());
  handle.get();  // cancel(): completes normally
  const std::vector<std::int64_t> expected =
      fixedRate ? std::vector<std::int64_t>{10, 20, 30, 40} : std::vector<std::int64_t>{10, 23, 36, 49};
  CHECK(stepper.starts() == expected);
}

TEST_CASE("fixed-rate runs never overlap, and periods missed by a long run are skipped, not replayed",
          "[periodic][manual][catchup]") {
  ManualClock clock;
  Stepper stepper(clock);
  ThreadPoolExecutor pool(manualPool(clock, 4));  // threads to spare: overlap would be possible
  ReleaseOnExit releaser{stepper};
  PeriodicHandle handle = pool.scheduleAtFixedRate([&] { stepper.run(); }, 10ms, 10ms);
  clock.advance(10ms);
  REQUIRE(stepper.waitStarted(1));
  // The first run lasts 35 ms: grid points 20, 30 and 40 pass meanwhile.
  clock.advance(35ms);  // now 45
  CHECK(stepper.startedCount() == 1);  // no second run while the first runs
  CHECK(pool.stats().scheduledCount == 0);
  stepper.release(1);
  // Late: the next run starts at once (for grid point 40), only one.
  REQUIRE(stepper.waitStarted(2));
  stepper.release(2);
  REQUIRE(armed(pool));
  CHECK(handle.delay() == 5ms);  // back on the grid: 50
  clock.advance(4ms);
  CHECK(stepper.startedCount() == 2);  // no burst of missed runs
  clock.advance(1ms);
  REQUIRE(stepper.waitStarted(3));
  stepper.release(3);
  REQUIRE(armed(pool));
  handle.cancel();
  handle.get();
  CHECK(stepper.starts() == std::vector<std::int64_t>{10, 45, 50});
  CHECK(handle.runCount() == 3);
}

TEST_CASE("a periodic run that throws reaches the handler once and ends the schedule with its error",
          "[periodic][manual][error]") {
  ManualClock clock;
  std::atomic<int> handled{0};
  std::atomic<int> runs{0};
  ThreadPoolOptions options = countingPool(clock, handled);
  ThreadPoolExecutor pool(options);
  PeriodicHandle handle = pool.scheduleAtFixedRate(
      [&] {
        if (++runs == 2) throw std::runtime_error("second run fails");
      },
      1ms, 1ms);
  clock.advance(1ms);
  REQUIRE(armed(pool));
  clock.advance(1ms);
  REQUIRE(handle.waitFor(kLong));
  CHECK(handle.isDone());
  CHECK_THROWS_WITH(handle.get(), "second run fails");
  CHECK(handled.load() == 1);
  clock.advance(10ms);
  pool.close();
  CHECK(runs.load() == 2);
  const PoolStats s = pool.stats();
  CHECK(s.scheduledCount == 0);
  CHECK(s.taskCount == 1);  // the schedule, once
  CHECK(s.failedCount == 1);
  checkLedgerAddsUp(s);
}

TEST_CASE("with continueOnError the schedule goes on after a failure, reporting each failure once",
          "[periodic][manual][error]") {
  ManualClock clock;
  std::atomic<int> handled{0};
  std::atomic<int> runs{0};
  ThreadPoolOptions options = countingPool(clock, handled);
  ThreadPoolExecutor pool(options);
  PeriodicHandle handle = pool.scheduleWithFixedDelay(
      [&] {
        if (++runs % 2 == 0) throw std::runtime_error("even runs fail");
      },
      1ms, 1ms, PeriodicOptions{.continueOnError = true});
  for (int i = 0; i < 6; ++i) {
    REQUIRE(armed(pool));
    clock.advance(1ms);
  }
  REQUIRE(armed(pool));
  CHECK(runs.load() == 6);
  CHECK(handled.load() == 3);
  CHECK(handle.cancel());
  handle.get();
  pool.close();
  const PoolStats s = pool.stats();
  CHECK(s.taskCount == 1);
  CHECK(s.completedTaskCount == 1);  // ended by cancel()
  checkLedgerAddsUp(s);
}

TEST_CASE("a periodic run's error reaches afterExecute, a run that throws OperationCancelled ends the schedule as cancelled",
          "[periodic][manual][error]") {
  ManualClock clock;
  std::atomic<int> handled{0};
  std::atomic<int> afterWithError{0};
  ThreadPoolOptions options = countingPool(clock, handled);
  options.hooks.afterExecute = [&](const coexec::TaskInfo&, std::exception_ptr error) {
    if (error) ++afterWithError;
  };
  ThreadPoolExecutor pool(options);
  SECTION("an error") {
    PeriodicHandle handle = pool.scheduleAtFixedRate([] { throw std::runtime_error("boom"); }, 1ms, 1ms);
    clock.advance(1ms);
    CHECK_THROWS_WITH(handle.get(), "boom");
    pool.close();
    CHECK(handled.load() == 1);
    CHECK(afterWithError.load() == 1);
    CHECK(pool.stats().failedCount == 1);
  }
  SECTION("OperationCancelled from the run itself") {
    PeriodicHandle handle = pool.scheduleAtFixedRate([] { throw OperationCancelled(); }, 1ms, 1ms);
    clock.advance(1ms);
    CHECK_THROWS_AS(handle.get(), OperationCancelled);
    pool.close();
    CHECK(handled.load() == 0);  // not reported, as for any task
    const PoolStats s = pool.stats();
    CHECK(s.cancelledCount == 1);
    CHECK(s.failedCount == 0);
    checkLedgerAddsUp(s);
  }
}

TEST_CASE("a beforeExecute hook that throws on a periodic run ends the schedule with that error, reported once",
          "[periodic][manual][error]") {
  ManualClock clock;
  std::atomic<int> handled{0};
  std::atomic<int> runs{0};
  ThreadPoolOptions options = countingPool(clock, handled);
  options.hooks.beforeExecute = [](const coexec::TaskInfo&) { throw std::runtime_error("hook refused"); };
  ThreadPoolExecutor pool(options);
  PeriodicHandle handle = pool.scheduleWithFixedDelay([&] { ++runs; }, 1ms, 1ms);
  clock.advance(1ms);
  CHECK_THROWS_WITH(handle.get(), "hook refused");
  clock.advance(10ms);
  pool.close();
  CHECK(runs.load() == 0);
  CHECK(handle.runCount() == 0);
  CHECK(handled.load() == 1);
  CHECK(pool.stats().failedCount == 1);
}

TEST_CASE("cancel() of a periodic schedule: its timer goes at once, a run in progress finishes and sees its token",
          "[periodic][manual][cancel]") {
  ManualClock clock;
  ThreadPoolExecutor pool(manualPool(clock));
  SECTION("while its timer waits") {
    PeriodicHandle handle = pool.scheduleAtFixedRate([] {}, 1h, 1h);
    CHECK(pool.stats().scheduledCount == 1);
    CHECK(handle.cancel());
    CHECK_FALSE(handle.cancel());  // once
    CHECK(handle.isDone());
    CHECK(pool.stats().scheduledCount == 0);
    handle.get();
    CHECK(handle.runCount() == 0);
    pool.close();
    CHECK(pool.stats().taskCount == 0);  // never due: never counted
  }
  SECTION("while a run is in progress") {
    Counter started;
    Gate gate;
    OpenOnExit opener(gate);
    std::atomic<bool> sawCancel{false};
    PeriodicHandle handle = pool.scheduleAtFixedRate(
        [&](CancellationToken token) {
          started.arrive();
          gate.wait();
          sawCancel = token.isCancellationRequested();
        },
        1ms, 1ms);
    clock.advance(1ms);
    REQUIRE(started.waitFor(1));
    CHECK(handle.cancel());
    CHECK_FALSE(handle.isDone());  // the run is still going
    gate.open();
    handle.get();
    CHECK(sawCancel.load());
    clock.advance(1h);
    CHECK(handle.runCount() == 1);
    pool.close();
    CHECK(pool.stats().completedTaskCount == 1);
  }
}

TEST_CASE("a coroutine awaits a named PeriodicHandle until the schedule ends", "[periodic][manual]") {
  ManualClock clock;
  ThreadPoolExecutor pool(manualPool(clock));
  std::atomic<int> runs{0};
  PeriodicHandle handle = pool.scheduleAtFixedRate(
      [&] {
        if (++runs == 3) throw std::runtime_error("third run fails");
      },
      1ms, 1ms);
  auto watcher = [](PeriodicHandle& named) -> Task<std::string> {
    try {
      co_await named;
    } catch (const std::runtime_error& e) {
      co_return e.what();
    }
    co_return "ended normally";
  };
  Future<std::string> watched = pool.submit(watcher(handle));
  for (int i = 0; i < 3; ++i) {
    REQUIRE(armed(pool));
    clock.advance(1ms);
  }
  CHECK(watched.get() == "third run fails");
}

TEST_CASE("a period or delay that is not positive is refused, naming it", "[periodic]") {
  ThreadPoolExecutor pool({.name = "bad"});
  CHECK_THROWS_WITH(pool.scheduleAtFixedRate([] {}, 0ms, 0ms),
                    Catch::Contains("scheduleAtFixedRate") && Catch::Contains("period must be positive"));
  CHECK_THROWS_WITH(pool.scheduleWithFixedDelay([] {}, 0ms, -1ms),
                    Catch::Contains("scheduleWithFixedDelay") && Catch::Contains("delay must be positive"));
  std::function<void()> empty;
  CHECK_THROWS_AS(pool.scheduleAtFixedRate(empty, 0ms, 1ms), std::invalid_argument);
  CHECK_THROWS_AS(pool.scheduleAtFixedRate([] {}, 0ms, -1ms), std::invalid_argument);
  CHECK_THROWS_WITH(pool.scheduleAtFixedRate([] {}, 0ms, -1ms),
                    "coexec::ThreadPoolExecutor::scheduleAtFixedRate: period must be positive, got -0.001 s");
  CHECK(pool.stats().scheduledCount == 0);
}

// ---- the steady clock --------------------------------------------------------------------

TEST_CASE("on the steady clock, a fixed-rate schedule runs repeatedly until cancelled", "[periodic][steady]") {
  ThreadPoolExecutor pool({.name = "steady"});
  Counter runs;
  PeriodicHandle handle = pool.scheduleAtFixedRate([&] { runs.arrive(); }, 0ms, 2ms);
  REQUIRE(runs.waitFor(5));
  CHECK(handle.cancel());
  REQUIRE(handle.waitFor(kLong));
  handle.get();
  CHECK(handle.runCount() >= 5);
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("an empty or moved-from PeriodicHandle throws std::logic_error from every member but valid()",
          "[periodic][bad-input]") {
  PeriodicHandle empty;
  CHECK_FALSE(empty.valid());
  const std::string emptyHandle = "coexec::PeriodicHandle: this handle is empty (default-constructed or moved from)";
  CHECK_THROWS_AS(empty.cancel(), std::logic_error);
  CHECK_THROWS_WITH(empty.cancel(), emptyHandle);
  CHECK_THROWS_WITH((void)empty.runCount(), emptyHandle);
  CHECK_THROWS_WITH((void)empty.delay(), emptyHandle);
  // The end is a Future's: its message says so.
  const std::string emptyFuture = "coexec::Future: this Future is empty (default-constructed or moved from)";
  CHECK_THROWS_WITH((void)empty.isDone(), emptyFuture);
  CHECK_THROWS_WITH(empty.wait(), emptyFuture);
  CHECK_THROWS_WITH((void)empty.waitFor(1ms), emptyFuture);
  CHECK_THROWS_WITH(empty.get(), emptyFuture);

  ThreadPoolExecutor pool({.name = "moved"});
  PeriodicHandle original = pool.scheduleAtFixedRate([] {}, 1h, 1h);
  PeriodicHandle moved = std::move(original);
  CHECK_FALSE(original.valid());  // NOLINT(bugprone-use-after-move): the misuse under test
  CHECK_THROWS_WITH(original.cancel(), emptyHandle);
  CHECK(moved.cancel());
  moved.get();  // cancelled: returns
}

TEST_CASE("a PeriodicHandle's end is taken once: a second get throws std::logic_error", "[periodic][bad-input]") {
  ThreadPoolExecutor pool({.name = "twice"});
  PeriodicHandle handle = pool.scheduleAtFixedRate([] {}, 1h, 1h);
  CHECK(handle.cancel());
  CHECK_FALSE(handle.cancel());  // ended already: not an error
  handle.get();
  CHECK_THROWS_AS(handle.get(), std::logic_error);
  CHECK_THROWS_WITH(handle.get(), Catch::Contains("the result was already consumed"));
}

TEST_CASE(
    "PeriodicHandle::wait and get on a thread of the schedule's pool throw std::logic_error, while waitFor times out",
    "[periodic][deadlock][bad-input]") {
  ThreadPoolExecutor pool({.name = "selfwait", .corePoolSize = 1, .maximumPoolSize = 1});
  PeriodicHandle handle = pool.scheduleAtFixedRate([] {}, 1h, 1h);
  Future<std::string> seen = pool.submit([&handle] {
    std::string what;
    try {
      handle.wait();
    } catch (const std::logic_error& e) {
      what = e.what();
    }
    try {
      handle.get();
      what += " | get returned";
    } catch (const std::logic_error&) {
      what += " | get refused";
    }
    what += handle.waitFor(1ms) ? " | ended" : " | waitFor timed out";
    return what;
  });
  REQUIRE(seen.waitFor(kLong));
  const std::string what = seen.get();
  CHECK_THAT(what, Catch::StartsWith("coexec::Future::wait/get: called on a thread of pool 'selfwait' for an "
                                     "unfinished task of that same pool"));
  CHECK_THAT(what, Catch::EndsWith(" | get refused | waitFor timed out"));
  CHECK(handle.cancel());
  handle.get();  // from outside the pool: allowed, and the end was not taken by the refused calls
}

// ---- found by the fault sweep ----------------------------------------------------

TEST_CASE("a periodic schedule whose run cannot be allocated ends with std::bad_alloc and leaks no state",
          "[scheduled][periodic][reliability]") {
  // Caught by the fault sweep (frame allocator): the reference taken for
  // the run was never released when its allocation threw, so the
  // schedule's state outlived everything.
  using coexec::detail::FaultInjection;
  if (!FaultInjection::available()) {
    WARN("this build has no fault points (COEXEC_FAULT_INJECTION=OFF): nothing to check");
    return;
  }
  ThreadPoolExecutor pool({.name = "alloc", .corePoolSize = 1, .maximumPoolSize = 1});
  std::size_t endedWithBadAlloc = 0;
  // Somewhere among the first allocations of a schedule that is due at once
  // is its first run's: each n in turn fails one of them.
  for (std::uint64_t n = 1; n <= 6; ++n) {
    INFO("the allocation that fails: " << n);
    const std::int64_t before = FaultInjection::liveFrameBlocks();
    {
      FaultInjection::failFrameAllocation(n);
      PeriodicHandle handle;
      try {
        handle = pool.scheduleAtFixedRate([] {}, 0ms, 1h);
      } catch (const std::bad_alloc&) {
        // the schedule itself could not be made: nothing to wait for
      }
      FaultInjection::failFrameAllocation(0);
      if (handle.valid()) {
        (void)handle.cancel();  // a schedule that got its run waits an hour for the next
        REQUIRE(handle.waitFor(kLong));
        try {
          handle.get();
        } catch (const std::bad_alloc&) {
          ++endedWithBadAlloc;
        } catch (const OperationCancelled&) {
        }
      }
    }
    // The worker drops its references to the last run just after the
    // handle settles: wait for that, a bounded time.
    CHECK(eventually([&] { return FaultInjection::liveFrameBlocks() == before; }, 5000ms));
  }
  CHECK(endedWithBadAlloc > 0);  // the run's allocation was among those that failed
}
