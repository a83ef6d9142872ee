// SPDX-License-Identifier: BSL-1.0
#include "coexec/Clock.h"

// The clocks: SteadyClock reads the real time; a ManualClock's time stands
// still until advance() moves it (never backwards), and may be read from any
// thread meanwhile. How advance() fires timers is tested with the timer
// service, in TimerServiceTest.

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>

#include "Assertions.h"

#include "DeathTestSupport.h"
#include "coexec/ThreadPoolExecutor.h"

using coexec::Clock;
using coexec::ManualClock;
using coexec::steadyClock;
using namespace std::chrono_literals;

TEST_CASE("the steady clock reads std::chrono::steady_clock", "[clock]") {
  const auto before = std::chrono::steady_clock::now();
  const auto now = steadyClock().now();
  const auto after = std::chrono::steady_clock::now();
  CHECK(before <= now);
  CHECK(now <= after);
  CHECK(&steadyClock() == &steadyClock());
}

TEST_CASE("a manual clock stands still until advanced, then moves by exactly the amount", "[clock][manual]") {
  const Clock::time_point start = Clock::time_point{} + 5s;
  ManualClock clock(start);
  CHECK(clock.now() == start);
  CHECK(clock.now() == start);
  clock.advance(1500ms);
  CHECK(clock.now() == start + 1500ms);
  clock.advance(0ms);
  CHECK(clock.now() == start + 1500ms);
  CHECK(ManualClock().now() == Clock::time_point{});
}

TEST_CASE("a manual clock refuses to go back, naming the value", "[clock][manual]") {
  ManualClock clock;
  clock.advance(1s);
  CHECK_THROWS_WITH(clock.advance(-1ms), Catch::Contains("negative") && Catch::Contains("-1000000ns"));
  CHECK_THROWS_AS(clock.advance(-1ms), std::invalid_argument);
  CHECK(clock.now() == Clock::time_point{} + 1s);
}

TEST_CASE("a manual clock saturates at time_point::max instead of overflowing", "[clock][manual]") {
  ManualClock clock(Clock::time_point{} + 1h);
  clock.advance(Clock::duration::max());
  CHECK(clock.now() == Clock::time_point::max());
  clock.advance(1s);
  CHECK(clock.now() == Clock::time_point::max());
}

TEST_CASE("a manual clock may be read from other threads while it advances, and never goes back", "[clock][manual]") {
  ManualClock clock;
  std::atomic<bool> done{false};
  std::atomic<bool> wentBack{false};
  std::thread reader([&] {
    Clock::time_point last = clock.now();
    while (!done.load()) {
      const Clock::time_point now = clock.now();
      if (now < last) wentBack = true;
      last = now;
    }
  });
  for (int i = 0; i < 10'000; ++i)
    clock.advance(1ms);
  done = true;
  reader.join();
  CHECK_FALSE(wentBack.load());
  CHECK(clock.now() == Clock::time_point{} + 10s);
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("death child: a ManualClock destroyed while a pool still runs on it", "[.][clock][death]") {
  if (!coexec::test::isDeathChild()) return;
  coexec::test::prepareDeathChild();
  auto clock = std::make_unique<ManualClock>();
  coexec::ThreadPoolExecutor pool({.name = "early", .clock = clock.get()});
  clock.reset();  // the pool's timer service still runs on it: the assertion fires
}

TEST_CASE("a ManualClock destroyed before a pool that runs on it fails an assertion in debug builds",
          "[clock][manual][bad-input][death]") {
#ifdef NDEBUG
  WARN("assertions are compiled out (NDEBUG): destroying the clock first is undefined behaviour here");
#else
  coexec::test::requireAbortsWith("death child: a ManualClock destroyed while a pool still runs on it",
                                  "coexec::ManualClock destroyed while a timer service still runs on it");
#endif
}
