// SPDX-License-Identifier: BSL-1.0
#include "coexec/Sleep.h"

// co_await sleepFor(d) / sleepUntil(t): the coroutine suspends for at least
// the duration without holding a thread and resumes where it was running (the
// syncWait thread, or the pool whose thread it was on); a zero, negative or
// past deadline does not suspend; a pool's close() waits for its sleepers; a
// sleep keeps the time of its scheduler's timer service. Cancellation: a
// coroutine running for a pool task (and every Task it awaits) has the
// task's token; when it is cancelled the sleep ends at once with
// OperationCancelled and its timer is removed.
// Upper bounds on elapsed times are kLong, only so that a bug cannot hang.

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

struct Woke {
  std::thread::id thread;
  SteadyClock::duration slept;
};

Task<Woke> sleepThenReport(SteadyClock::duration d) {
  const auto start = SteadyClock::now();
  co_await sleepFor(d);
  co_return Woke{coexec::thisThreadId(), SteadyClock::now() - start};
}

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

TEST_CASE("syncWait of a task that sleeps resumes on the syncWait thread after at least the duration",
          "[sleep][syncWait]") {
  const Woke woke = syncWait(sleepThenReport(20ms));
  CHECK(woke.thread == std::this_thread::get_id());
  CHECK(woke.slept >= 20ms);
  CHECK(woke.slept < kLong);
}

TEST_CASE("sleepUntil resumes on the syncWait thread once the steady clock has reached the deadline",
          "[sleep][syncWait]") {
  const auto deadline = SteadyClock::now() + 15ms;
  const auto [thread, woke] =
      syncWait([](SteadyClock::time_point t) -> Task<std::pair<std::thread::id, SteadyClock::time_point>> {
        co_await sleepUntil(t);
        co_return std::pair{coexec::thisThreadId(), SteadyClock::now()};
      }(deadline));
  CHECK(thread == std::this_thread::get_id());
  CHECK(woke >= deadline);
  CHECK(woke < deadline + kLong);
}

TEST_CASE("a named sleep awaiter works like the temporary", "[sleep]") {
  const auto slept = syncWait([]() -> Task<SteadyClock::duration> {
    const auto start = SteadyClock::now();
    auto nap = sleepFor(10ms);
    co_await nap;
    co_return SteadyClock::now() - start;
  }());
  CHECK(slept >= 10ms);
  CHECK(slept < kLong);
}

TEST_CASE("zero, negative and past deadlines do not suspend", "[sleep]") {
  // await_suspend() returning false: the coroutine goes on without suspending.
  CHECK_FALSE(sleepFor(0ms).await_suspend(std::noop_coroutine()));
  CHECK_FALSE(sleepFor(-5s).await_suspend(std::noop_coroutine()));
  CHECK_FALSE(sleepFor(std::chrono::hours::min()).await_suspend(std::noop_coroutine()));
  CHECK_FALSE(sleepUntil(SteadyClock::now() - 1ms).await_suspend(std::noop_coroutine()));
  CHECK_FALSE(sleepUntil(SteadyClock::time_point::min()).await_suspend(std::noop_coroutine()));
  // (That hours::max() saturates instead of overflowing into the past: the
  // shutdownNow() test below finds such a sleeper still asleep.)

  // In a coroutine: many of them in a row finish at once, on this thread.
  const auto start = SteadyClock::now();
  const int passed = syncWait([]() -> Task<int> {
    int n = 0;
    for (int i = 0; i < 1000; ++i) {
      co_await sleepFor(0ms);
      co_await sleepFor(-1ms);
      co_await sleepUntil(SteadyClock::time_point{});
      ++n;
    }
    co_return n;
  }());
  CHECK(passed == 1000);
  CHECK(SteadyClock::now() - start < kLong);
}

