// SPDX-License-Identifier: BSL-1.0
#include "coexec/ThreadPoolExecutor.h"

// co_await pool.whenTerminated() and whenTerminated(timeout): resumed once
// the pool is TERMINATED (after shutdown() and its tasks, after shutdownNow(),
// at once when it already is), on the awaiting coroutine's scheduler; the
// timeout on the pool's clock (a ManualClock here) answers false when it
// comes first; every awaiter is resumed exactly once, also when the timer and
// the termination race; a thread or a coroutine task of the pool itself is
// refused with std::logic_error.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "TestSupport.h"
#include "coexec/Clock.h"
#include "coexec/Errors.h"
#include "coexec/ResumeOn.h"
#include "coexec/Sleep.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThisThread.h"

using namespace std::chrono_literals;

using coexec::Future;
using coexec::ManualClock;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::Counter;
using coexec::test::eventually;
using coexec::test::Gate;
using coexec::test::kLong;

namespace {

ThreadPoolOptions options(std::size_t threads, const char* name, coexec::Clock* clock = nullptr) {
  ThreadPoolOptions o;
  o.corePoolSize = threads;
  o.maximumPoolSize = threads;
  o.workQueue = WorkQueue::bounded(256);
  o.name = name;
  o.clock = clock;
  return o;
}

/// The thread of a one-thread pool (its core thread never times out).
std::thread::id threadOf(ThreadPoolExecutor& pool) {
  return pool.submit([] { return coexec::thisThreadId(); }).get();
}

/// True once every coroutine submitted to `pool` has suspended (none runs)
/// and `started` of them have reached their co_await.
[[nodiscard]] bool allSuspended(ThreadPoolExecutor& pool, Counter& arrived, std::size_t started) {
  return arrived.waitFor(started) && eventually([&] { return pool.stats().activeCount == 0; });
}

/// What a waiter saw when it resumed.
struct Seen {
  bool terminated = false;  // the pool's isTerminated() after the co_await
  bool result = false;      // what a timed co_await returned
  std::thread::id thread;   // where it resumed
};

// Runs an empty task on `pool` and waits for it: with one thread, whatever was posted to the
// pool before it has run when this returns.
void drain(ThreadPoolExecutor& pool) {
  Future<void> marker = pool.submit([] {});
  REQUIRE(marker.waitFor(kLong));
}

}  // namespace

TEST_CASE("whenTerminated resumes the awaiter once the pool terminates after shutdown and its tasks",
          "[executor][whenTerminated]") {
  ThreadPoolExecutor b(options(1, "b"));
  const std::thread::id bThread = threadOf(b);
  Gate gate;
  Counter arrived;
  {
    ThreadPoolExecutor a(options(2, "a"));
    coexec::test::OpenOnExit release(gate);  // a failed REQUIRE does not leave a's task blocked
    Counter running;
    a.execute([&] {
      running.arrive();
      gate.wait();
    });
    REQUIRE(running.waitFor(1));
    Future<Seen> waiter = b.submit([&]() -> Task<Seen> {
      arrived.arrive();
      co_await a.whenTerminated();
      co_return Seen{a.isTerminated(), true, coexec::thisThreadId()};
    });
    REQUIRE(allSuspended(b, arrived, 1));
    CHECK_FALSE(waiter.isDone());
    a.shutdown();
    drain(b);  // a resumption wrongly posted by shutdown() would have run on b's one thread by now
    CHECK_FALSE(waiter.isDone());      // SHUTDOWN, not TERMINATED: a task still runs
    gate.open();
    REQUIRE(waiter.waitFor(kLong));
    const Seen seen = waiter.get();
    CHECK(seen.terminated);
    CHECK(seen.thread == bThread);  // on the awaiting coroutine's scheduler
    CHECK(a.stats().completedTaskCount == 1);
  }  // a is destroyed: no awaiter refers to it
  const coexec::PoolStats stats = coexec::test::finalStats(b);
  CHECK(stats.completedTaskCount == 3);  // threadOf, the drain marker, the waiter
  coexec::test::checkLedgerAddsUp(stats);
}

