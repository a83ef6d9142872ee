// SPDX-License-Identifier: BSL-1.0
#include "coexec/Sleep.h"

// Cancelling a sleep: a coroutine running for a pool task (and every Task it
// awaits) has the task's token; when it is cancelled (Future::cancel,
// shutdownNow, a cancelled parent) the sleep ends at once with
// OperationCancelled and its timer is removed; a token cancelled already
// ends any sleep without suspending.
// Upper bounds on elapsed times are kLong, only so that a bug cannot hang.

#include "SleepTestSupport.h"

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

TEST_CASE("shutdownNow cancels every sleeping coroutine task on every worker, after others ended out of order",
          "[sleep][cancel][shutdown]") {
  // The pool keeps the coroutine tasks that have a token in one list per
  // worker; a task leaves its list when it ends, whichever worker ends it.
  // Tasks spread over four workers get their token at their start (they
  // take one) or from their sleep; a third of them is cancelled first, in
  // an order unlike their start, so that entries leave from the middle of
  // the lists. shutdownNow() must then reach every task still asleep: one
  // it missed would sleep for an hour, and awaitTermination() would fail.
  constexpr int kTasks = 48;
  Counter sleeping;
  Wake wake;
  ThreadPoolExecutor pool(taggedPool("listed", 4, 4, WorkQueue::unbounded()));
  StopOnExit stop(pool);
  TimerService& service = sleepServiceOf(pool);
  const std::size_t timersBefore = service.pendingCount();

  std::vector<Future<void>> tasks;
  for (int i = 0; i < kTasks; ++i) {
    if (i % 2 == 0) {
      // Takes a token: listed from its start, not from its sleep.
      tasks.push_back(pool.submit([&sleeping, &wake](CancellationToken /*token*/) -> Task<void> {
        return recordedSleep(1h, sleeping, wake, "listed");
      }));
    } else {
      tasks.push_back(
          pool.submit([&sleeping, &wake]() -> Task<void> { return recordedSleep(1h, sleeping, wake, "listed"); }));
    }
  }
  REQUIRE(sleeping.waitFor(kTasks));
  REQUIRE(eventually([&] { return service.pendingCount() == timersBefore + kTasks; }));

  int cancelledFirst = 0;
  for (int i = kTasks - 2; i >= 0; i -= 3) {  // every third, from the newest
    CHECK(tasks[static_cast<std::size_t>(i)].cancel());
    ++cancelledFirst;
  }
  REQUIRE(eventually([&] { return wake.cancelled.load() == cancelledFirst; }));
  REQUIRE(eventually([&] { return service.pendingCount() == timersBefore + kTasks - cancelledFirst; }));

  CHECK(pool.shutdownNow().empty());  // none queued: all are asleep, in flight
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(wake.cancelled == kTasks);
  CHECK(wake.normally == 0);
  CHECK_FALSE(wake.offPool);
  CHECK(service.pendingCount() == timersBefore);
  for (Future<void>& task : tasks)
    CHECK(throwsA<OperationCancelled>([&] { task.get(); }));
  const coexec::PoolStats stats = pool.stats();
  CHECK(stats.cancelledCount == kTasks);
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