TEST_CASE("a sleep keeps the time of its scheduler's timer service, read when it is awaited", "[sleep][clock]") {
  // A clock far ahead of the steady clock: a steady-clock deadline would be
  // long past on it, and a sleep on the steady clock would not end when it
  // is advanced.
  ManualClock clock(SteadyClock::now() + 1000h);
  TimerService service(clock);
  ScopedScheduler scheduler(service);
  const std::size_t steadyBefore = coexec::detail::steadyTimerService().pendingCount();
  std::atomic<int> step{0};

  auto sleeper = [](ManualClock& clock, std::atomic<int>& step) -> Task<void> {
    auto nap = sleepFor(1h);  // the deadline is taken at the co_await below, not here
    clock.advance(10min);
    co_await nap;
    step = 1;
    co_await sleepUntil(SteadyClock::now() + 1h);  // past on this clock: does not suspend
    step = 2;
    co_await sleepUntil(clock.now() + 10s);
    step = 3;
  };
  Task<void> task = sleeper(clock, step);
  coexec::detail::resume(task.handle());  // runs until the first sleep
  CHECK(step == 0);
  CHECK(service.pendingCount() == 1);
  CHECK(coexec::detail::steadyTimerService().pendingCount() == steadyBefore);

  clock.advance(59min);  // 1 h after the sleepFor() call, 59 min after the co_await
  CHECK(step == 0);
  clock.advance(1min);  // the timer fires here, on this thread, which is the scheduler's: resumed inline
  CHECK(step == 2);
  CHECK(service.pendingCount() == 1);
  clock.advance(10s);
  CHECK(step == 3);
  CHECK(task.handle().done());
  CHECK(service.pendingCount() == 0);
  CHECK(scheduler.posted == 0);
}

TEST_CASE("a coroutine sleeping on a pool resumes on a thread of that pool", "[sleep][pool]") {
  ThreadPoolExecutor pool(taggedPool("sleeper", 1, 1, WorkQueue::bounded(8)));
  Future<std::string> where = pool.submit([]() -> Task<std::string> {
    const std::string before(currentTag);
    const auto start = SteadyClock::now();
    co_await sleepFor(10ms);
    if (SteadyClock::now() - start < 10ms) co_return "woke early";
    co_return before + "/" + std::string(currentTag);
  });
  REQUIRE(where.waitFor(kLong));
  CHECK(where.get() == "sleeper/sleeper");
}

TEST_CASE("a thousand coroutines sleeping on a two-thread pool each resume exactly once, on the pool",
          "[sleep][pool]") {
  constexpr std::size_t kSleepers = 1000;
  ThreadPoolExecutor pool(taggedPool("many", 2, 2, WorkQueue::unbounded()));
  const auto resumed = std::make_unique<std::atomic<int>[]>(kSleepers);
  std::atomic<int> offPool{0};
  std::vector<Future<void>> done;
  done.reserve(kSleepers);
  for (std::size_t i = 0; i < kSleepers; ++i) {
    done.push_back(pool.submit([&resumed, &offPool, i]() -> Task<void> {
      co_await sleepFor(std::chrono::milliseconds(1 + i % 20));
      if (currentTag != "many") offPool.fetch_add(1);
      resumed[i].fetch_add(1);
    }));
  }
  for (Future<void>& f : done) {
    REQUIRE(f.waitFor(kLong));
    f.get();
  }
  pool.close();
  for (std::size_t i = 0; i < kSleepers; ++i)
    REQUIRE(resumed[i].load() == 1);
  CHECK(offPool.load() == 0);
}

TEST_CASE("close() waits for a coroutine sleeping on the pool, and returns once it has finished",
          "[sleep][pool][shutdown]") {
  std::atomic<bool> finished{false};
  const auto start = SteadyClock::now();
  {
    ThreadPoolExecutor pool(taggedPool("closing", 1, 1, WorkQueue::bounded(8)));
    Future<void> sleeper = pool.submit([&finished]() -> Task<void> {
      co_await sleepFor(50ms);
      finished = true;
    });
    pool.close();
    CHECK(finished.load());
    CHECK(sleeper.isDone());
  }
  const auto elapsed = SteadyClock::now() - start;
  CHECK(elapsed >= 50ms);
  CHECK(elapsed < kLong);
}

// ---- cancellation ------------------------------------------------------------