TEST_CASE("whenTerminated under syncWait resumes on the syncWait thread", "[executor][whenTerminated][syncWait]") {
  Gate gate;
  ThreadPoolExecutor a(options(1, "a"));
  coexec::test::OpenOnExit release(gate);
  Counter running;
  a.execute([&] {
    running.arrive();
    gate.wait();
  });
  REQUIRE(running.waitFor(1));
  std::thread terminator([&] {
    a.shutdown();
    gate.open();
  });
  const auto waiter = [&]() -> Task<Seen> {
    co_await a.whenTerminated();
    co_return Seen{a.isTerminated(), true, coexec::thisThreadId()};
  };
  const Seen seen = coexec::syncWait(waiter());
  terminator.join();
  CHECK(seen.terminated);
  CHECK(seen.thread == coexec::thisThreadId());
}

TEST_CASE("whenTerminated on a terminated pool does not suspend", "[executor][whenTerminated]") {
  ThreadPoolExecutor a(options(1, "a"));
  CHECK_FALSE(coexec::syncWait(a.whenTerminated(0s)));  // polls: not terminated
  a.execute([] {});
  a.shutdown();
  REQUIRE(a.awaitTermination(kLong));
  coexec::syncWait(a.whenTerminated());
  CHECK(coexec::syncWait(a.whenTerminated(0s)));
  CHECK(coexec::syncWait(a.whenTerminated(-1s)));
  auto named = a.whenTerminated(1h);
  CHECK(coexec::syncWait(named));
}

TEST_CASE("whenTerminated with a timeout on a ManualClock", "[executor][whenTerminated][time]") {
  ManualClock clock;
  ThreadPoolExecutor b(options(1, "b"));
  const std::thread::id bThread = threadOf(b);
  Gate gate;
  Counter running;
  Counter arrived;
  ThreadPoolExecutor a(options(1, "a", &clock));
  coexec::test::OpenOnExit release(gate);
  a.execute([&] {
    running.arrive();
    gate.wait();
  });
  REQUIRE(running.waitFor(1));

  SECTION("false when the clock passes the deadline first") {
    Future<Seen> waiter = b.submit([&]() -> Task<Seen> {
      arrived.arrive();
      const bool result = co_await a.whenTerminated(10s);
      co_return Seen{a.isTerminated(), result, coexec::thisThreadId()};
    });
    REQUIRE(allSuspended(b, arrived, 1));
    clock.advance(9s);
    drain(b);  // a resumption wrongly posted at 9 s would have run on b's one thread by now
    CHECK_FALSE(waiter.isDone());
    clock.advance(1s);  // the deadline: resumed, posted to b
    REQUIRE(waiter.waitFor(kLong));
    const Seen seen = waiter.get();
    CHECK_FALSE(seen.result);
    CHECK_FALSE(seen.terminated);
    CHECK(seen.thread == bThread);
    gate.open();
  }
  SECTION("true when the termination comes first") {
    Future<Seen> waiter = b.submit([&]() -> Task<Seen> {
      arrived.arrive();
      const bool result = co_await a.whenTerminated(10s);
      co_return Seen{a.isTerminated(), result, coexec::thisThreadId()};
    });
    REQUIRE(allSuspended(b, arrived, 1));
    clock.advance(5s);
    a.shutdown();
    gate.open();
    REQUIRE(waiter.waitFor(kLong));
    const Seen seen = waiter.get();
    CHECK(seen.result);
    CHECK(seen.terminated);
    CHECK(seen.thread == bThread);
    clock.advance(10s);  // the removed timer does not fire (it would touch a resumed awaiter)
  }
  a.shutdown();
  REQUIRE(a.awaitTermination(kLong));
}

