#include "coexec/ThreadPoolExecutor.h"

// Scheduled tasks: schedule(), scheduleAtFixedRate(), scheduleWithFixedDelay(),
// on a ManualClock (deterministic: timers fire inside advance(), and the test
// decides how long each run lasts by advancing the clock while the run is
// held), plus a few on the steady clock with generous bounds.
//
// What a test may rely on after advance(d) returns: every timer due by then
// has been handed to the pool (its task is queued, or already running or
// done); runs then go on on pool threads, so the test waits for them
// (Future::get, Counter) before it looks.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "TestSupport.h"
#include "coexec/Clock.h"
#include "coexec/PeriodicHandle.h"
#include "coexec/ScheduledFuture.h"
#include "coexec/SyncWait.h"
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
using coexec::RejectedExecution;
using coexec::RejectionPolicy;
using coexec::ScheduledFuture;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::checkLedgerAddsUp;
using coexec::test::Counter;
using coexec::test::eventually;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::OpenOnExit;

namespace {

ThreadPoolOptions manualPool(ManualClock& clock, std::size_t threads = 2) {
  return ThreadPoolOptions{.name = "sched", .corePoolSize = threads, .maximumPoolSize = threads, .clock = &clock};
}

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

/// Waits until the schedule's next timer is armed (a run returned and the
/// pool re-armed it): the pool's scheduledCount reaches `n`.
bool armed(ThreadPoolExecutor& pool, std::size_t n = 1) {
  return eventually([&] { return pool.stats().scheduledCount == n; });
}

/// Resident set size of this process, in bytes (Linux).
std::size_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0;
  std::size_t resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

// ---- one-shot ---------------------------------------------------------------------

TEST_CASE("a scheduled task waits for its deadline on the pool's clock, then runs once and counts once",
          "[schedule][manual]") {
  ManualClock clock;
  ThreadPoolExecutor pool(manualPool(clock));
  std::atomic<int> runs{0};
  ScheduledFuture<int> f = pool.schedule([&] { return ++runs; }, 100ms);
  CHECK(f.delay() == 100ms);
  PoolStats s = pool.stats();
  CHECK(s.scheduledCount == 1);
  CHECK(s.taskCount == 0);  // not admitted until due
  CHECK(s.queueSize == 0);

  clock.advance(60ms);
  CHECK(f.delay() == 40ms);
  clock.advance(39ms);
  CHECK(pool.stats().scheduledCount == 1);  // 1 ms early: still waiting
  CHECK(pool.stats().taskCount == 0);
  CHECK_FALSE(f.isDone());

  clock.advance(1ms);  // due now: handed to the pool inside advance()
  CHECK(pool.stats().scheduledCount == 0);
  CHECK(pool.stats().taskCount == 1);
  CHECK(f.get() == 1);
  CHECK(f.delay() <= 0ms);
  clock.advance(1h);
  pool.close();
  CHECK(runs.load() == 1);
  s = pool.stats();
  CHECK(s.taskCount == 1);
  CHECK(s.completedTaskCount == 1);
  checkLedgerAddsUp(s);
}

TEST_CASE("a ScheduledFuture is a Future: it binds to Future&, and a coroutine awaits it", "[schedule][manual]") {
  ManualClock clock;
  ThreadPoolExecutor pool(manualPool(clock));
  ScheduledFuture<std::string> f = pool.schedule([] { return std::string("later"); }, 5ms);
  Future<std::string>& plain = f;
  CHECK_FALSE(plain.isDone());
  auto awaiter = [](ScheduledFuture<std::string>& named) -> Task<std::string> {
    std::string value = co_await named;
    co_return value + "!";
  };
  Future<std::string> awaited = pool.submit(awaiter(f));
  clock.advance(5ms);
  CHECK(awaited.get() == "later!");
}

TEST_CASE("advance() hands due tasks to the pool in deadline order, equal deadlines in schedule order",
          "[schedule][manual]") {
  ManualClock clock;
  ThreadPoolExecutor pool(manualPool(clock, 1));  // one thread: the pool runs them in the order handed over
  std::mutex mutex;
  std::vector<int> order;
  std::vector<ScheduledFuture<void>> futures;
  const auto record = [&](int label) {
    return [&, label] {
      std::lock_guard lock(mutex);
      order.push_back(label);
    };
  };
  futures.push_back(pool.schedule(record(30), 30ms));
  futures.push_back(pool.schedule(record(10), 10ms));
  futures.push_back(pool.schedule(record(20), 20ms));
  futures.push_back(pool.schedule(record(21), 20ms));
  clock.advance(1h);
  for (auto& f : futures)
    f.get();
  CHECK(order == std::vector<int>{10, 20, 21, 30});
}

TEST_CASE("a zero or negative delay makes the task due at once, without advancing the clock", "[schedule][manual]") {
  ManualClock clock;
  ThreadPoolExecutor pool(manualPool(clock));
  ScheduledFuture<int> zero = pool.schedule([] { return 1; }, 0ms);
  ScheduledFuture<int> negative = pool.schedule([] { return 2; }, -5s);
  CHECK(zero.get() == 1);
  CHECK(negative.get() == 2);
  CHECK(zero.delay() == 0ms);
  CHECK(pool.stats().scheduledCount == 0);
}

TEST_CASE("schedule takes what submit takes: a callable with a token, a coroutine, a Task", "[schedule][manual]") {
  ManualClock clock;
  ThreadPoolExecutor pool(manualPool(clock));
  auto withToken = pool.schedule([](CancellationToken token) { return token.canBeCancelled(); }, 1ms);
  auto coroutine = pool.schedule([]() -> Task<int> { co_return 7; }, 2ms);
  auto task = [](int x) -> Task<int> { co_return x * 2; };
  auto taskItself = pool.schedule(task(21), 3ms);
  clock.advance(3ms);
  CHECK(withToken.get());
  CHECK(coroutine.get() == 7);
  CHECK(taskItself.get() == 42);
}

TEST_CASE("cancelling a scheduled task before it is due removes its timer at once, it never runs or counts",
          "[schedule][manual][cancel]") {
  ManualClock clock;
  ThreadPoolExecutor pool(manualPool(clock));
  std::atomic<int> runs{0};
  ScheduledFuture<void> f = pool.schedule([&] { ++runs; }, 1h);
  REQUIRE(pool.stats().scheduledCount == 1);
  CHECK(f.cancel());
  CHECK(f.isCancelled());
  CHECK(pool.stats().scheduledCount == 0);
  CHECK_THROWS_AS(f.get(), OperationCancelled);
  clock.advance(2h);
  pool.close();
  CHECK(runs.load() == 0);
  const PoolStats s = pool.stats();
  CHECK(s.taskCount == 0);
  CHECK(s.cancelledCount == 0);
  checkLedgerAddsUp(s);
}

TEST_CASE("a cancel racing with the firing: the task runs or is cancelled, exactly one, and the books balance",
          "[schedule][manual][cancel][race]") {
  ManualClock clock;
  ThreadPoolExecutor pool(manualPool(clock));
  constexpr int kRounds = coexec::test::kSanitized ? 200 : 2000;
  int ran = 0;
  int cancelledUnrun = 0;
  for (int i = 0; i < kRounds; ++i) {
    std::atomic<bool> ranThis{false};
    ScheduledFuture<void> f = pool.schedule([&] { ranThis = true; }, 1ms);
    std::thread canceller([&] { (void)f.cancel(); });
    clock.advance(1ms);
    canceller.join();
    bool cancelled = false;
    try {
      f.get();
    } catch (const OperationCancelled&) {
      cancelled = true;  // before it ran, or while it ran (Future::cancel of a running task)
    }
    if (ranThis.load()) {
      ++ran;
    } else {
      REQUIRE(cancelled);  // neither ran nor settled: lost
      ++cancelledUnrun;
    }
  }
  pool.close();
  CHECK(ran + cancelledUnrun == kRounds);
  const PoolStats s = pool.stats();
  CHECK(s.scheduledCount == 0);
  checkLedgerAddsUp(s);
}

TEST_CASE("a due timer is admitted even on a saturated abort() pool, and waiting ones hold no queue place",
          "[schedule][manual][admission]") {
  ManualClock clock;
  Gate gate;
  ThreadPoolExecutor pool({.name = "full",
                           .corePoolSize = 1,
                           .maximumPoolSize = 1,
                           .workQueue = WorkQueue::bounded(1),
                           .rejectionPolicy = RejectionPolicy::abort(),
                           .clock = &clock});
  OpenOnExit opener(gate);
  Counter started;
  pool.execute([&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  // A hundred timers waiting: no place of bounded(1) taken, no queue size.
  std::vector<ScheduledFuture<int>> later;
  for (int i = 0; i < 100; ++i)
    later.push_back(pool.schedule([i] { return i; }, 1h));
  PoolStats s = pool.stats();
  CHECK(s.scheduledCount == 100);
  CHECK(s.queueSize == 0);
  pool.execute([] {});  // the one place is still free
  CHECK_THROWS_AS(pool.execute([] {}), RejectedExecution);  // now the pool is saturated
  REQUIRE(pool.stats().rejectedCount == 1);
  // Due while saturated: admitted anyway (abort() is not consulted).
  ScheduledFuture<int> due = pool.schedule([] { return 42; }, 10ms);
  clock.advance(10ms);
  s = pool.stats();
  CHECK(s.rejectedCount == 1);
  CHECK(s.taskCount == 3);  // the blocker, the queued task, the due timer
  gate.open();
  CHECK(due.get() == 42);
  for (auto& f : later)
    CHECK(f.cancel());
  pool.close();
  checkLedgerAddsUp(pool.stats());
}

TEST_CASE("timers grow a pool to its core size: a long run does not hold up the next due task",
          "[schedule][manual][admission]") {
  ManualClock clock;
  Gate gate;
  ThreadPoolExecutor pool(manualPool(clock, 2));
  OpenOnExit opener(gate);
  Counter started;
  ScheduledFuture<void> slow = pool.schedule(
      [&] {
        started.arrive();
        gate.wait();
      },
      1ms);
  ScheduledFuture<int> quick = pool.schedule([] { return 1; }, 1ms);
  clock.advance(1ms);  // both due: the second starts the second core thread
  REQUIRE(started.waitFor(1));
  CHECK(quick.get() == 1);  // while the first still runs
  CHECK(pool.stats().poolSize == 2);
  gate.open();
  slow.get();
}

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

// ---- shutdown ---------------------------------------------------------------------------

TEST_CASE("after shutdown, delayed one-shot tasks still run and periodic schedules end (Java's defaults)",
          "[schedule][periodic][manual][shutdown]") {
  ManualClock clock;
  ThreadPoolExecutor pool(manualPool(clock));
  std::atomic<int> oneShotRuns{0};
  std::atomic<int> periodicRuns{0};
  ScheduledFuture<void> oneShot = pool.schedule([&] { ++oneShotRuns; }, 50ms);
  PeriodicHandle periodic = pool.scheduleAtFixedRate([&] { ++periodicRuns; }, 10ms, 10ms);
  pool.shutdown();
  CHECK(periodic.isDone());
  CHECK_THROWS_AS(periodic.get(), OperationCancelled);
  CHECK(pool.stats().scheduledCount == 1);
  CHECK_FALSE(pool.awaitTermination(0ms));  // the delayed task keeps it
  CHECK_THROWS_AS(pool.schedule([] {}, 1ms), RejectedExecution);
  clock.advance(50ms);
  oneShot.get();
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(oneShotRuns.load() == 1);
  CHECK(periodicRuns.load() == 0);
  checkLedgerAddsUp(pool.stats());
}

TEST_CASE("runDelayedTasksAfterShutdown = false: shutdown cancels the delayed tasks and the pool terminates",
          "[schedule][manual][shutdown]") {
  ManualClock clock;
  ThreadPoolOptions options = manualPool(clock);
  options.runDelayedTasksAfterShutdown = false;
  ThreadPoolExecutor pool(options);
  std::atomic<int> runs{0};
  ScheduledFuture<void> f = pool.schedule([&] { ++runs; }, 1h);
  pool.shutdown();
  CHECK_THROWS_AS(f.get(), OperationCancelled);
  REQUIRE(pool.awaitTermination(kLong));
  clock.advance(2h);
  CHECK(runs.load() == 0);
  CHECK(pool.stats().scheduledCount == 0);
}

TEST_CASE("continuePeriodicTasksAfterShutdown = true: a schedule runs on after shutdown until cancelled",
          "[periodic][manual][shutdown]") {
  ManualClock clock;
  ThreadPoolOptions options = manualPool(clock);
  options.continuePeriodicTasksAfterShutdown = true;
  ThreadPoolExecutor pool(options);
  std::atomic<int> runs{0};
  PeriodicHandle handle = pool.scheduleWithFixedDelay([&] { ++runs; }, 1ms, 1ms);
  pool.shutdown();
  for (int i = 0; i < 3; ++i) {
    REQUIRE(armed(pool));
    clock.advance(1ms);
  }
  REQUIRE(armed(pool));
  CHECK(runs.load() == 3);
  CHECK_FALSE(pool.isTerminated());
  handle.cancel();
  handle.get();
  REQUIRE(pool.awaitTermination(kLong));
}

TEST_CASE("shutdownNow cancels every pending timer, returns none of them, and the pool terminates at once (LIF-05)",
          "[schedule][periodic][manual][shutdown]") {
  // Java's shutdownNow returns the 9 delayed tasks, neither done nor
  // cancelled; coexec returns only tasks that were ready to run, and settles
  // every delayed one with OperationCancelled.
  ManualClock clock;
  ThreadPoolExecutor pool(manualPool(clock, 1));
  std::vector<ScheduledFuture<void>> delayed;
  std::vector<PeriodicHandle> periodic;
  for (int i = 0; i < 3; ++i) {
    delayed.push_back(pool.schedule([] {}, 9s));
    periodic.push_back(pool.scheduleAtFixedRate([] {}, 9s, 9s));
    periodic.push_back(pool.scheduleWithFixedDelay([] {}, 9s, 9s));
  }
  CHECK(pool.stats().scheduledCount == 9);
  const std::vector<coexec::PendingTask> returned = pool.shutdownNow();
  CHECK(returned.empty());
  REQUIRE(pool.awaitTermination(kLong));
  for (auto& f : delayed) {
    CHECK(f.isCancelled());
    CHECK_THROWS_AS(f.get(), OperationCancelled);
  }
  for (auto& h : periodic)
    CHECK_THROWS_AS(h.get(), OperationCancelled);
  CHECK(pool.stats().scheduledCount == 0);
}

TEST_CASE("shutdownNow returns a due one-shot task that has not started, and ends a queued periodic run",
          "[schedule][periodic][manual][shutdown]") {
  ManualClock clock;
  Gate gate;
  ThreadPoolExecutor pool(manualPool(clock, 1));
  OpenOnExit opener(gate);
  Counter started;
  pool.execute([&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  std::atomic<int> runs{0};
  ScheduledFuture<int> due = pool.schedule([&] { return ++runs; }, 1ms);
  PeriodicHandle periodic = pool.scheduleAtFixedRate([&] { ++runs; }, 1ms, 1ms);
  clock.advance(1ms);  // both due, both queued behind the blocked thread
  std::vector<coexec::PendingTask> returned = pool.shutdownNow();
  REQUIRE(returned.size() == 1);
  CHECK_THROWS_AS(periodic.get(), OperationCancelled);
  gate.open();
  REQUIRE(pool.awaitTermination(kLong));
  returned.front().run();
  CHECK(due.get() == 1);
  const PoolStats s = pool.stats();
  CHECK(s.drainedCount == 1);
  CHECK(s.cancelledCount == 1);  // the periodic schedule, counted when first due
  checkLedgerAddsUp(s);
}

TEST_CASE("a pool with no core thread still runs a task delayed past shutdown, and terminates after it (LIF-13)",
          "[schedule][manual][shutdown]") {
  ManualClock clock;
  ThreadPoolExecutor pool({.name = "core0", .corePoolSize = 0, .maximumPoolSize = 1, .clock = &clock});
  std::atomic<bool> ran{false};
  ScheduledFuture<void> f = pool.schedule([&] { ran = true; }, 12ms);
  pool.shutdown();
  CHECK_FALSE(pool.awaitTermination(0ms));
  clock.advance(12ms);
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(ran.load());
  CHECK(pool.corePoolSize() == 0);
}

TEST_CASE("after shutdown or shutdownNow, every schedule form is refused and counted (REJ-12)",
          "[schedule][periodic][rejection]") {
  const bool now = GENERATE(false, true);
  std::atomic<int> handled{0};
  ThreadPoolExecutor pool({.name = "rej",
                           .rejectionPolicy = RejectionPolicy([&](coexec::PendingTask&, ThreadPoolExecutor&) { ++handled; })});
  pool.submit([] {}).get();
  if (now) {
    (void)pool.shutdownNow();
  } else {
    pool.shutdown();
  }
  pool.execute([] {});  // execute and submit go to the policy
  (void)pool.submit([] {});
  CHECK(handled.load() == 2);
  // A task due later cannot be run by the caller or dropped quietly: the
  // schedule forms throw, whatever the policy.
  CHECK_THROWS_AS(pool.schedule([] {}, 1ms), RejectedExecution);
  CHECK_THROWS_AS(pool.scheduleAtFixedRate([] {}, 1ms, 1ms), RejectedExecution);
  CHECK_THROWS_AS(pool.scheduleWithFixedDelay([] {}, 1ms, 1ms), RejectedExecution);
  REQUIRE(pool.awaitTermination(kLong));
  const PoolStats s = pool.stats();
  CHECK(s.rejectedCount == 5);
  CHECK(s.completedTaskCount == 1);
  CHECK(s.scheduledCount == 0);
}

// ---- keep-alive and memory ------------------------------------------------------------

TEST_CASE("keepAliveTime runs on the pool's clock: an idle extra thread exits when a ManualClock passes it",
          "[keepalive][manual]") {
  ManualClock clock;
  ThreadPoolExecutor pool(
      {.name = "ka", .corePoolSize = 0, .maximumPoolSize = 1, .keepAliveTime = 1s, .clock = &clock});
  pool.submit([] {}).get();
  REQUIRE(pool.stats().poolSize == 1);
  // Advance in small steps until the thread exits: it must take at least the
  // keep-alive time on the clock (the thread went idle after the task), and
  // it happens with no real second passing.
  const Clock::time_point idle = clock.now();
  REQUIRE(eventually([&] {
    clock.advance(50ms);
    return pool.stats().poolSize == 0;
  }));
  CHECK(clock.now() - idle >= 1s);
}

TEST_CASE("a million timers scheduled and cancelled leave memory flat", "[schedule][memory]") {
  ThreadPoolExecutor pool({.name = "mem"});
  const std::size_t n = coexec::test::kSanitized ? 50'000 : 1'000'000;
  std::size_t notCancelled = 0;
  const auto scheduleAndCancel = [&](std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      ScheduledFuture<void> f = pool.schedule([] {}, 1h);
      if (!f.cancel()) ++notCancelled;
    }
  };
  scheduleAndCancel(10'000);  // warm up the allocators
  const std::size_t before = residentBytes();
  scheduleAndCancel(n);
  const std::size_t after = residentBytes();
  CHECK(notCancelled == 0);
  const PoolStats s = pool.stats();
  CHECK(s.scheduledCount == 0);
  CHECK(s.taskCount == 0);
  // Kept until their deadline, a million timers would hold well over 100 MB.
  // ASan keeps freed memory in quarantine: there only the count is checked.
  if (!coexec::test::kSanitized) CHECK(after - std::min(after, before) < 16u * 1024 * 1024);
}

// ---- the steady clock --------------------------------------------------------------------

TEST_CASE("on the steady clock, a scheduled task runs no earlier than its delay", "[schedule][steady]") {
  ThreadPoolExecutor pool({.name = "steady"});
  const auto start = std::chrono::steady_clock::now();
  ScheduledFuture<std::chrono::steady_clock::time_point> f =
      pool.schedule([] { return std::chrono::steady_clock::now(); }, 20ms);
  CHECK(f.delay() <= 20ms);
  const auto ranAt = f.get(kLong);
  CHECK(ranAt - start >= 20ms);
}

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

TEST_CASE(
    "every schedule form refuses an empty callable or Task with invalid_argument naming it, and nothing is scheduled",
    "[schedule][periodic][bad-input]") {
  ThreadPoolExecutor pool({.name = "bad"});
  const std::function<int()> empty;
  const std::function<void()> emptyAction;
  const std::string callable = ": the task is empty (an empty std::function or a null pointer)";
  CHECK_THROWS_AS((void)pool.schedule(empty, 1ms), std::invalid_argument);
  CHECK_THROWS_WITH((void)pool.schedule(empty, 1ms), "coexec::ThreadPoolExecutor::schedule" + callable);
  CHECK_THROWS_WITH(pool.scheduleAtFixedRate(emptyAction, 1ms, 1ms),
                    "coexec::ThreadPoolExecutor::scheduleAtFixedRate" + callable);
  CHECK_THROWS_WITH(pool.scheduleWithFixedDelay(emptyAction, 1ms, 1ms),
                    "coexec::ThreadPoolExecutor::scheduleWithFixedDelay" + callable);
  CHECK_THROWS_AS((void)pool.schedule(Task<int>(), 1ms), std::invalid_argument);
  CHECK_THROWS_WITH((void)pool.schedule(Task<int>(), 1ms),
                    Catch::Contains("coexec::ThreadPoolExecutor::schedule: the Task is empty"));
  Task<int> started = []() -> Task<int> { co_return 1; }();
  (void)coexec::syncWait([&]() -> Task<int> { co_return co_await started; }());
  CHECK_THROWS_AS((void)pool.schedule(std::move(started), 1ms), std::logic_error);
  const PoolStats stats = pool.stats();
  CHECK(stats.scheduledCount == 0);
  CHECK(stats.taskCount == 0);
  CHECK(stats.rejectedCount == 0);
}

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

TEST_CASE("a due task whose thread the factory failed to start runs once a retry starts one, and the pool terminates",
          "[scheduled][factory][reliability]") {
  // Caught by the fault sweep (thread factory): with no worker (core 0), a
  // due timer's task waited for a thread that only a later submission would
  // have started, and the pool never terminated (close() hung).
  ManualClock clock;
  std::atomic<int> calls{0};
  std::atomic<int> reports{0};
  ThreadPoolOptions options;
  options.name = "retry";
  options.corePoolSize = 0;
  options.maximumPoolSize = 1;
  options.clock = &clock;
  options.threadFactory = [&calls](const std::string& /*name*/, std::function<void()> body) {
    if (++calls <= 2) throw std::runtime_error("no thread now");
    return std::thread(std::move(body));
  };
  options.uncaughtExceptionHandler = [&reports](const std::exception_ptr&, const coexec::TaskInfo&) { ++reports; };
  ThreadPoolExecutor pool(options);
  auto future = pool.schedule([] { return 7; }, 10ms);
  clock.advance(10ms);  // due: the factory fails (call 1); a retry in 1 ms
  CHECK(calls == 1);
  CHECK_FALSE(future.isDone());
  clock.advance(1ms);  // the retry fails too (call 2); the next in 2 ms
  CHECK(calls == 2);
  CHECK_FALSE(future.isDone());
  clock.advance(2ms);  // it starts the thread, which runs the task
  REQUIRE(future.waitFor(kLong));
  CHECK(future.get() == 7);
  CHECK(calls == 3);
  CHECK(reports == 2);  // each failure reached the handler once
  pool.shutdown();
  CHECK(pool.awaitTermination(kLong));
}