TEST_CASE("cancelling the Future of a coroutine task sleeping for an hour wakes it at once with OperationCancelled",
          "[sleep][cancel]") {
  Counter sleeping;
  Wake wake;
  ThreadPoolExecutor pool(taggedPool("napper", 1, 1, WorkQueue::bounded(8)));
  StopOnExit stop(pool);
  TimerService& service = sleepServiceOf(pool);
  const std::size_t timersBefore = service.pendingCount();

  Future<void> nap =
      pool.submit([&sleeping, &wake]() -> Task<void> { return recordedSleep(1h, sleeping, wake, "napper"); });
  REQUIRE(sleeping.waitFor(1));
  REQUIRE(eventually([&] { return service.pendingCount() == timersBefore + 1; }));  // asleep in its timer

  const auto cancelledAt = SteadyClock::now();
  CHECK(nap.cancel());
  REQUIRE(nap.waitFor(kLong));
  CHECK(SteadyClock::now() - cancelledAt < kLong);
  CHECK(throwsA<OperationCancelled>([&] { nap.get(); }));
  CHECK(wake.cancelled == 1);
  CHECK(wake.normally == 0);
  CHECK_FALSE(wake.offPool);                      // resumed on the pool, not on the cancelling thread
  CHECK(service.pendingCount() == timersBefore);  // the timer was removed, not left to fire in an hour

  pool.close();
  const coexec::PoolStats stats = pool.stats();
  CHECK(stats.cancelledCount == 1);
  CHECK(stats.failedCount == 0);
  CHECK(stats.completedTaskCount == 1);  // sleepServiceOf()'s task
}

TEST_CASE("shutdownNow wakes coroutine tasks sleeping forever with OperationCancelled, and the pool terminates",
          "[sleep][cancel][shutdown]") {
  Counter sleeping;
  Wake submitted;
  Wake executed;
  ThreadPoolExecutor pool(taggedPool("stopping", 1, 1, WorkQueue::bounded(8)));
  StopOnExit stop(pool);
  TimerService& service = sleepServiceOf(pool);
  const std::size_t timersBefore = service.pendingCount();

  // hours::max() saturates: the sleep is pending, not over at once.
  Future<void> forever = pool.submit([&sleeping, &submitted]() -> Task<void> {
    return recordedSleep(SteadyClock::duration::max(), sleeping, submitted, "stopping");
  });
  // Fire-and-forget: only shutdownNow() can reach its token.
  pool.execute([&sleeping, &executed]() -> Task<void> {
    return recordedSleep(std::chrono::hours::max(), sleeping, executed, "stopping");
  });
  REQUIRE(sleeping.waitFor(2));
  REQUIRE(eventually([&] { return service.pendingCount() == timersBefore + 2; }));

  const auto stoppedAt = SteadyClock::now();
  CHECK(pool.shutdownNow().empty());
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(SteadyClock::now() - stoppedAt < kLong);
  REQUIRE(forever.isDone());
  CHECK(throwsA<OperationCancelled>([&] { forever.get(); }));
  CHECK(submitted.cancelled == 1);
  CHECK(executed.cancelled == 1);
  CHECK(submitted.normally + executed.normally == 0);
  CHECK(service.pendingCount() == timersBefore);
  const coexec::PoolStats stats = pool.stats();
  CHECK(stats.cancelledCount == 2);
  CHECK(stats.failedCount == 0);
}

namespace {

Task<int> sleepingChild(Counter& sleeping, Wake& wake) {
  co_await recordedSleep(1h, sleeping, wake, "family");
  co_return 1;
}

Task<int> middleChild(Counter& sleeping, Wake& childWake, std::atomic<int>& middleSaw) {
  try {
    co_return co_await sleepingChild(sleeping, childWake) + 1;
  } catch (const OperationCancelled&) {
    middleSaw.fetch_add(1);
    throw;
  }
}

}  // namespace

