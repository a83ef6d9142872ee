// SPDX-License-Identifier: BSL-1.0
#include "coexec/Sleep.h"

// co_await sleepFor(d) / sleepUntil(t): the coroutine suspends for at least
// the duration without holding a thread and resumes where it was running (the
// syncWait thread, or the pool whose thread it was on); a zero, negative or
// past deadline does not suspend; a pool's close() waits for its sleepers; a
// sleep keeps the time of its scheduler's timer service, a ManualClock's on a
// pool that has one. Cancellation: SleepCancellationTest.cpp.
// Upper bounds on elapsed times are kLong, only so that a bug cannot hang.

#include "SleepTestSupport.h"

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
