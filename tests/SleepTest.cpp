#include "coexec/Sleep.h"

// co_await sleepFor(d) / sleepUntil(t): the coroutine suspends for at least
// the duration without holding a thread and resumes where it was running (the
// syncWait thread, or the pool whose thread it was on); a zero, negative or
// past deadline does not suspend; a pool's close() waits for its sleepers.
// Upper bounds on elapsed times are kLong, only so that a bug cannot hang.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "CoroutineTestSupport.h"
#include "coexec/Future.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using coexec::Future;
using coexec::sleepFor;
using coexec::sleepUntil;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::test::currentTag;
using coexec::test::kLong;
using coexec::test::taggedPool;
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
  co_return Woke{std::this_thread::get_id(), SteadyClock::now() - start};
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
        co_return std::pair{std::this_thread::get_id(), SteadyClock::now()};
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
  CHECK(sleepFor(0ms).await_ready());
  CHECK(sleepFor(-5s).await_ready());
  CHECK(sleepFor(std::chrono::hours::min()).await_ready());
  CHECK(sleepUntil(SteadyClock::now() - 1ms).await_ready());
  CHECK(sleepUntil(SteadyClock::time_point::min()).await_ready());
  CHECK_FALSE(sleepFor(1h).await_ready());
  CHECK_FALSE(sleepFor(std::chrono::hours::max()).await_ready());  // saturates, does not overflow
  CHECK_FALSE(sleepUntil(SteadyClock::now() + 1h).await_ready());

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