TEST_CASE("a sleep in a child task awaited by the submitted coroutine is cancelled with the task",
          "[sleep][cancel][task]") {
  Counter sleeping;
  Wake childWake;
  std::atomic<int> middleSaw{0};
  std::atomic<int> rootSaw{0};
  ThreadPoolExecutor pool(taggedPool("family", 1, 1, WorkQueue::bounded(8)));
  StopOnExit stop(pool);
  TimerService& service = sleepServiceOf(pool);
  const std::size_t timersBefore = service.pendingCount();

  Future<int> root = pool.submit([&]() -> Task<int> {
    try {
      co_return co_await middleChild(sleeping, childWake, middleSaw);
    } catch (const OperationCancelled&) {
      rootSaw.fetch_add(1);
      throw;
    }
  });
  REQUIRE(sleeping.waitFor(1));
  REQUIRE(eventually([&] { return service.pendingCount() == timersBefore + 1; }));

  SECTION("by Future::cancel") {
    CHECK(root.cancel());
    REQUIRE(root.waitFor(kLong));
  }
  SECTION("by shutdownNow") {
    CHECK(pool.shutdownNow().empty());
    REQUIRE(pool.awaitTermination(kLong));
  }
  REQUIRE(root.isDone());
  CHECK(throwsA<OperationCancelled>([&] { root.get(); }));
  CHECK(childWake.cancelled == 1);  // the grandchild's sleep ended with the cancellation
  CHECK(childWake.normally == 0);
  CHECK_FALSE(childWake.offPool);
  CHECK(middleSaw == 1);  // and it went up the chain
  CHECK(rootSaw == 1);
  CHECK(service.pendingCount() == timersBefore);
}

TEST_CASE("a coroutine whose token is already cancelled gets OperationCancelled from any sleep without suspending",
          "[sleep][cancel]") {
  // The coroutine blocks its pool's only thread until the test has cancelled
  // its Future; then every sleep throws at once. Had one suspended, the
  // thread would have been free to run `marker`, queued behind.
  struct Outcome {
    std::atomic<int> threw{0};
    std::atomic<bool> suspended{false};
    std::atomic<bool> markerRanFirst{false};
    std::atomic<bool> markerRan{false};
    std::atomic<bool> tokenCancelled{true};  // as the callable that takes a token saw it
  };
  Counter started;
  Gate cancelled;
  Outcome outcome;
  ThreadPoolExecutor pool(taggedPool("cancelled", 1, 1, WorkQueue::bounded(8)));
  coexec::test::StopOnExit stop(cancelled, pool);
  TimerService& service = sleepServiceOf(pool);
  const std::size_t timersBefore = service.pendingCount();

  auto sleeps = [&outcome]() -> Task<void> {
    const auto thread = coexec::thisThreadId();
    for (int kind = 0; kind < 4; ++kind) {
      try {
        switch (kind) {
          case 0: co_await sleepFor(0ms); break;
          case 1: co_await sleepFor(-1s); break;
          case 2: co_await sleepUntil(SteadyClock::time_point::min()); break;
          default: co_await sleepFor(1h); break;
        }
      } catch (const OperationCancelled&) {
        outcome.threw.fetch_add(1);
      }
      if (outcome.markerRan) outcome.markerRanFirst = true;
    }
    if (coexec::thisThreadId() != thread) outcome.suspended = true;
  };
  Future<void> task;
  SECTION("a token the coroutine asks for after the cancel") {
    task = pool.submit([&, sleeps]() -> Task<void> {
      started.arrive();
      cancelled.wait();
      return sleeps();
    });
  }
  SECTION("the token of a callable that takes one") {
    task = pool.submit([&, sleeps](CancellationToken token) -> Task<void> {
      started.arrive();
      cancelled.wait();
      outcome.tokenCancelled = token.isCancellationRequested();
      return sleeps();
    });
  }
  pool.execute([&outcome] { outcome.markerRan = true; });
  REQUIRE(started.waitFor(1));
  CHECK(task.cancel());
  cancelled.open();
  REQUIRE(task.waitFor(kLong));
  CHECK(throwsA<OperationCancelled>([&] { task.get(); }));
  CHECK(outcome.threw == 4);
  CHECK_FALSE(outcome.suspended);
  CHECK_FALSE(outcome.markerRanFirst);
  CHECK(outcome.tokenCancelled);
  CHECK(service.pendingCount() == timersBefore);
}