TEST_CASE("shutdownNow settles the pool's work and resumes whenTerminated awaiters", "[executor][whenTerminated]") {
  ThreadPoolExecutor b(options(1, "b"));
  Counter arrived;
  Counter asleep;
  ThreadPoolExecutor a(options(2, "a"));
  // A coroutine task suspended in a sleep, and a task running until cancelled.
  Future<int> sleeper = a.submit([&]() -> Task<int> {
    asleep.arrive();
    co_await coexec::sleepFor(1h);
    co_return 1;
  });
  Future<int> spinner = a.submit([&](coexec::CancellationToken token) {
    asleep.arrive();
    while (!token.isCancellationRequested()) std::this_thread::sleep_for(1ms);
    return 2;
  });
  REQUIRE(asleep.waitFor(2));
  Future<Seen> waiter = b.submit([&]() -> Task<Seen> {
    arrived.arrive();
    const bool result = co_await a.whenTerminated(1h);
    co_return Seen{a.isTerminated(), result, coexec::thisThreadId()};
  });
  REQUIRE(allSuspended(b, arrived, 1));
  CHECK(a.shutdownNow().empty());
  REQUIRE(waiter.waitFor(kLong));
  const Seen seen = waiter.get();
  CHECK(seen.result);
  CHECK(seen.terminated);
  CHECK_THROWS_AS(sleeper.get(), coexec::OperationCancelled);
  CHECK(spinner.get() == 2);
}

TEST_CASE("many concurrent whenTerminated awaiters are each resumed once", "[executor][whenTerminated]") {
  constexpr std::size_t kAwaiters = 64;
  ThreadPoolExecutor b(options(2, "b"));
  Gate gate;
  Counter running;
  Counter arrived;
  std::vector<std::atomic<int>> resumed(kAwaiters);
  std::vector<Future<bool>> waiters;
  {
    ThreadPoolExecutor a(options(1, "a"));
    coexec::test::OpenOnExit release(gate);
    a.execute([&] {
      running.arrive();
      gate.wait();
    });
    REQUIRE(running.waitFor(1));
    for (std::size_t i = 0; i < kAwaiters; ++i) {
      waiters.push_back(b.submit([&, i]() -> Task<bool> {
        arrived.arrive();
        bool result = true;
        if (i % 2 == 0) {
          co_await a.whenTerminated();
        } else {
          result = co_await a.whenTerminated(1h);  // its timer is removed by the termination
        }
        resumed[i].fetch_add(1);
        co_return result && a.isTerminated();
      }));
    }
    REQUIRE(allSuspended(b, arrived, kAwaiters));
    a.shutdown();
    gate.open();
    for (Future<bool>& waiter : waiters) {
      REQUIRE(waiter.waitFor(kLong));
      CHECK(waiter.get());
    }
  }
  for (std::size_t i = 0; i < kAwaiters; ++i) CHECK(resumed[i].load() == 1);
  const coexec::PoolStats stats = coexec::test::finalStats(b);
  CHECK(stats.completedTaskCount == kAwaiters);
}

