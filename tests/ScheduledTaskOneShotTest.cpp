// SPDX-License-Identifier: BSL-1.0
// One-shot scheduled tasks (schedule()): the deadline on the pool's clock, cancel, admission, the
// steady clock, bad input; keep-alive on the pool's clock, the memory of cancelled timers.
#include "coexec/ThreadPoolExecutor.h"

// On a ManualClock (deterministic: timers fire inside advance(); what a test
// may rely on after advance() returns is in ScheduledTaskTestSupport.h), plus
// one on the steady clock with a generous bound. Periodic schedules are in
// ScheduledTaskPeriodicTest.cpp, scheduled tasks and shutdown in
// ScheduledTaskShutdownTest.cpp.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <fstream>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "ScheduledTaskTestSupport.h"
#include "TestSupport.h"
#include "coexec/Clock.h"
#include "coexec/ScheduledFuture.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"

using namespace std::chrono_literals;
using coexec::CancellationToken;
using coexec::Clock;
using coexec::Future;
using coexec::ManualClock;
using coexec::OperationCancelled;
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
using coexec::test::manualPool;
using coexec::test::OpenOnExit;

namespace {

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

TEST_CASE("a pool whose burst of timers is gone gives the burst's memory back", "[schedule][memory]") {
  // All scheduled first, then all cancelled, then their Futures dropped (W6
  // bulk of make bench): the tasks, their timers and the timer tables of a
  // burst go back to the allocator, and the allocator gives the memory back
  // to the system once the burst is over. Without it the process kept 430 MB
  // of a million timers' 477 MB peak.
  if (coexec::test::kSanitized) {
    WARN("the sanitizers' allocators keep freed memory in quarantine: nothing to check here");
    return;
  }
  ThreadPoolExecutor pool({.name = "burst"});
  constexpr std::size_t kTimers = 300'000;
  {
    // A first, smaller burst, as a program that has run for a while has had:
    // freeing its large blocks raises the C library's threshold for giving
    // memory to mmap(), so that the next burst's large blocks (the vector of
    // Futures below) come from the heap, above the burst, and keep its top
    // from being given back on its own.
    std::vector<ScheduledFuture<void>> first;
    first.reserve(kTimers / 3);
    for (std::size_t i = 0; i < kTimers / 3; ++i)
      first.push_back(pool.schedule([] {}, 1h));
    for (auto& f : first)
      REQUIRE(f.cancel());
  }
  std::vector<ScheduledFuture<void>> futures;
  futures.reserve(kTimers);
  const std::size_t before = residentBytes();
  for (std::size_t i = 0; i < kTimers; ++i)
    futures.push_back(pool.schedule([] {}, 1h));
  const std::size_t peak = residentBytes();
  REQUIRE(pool.stats().scheduledCount == kTimers);
  for (auto& f : futures)
    REQUIRE(f.cancel());
  for (auto& f : futures)
    f = ScheduledFuture<void>();  // the Futures go; the vector's own storage stays
  const std::size_t after = residentBytes();
  CHECK(pool.stats().scheduledCount == 0);
  INFO("resident growth: peak " << (peak - before) / 1024 << " KiB, after "
                                << (after > before ? (after - before) / 1024 : 0) << " KiB");
  REQUIRE(peak > before + kTimers * 200);
  // What stays: the vector of Futures (kTimers handles) and the caches.
  CHECK(after < before + (peak - before) / 4);
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

// ---- found by the fault sweep ----------------------------------------------------

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