TEST_CASE("a coroutine task taking a CancellationToken is woken from its sleep by Future::cancel", "[sleep][cancel]") {
  Counter sleeping;
  std::atomic<int> woke{0};
  std::atomic<bool> sawTokenCancelled{false};
  ThreadPoolExecutor pool(taggedPool("token", 1, 1, WorkQueue::bounded(8)));
  StopOnExit stop(pool);
  TimerService& service = sleepServiceOf(pool);
  const std::size_t timersBefore = service.pendingCount();

  Future<int> nap = pool.submit([&](CancellationToken token) -> Task<int> {
    sleeping.arrive();
    try {
      co_await sleepFor(1h);
    } catch (const OperationCancelled&) {
      woke.fetch_add(1);
      sawTokenCancelled = token.isCancellationRequested();
      throw;
    }
    co_return 1;
  });
  REQUIRE(sleeping.waitFor(1));
  REQUIRE(eventually([&] { return service.pendingCount() == timersBefore + 1; }));
  CHECK(nap.cancel());
  REQUIRE(nap.waitFor(kLong));
  CHECK(throwsA<OperationCancelled>([&] { nap.get(); }));
  CHECK(woke == 1);
  CHECK(sawTokenCancelled);
  CHECK(service.pendingCount() == timersBefore);
}