TEST_CASE("a timeout racing the termination resumes the awaiter exactly once", "[executor][whenTerminated][race]") {
  // Covers: exactly one resumption whichever comes first; the answer agrees
  // with what the awaiter then sees (true: TERMINATED). Both outcomes are
  // counted and reported; neither is required (the race is not steered).
  const std::size_t rounds = coexec::test::stressSize(200, 4);
  ThreadPoolExecutor b(options(2, "b"));
  std::size_t terminatedFirst = 0;
  std::size_t timedOutFirst = 0;
  for (std::size_t round = 0; round < rounds; ++round) {
    ManualClock clock;
    Gate gate;
    Counter running;
    Counter arrived;
    std::atomic<int> resumptions{0};
    Future<Seen> waiter;
    {
      ThreadPoolExecutor a(options(1, "a", &clock));
      coexec::test::OpenOnExit release(gate);
      a.execute([&] {
        running.arrive();
        gate.wait();
      });
      REQUIRE(running.waitFor(1));
      waiter = b.submit([&]() -> Task<Seen> {
        arrived.arrive();
        const bool result = co_await a.whenTerminated(1s);
        resumptions.fetch_add(1);
        co_return Seen{a.isTerminated(), result, coexec::thisThreadId()};
      });
      REQUIRE(allSuspended(b, arrived, 1));
      a.shutdown();
      std::thread advancer([&] { clock.advance(1s); });
      gate.open();
      REQUIRE(a.awaitTermination(kLong));
      advancer.join();
      REQUIRE(waiter.waitFor(kLong));
    }  // a is destroyed once its awaiter is resumed
    const Seen seen = waiter.get();
    CHECK(resumptions.load() == 1);
    if (seen.result) {
      CHECK(seen.terminated);
      ++terminatedFirst;
    } else {
      ++timedOutFirst;
    }
  }
  CHECK(terminatedFirst + timedOutFirst == rounds);
  WARN("terminated first: " << terminatedFirst << ", timed out first: " << timedOutFirst);
}

TEST_CASE("an await racing the termination is resumed exactly once", "[executor][whenTerminated][race]") {
  // The waiter awaits while the pool's last task ends: it either finds the
  // pool TERMINATED or is linked before and resumed by the termination;
  // never lost, never twice.
  const std::size_t rounds = coexec::test::stressSize(300, 4);
  ThreadPoolExecutor b(options(2, "b"));
  for (std::size_t round = 0; round < rounds; ++round) {
    Gate gate;
    Counter running;
    std::atomic<int> resumptions{0};
    Future<bool> waiter;
    {
      ThreadPoolExecutor a(options(1, "a"));
      coexec::test::OpenOnExit release(gate);
      a.execute([&] {
        running.arrive();
        gate.wait();
      });
      REQUIRE(running.waitFor(1));
      a.shutdown();
      waiter = b.submit([&]() -> Task<bool> {
        co_await a.whenTerminated();
        resumptions.fetch_add(1);
        co_return a.isTerminated();
      });
      gate.open();  // a terminates while the waiter starts and awaits
      REQUIRE(waiter.waitFor(kLong));
      CHECK(waiter.get());
    }
    CHECK(resumptions.load() == 1);
  }
}

TEST_CASE("whenTerminated on a thread or in a coroutine task of the pool itself throws std::logic_error",
          "[executor][whenTerminated]") {
  ThreadPoolExecutor a(options(2, "a"));
  ThreadPoolExecutor b(options(1, "b"));
  // A coroutine task of a, on a's thread.
  Future<int> own = a.submit([&]() -> Task<int> {
    try {
      co_await a.whenTerminated();
    } catch (const std::logic_error&) {
      co_return 1;
    }
    co_return 0;
  });
  CHECK(own.get() == 1);
  // A coroutine task of a that hopped to b: still a's task.
  Future<int> hopped = a.submit([&]() -> Task<int> {
    co_await coexec::resumeOn(b);
    try {
      (void)co_await a.whenTerminated(1h);
    } catch (const std::logic_error&) {
      co_return 2;
    }
    co_return 0;
  });
  CHECK(hopped.get() == 2);
  // A guest coroutine on a's thread (b's task hopped onto a).
  Future<int> guest = b.submit([&]() -> Task<int> {
    co_await coexec::resumeOn(a);
    try {
      co_await a.whenTerminated();
    } catch (const std::logic_error&) {
      co_return 3;
    }
    co_return 0;
  });
  CHECK(guest.get() == 3);
  const coexec::PoolStats stats = coexec::test::finalStats(a);
  CHECK(stats.failedCount == 0);  // each refusal was caught where it was thrown
  coexec::test::checkLedgerAddsUp(stats);
}