TEST_CASE("a cancel racing the timer of a short sleep resumes the coroutine once, normally or with OperationCancelled",
          "[sleep][cancel][race]") {
  // Each round: a coroutine sleeps 0 to 39 us; once it has started, the test
  // waits 0 to 60 us and cancels its Future. The cancel lands before the
  // coroutine awaits, while it arms the timer, while it sleeps, while the
  // timer fires, or after it woke; whichever wins, the coroutine resumes
  // exactly once.
  constexpr int kRounds = 10'000;
  struct Round {
    std::atomic<bool> started{false};
    std::atomic<int> resumed{0};
  };
  std::atomic<int> wokeNormally{0};
  std::atomic<int> wokeCancelled{0};
  int cancelledFutures = 0;
  int completedFutures = 0;
  int wrongResumptions = 0;
  ThreadPoolExecutor pool(taggedPool("racer", 2, 2, WorkQueue::unbounded()));
  StopOnExit stop(pool);
  TimerService& service = sleepServiceOf(pool);
  const std::size_t timersBefore = service.pendingCount();

  for (int round = 0; round < kRounds; ++round) {
    Round r;
    const auto sleep = std::chrono::microseconds(round % 40);
    Future<void> f = pool.submit([&r, &wokeNormally, &wokeCancelled, sleep]() -> Task<void> {
      r.started = true;
      try {
        co_await sleepFor(sleep);
      } catch (const OperationCancelled&) {
        r.resumed.fetch_add(1);
        wokeCancelled.fetch_add(1);
        throw;
      }
      r.resumed.fetch_add(1);
      wokeNormally.fetch_add(1);
    });
    const auto startLimit = SteadyClock::now() + kLong;
    while (!r.started) {  // spins: the race is over before a polling sleep would end
      if (SteadyClock::now() >= startLimit) FAIL("round " << round << ": the coroutine did not start");
      std::this_thread::yield();
    }
    const auto until = SteadyClock::now() + std::chrono::nanoseconds((round * 7919) % 60'000);
    while (SteadyClock::now() < until) {
    }
    const bool cancelled = f.cancel();
    REQUIRE(f.waitFor(kLong));  // the frame is gone once the Future settles
    if (r.resumed != 1) ++wrongResumptions;
    if (cancelled) {
      ++cancelledFutures;
      CHECK(throwsA<OperationCancelled>([&] { f.get(); }));
    } else {
      ++completedFutures;
      f.get();
    }
  }
  CHECK(wrongResumptions == 0);
  CHECK(wokeNormally + wokeCancelled == kRounds);
  // Every outcome the race claims to cover happened.
  CHECK(wokeNormally > 0);
  CHECK(wokeCancelled > 0);
  CHECK(cancelledFutures > 0);
  CHECK(completedFutures > 0);
  CHECK(service.pendingCount() == timersBefore);  // no timer left behind
  pool.close();
  const coexec::PoolStats stats = pool.stats();
  CHECK(stats.cancelledCount + stats.completedTaskCount == kRounds + 1);  // + sleepServiceOf()'s task
  CHECK(stats.cancelledCount == static_cast<std::uint64_t>(wokeCancelled.load()));
  CAPTURE(wokeNormally.load(), wokeCancelled.load(), cancelledFutures, completedFutures);
}

TEST_CASE("cancel and shutdownNow of a coroutine task that never sleeps still settle it with OperationCancelled",
          "[cancel][task]") {
  // The token plumbing must not change what a coroutine that never asks for
  // its token sees: its Future still reports the cancellation, and a pool
  // stopped while it runs terminates once it returns.
  Counter started;
  Gate release;
  std::atomic<int> finished{0};
  ThreadPoolExecutor pool(taggedPool("plain", 1, 1, WorkQueue::bounded(8)));
  coexec::test::StopOnExit stop(release, pool);
  auto child = [](Gate& release) -> Task<int> {
    release.wait();
    co_return 41;
  };
  Future<int> task = pool.submit([&]() -> Task<int> {
    started.arrive();
    const int value = co_await child(release) + 1;  // a child task, no sleep
    finished.fetch_add(1);
    co_return value;
  });
  REQUIRE(started.waitFor(1));
  SECTION("by Future::cancel") {
    CHECK(task.cancel());
    release.open();
    REQUIRE(task.waitFor(kLong));
    pool.close();
    CHECK(throwsA<OperationCancelled>([&] { task.get(); }));
  }
  SECTION("by shutdownNow") {
    CHECK(pool.shutdownNow().empty());
    CHECK_FALSE(task.isDone());
    release.open();
    REQUIRE(pool.awaitTermination(kLong));
    REQUIRE(task.isDone());
    CHECK(task.get() == 42);  // shutdownNow() cancels a token only: the Future has what the task did
  }
  CHECK(finished == 1);
  CHECK(pool.stats().completedTaskCount == 1);  // counted by how the coroutine ended
}

TEST_CASE("sleepFor on a pool with a ManualClock lasts on that clock: it ends when advance() passes it",
          "[sleep][manual]") {
  // An hour of the pool's clock, in steps of advance() that start once the
  // coroutine sleeps in its timer: not over after 50 minutes, over when the
  // step that passes the hour returns (its timer fires inside advance()),
  // with no real hour passing; on the steady clock it would not end at all
  // here. No advance() comes between the coroutine's reads of the clock but
  // those steps, so it slept exactly the hour.
  ManualClock clock;
  ThreadPoolExecutor pool({.name = "manual-sleep", .clock = &clock});
  TimerService& service = sleepServiceOf(pool);
  const std::size_t timersBefore = service.pendingCount();
  Future<ManualClock::duration> slept = pool.submit([&]() -> Task<ManualClock::duration> {
    const auto start = clock.now();
    co_await sleepFor(1h);
    co_return clock.now() - start;
  });
  REQUIRE(eventually([&] { return service.pendingCount() == timersBefore + 1; }));  // asleep in its timer
  for (int step = 0; step < 5; ++step) clock.advance(10min);
  CHECK(service.pendingCount() == timersBefore + 1);  // 50 minutes: still asleep
  CHECK_FALSE(slept.isDone());
  clock.advance(10min);
  CHECK(service.pendingCount() == timersBefore);  // fired by the step that reached the hour
  REQUIRE(slept.waitFor(kLong));
  CHECK(slept.get() == 1h);
}

TEST_CASE("sleepUntil on a pool with a ManualClock compares with that clock", "[sleep][manual]") {
  ManualClock clock;
  ThreadPoolExecutor pool({.name = "manual-until", .clock = &clock});
  const auto deadline = clock.now() + 5s;
  Future<bool> woke = pool.submit([&]() -> Task<bool> {
    co_await sleepUntil(deadline);
    co_return clock.now() >= deadline;
  });
  REQUIRE(eventually([&] {
    clock.advance(1s);
    return woke.isDone();
  }));
  CHECK(woke.get());
}
