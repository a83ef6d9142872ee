// SPDX-License-Identifier: BSL-1.0
// invokeAll under a storm: 1,000 rounds of invokeAll over 1..32 tasks, some
// failing at random, some slow and watching their token, awaited three ways:
// from the test thread through syncWait; from a coroutine on another pool
// whose Future the test cancels at a random moment; and with a timeout on a
// ManualClock pool that the test advances at a random moment. On every
// round:
//
// - structured: when invokeAll returns or throws, no task of the round is
//   running, and none starts afterwards;
// - a round that returns has every task run exactly once, results in input
//   order; one that throws rethrows one of its own tasks' errors, or
//   OperationCancelled / TimeoutError when the awaiting task was cancelled /
//   the deadline passed;
// - no task runs twice.
//
// At the end every task handed to a pool ran or was cancelled before it
// started (the ledger adds up and the bodies that ran match the pools'
// completed + failed + cancelled-in-body counts), and each outcome the test
// claims to cover occurred. A fixed seed: a failure reproduces.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "Assertions.h"
#include <fmt/format.h>

#include "TestSupport.h"
#include "coexec/coexec.h"

using namespace std::chrono_literals;

using coexec::CancellationToken;
using coexec::Future;
using coexec::ManualClock;
using coexec::OperationCancelled;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::TimeoutError;
using coexec::WorkQueue;
using coexec::test::checkLedgerAddsUp;
using coexec::test::kLong;

namespace {

constexpr std::size_t kRounds = 1'000;
constexpr std::size_t kMaxTasks = 32;

/// A task's own failure: which round and task threw it.
struct StormError {
  std::size_t round;
  std::size_t task;
};

/// What one round's task bodies saw.
struct Round {
  std::atomic<int> inFlight{0};
  std::atomic<bool> closed{false};  // invokeAll has returned or thrown
  std::array<std::atomic<int>, kMaxTasks> ran{};
};

struct Tally {
  std::atomic<std::uint64_t> bodies{0};           // bodies that started
  std::atomic<std::uint64_t> cancelledInBody{0};  // ... and threw OperationCancelled
  std::atomic<std::uint64_t> violations{0};       // a body started after its round closed, or ran twice
};

enum class Kind { quick, failing, slow };

struct Plan {
  std::size_t round;
  std::vector<Kind> kinds;
};

using Body = std::function<int(CancellationToken)>;

std::vector<Body> makeTasks(const Plan& plan, Round& round, Tally& tally) {
  std::vector<Body> tasks;
  for (std::size_t i = 0; i < plan.kinds.size(); ++i) {
    tasks.push_back([&round, &tally, kind = plan.kinds[i], r = plan.round, i](CancellationToken token) -> int {
      tally.bodies.fetch_add(1, std::memory_order_relaxed);
      if (round.closed.load(std::memory_order_acquire)) tally.violations.fetch_add(1);
      if (round.ran[i].fetch_add(1, std::memory_order_relaxed) != 0) tally.violations.fetch_add(1);
      round.inFlight.fetch_add(1, std::memory_order_acq_rel);
      struct Leave {
        Round& round;
        ~Leave() { round.inFlight.fetch_sub(1, std::memory_order_acq_rel); }
      } leave{round};
      switch (kind) {
        case Kind::quick: break;
        case Kind::failing: throw StormError{r, i};
        case Kind::slow:
          for (int spin = 0; spin < 64; ++spin) {
            if (token.isCancellationRequested()) {
              tally.cancelledInBody.fetch_add(1, std::memory_order_relaxed);
              throw OperationCancelled();
            }
            std::this_thread::yield();
          }
          break;
      }
      return static_cast<int>(r * 1000 + i);
    });
  }
  return tasks;
}

enum class Outcome { succeeded, failed, cancelled, timedOut, count };

struct Outcomes {
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(Outcome::count)> counts{};
  void add(Outcome o) { counts[static_cast<std::size_t>(o)].fetch_add(1); }
  std::uint64_t of(Outcome o) const { return counts[static_cast<std::size_t>(o)].load(); }
};

/// Awaits invokeAll (with `timeout` if non-zero) on `pool` and checks the
/// round's invariants the moment it returns or throws. Returns the outcome;
/// a check that fails is recorded in `problems`.
Task<Outcome> awaitRound(ThreadPoolExecutor& pool, std::vector<Body>& tasks, const Plan& plan, Round& round,
                         std::chrono::milliseconds timeout, std::atomic<std::uint64_t>& problems) {
  Outcome outcome = Outcome::succeeded;
  std::vector<int> results;
  try {
    if (timeout.count() > 0) {
      results = co_await pool.invokeAll(tasks, timeout);
    } else {
      results = co_await pool.invokeAll(tasks);
    }
  } catch (const StormError& e) {
    outcome = Outcome::failed;
    if (e.round != plan.round || plan.kinds[e.task] != Kind::failing) problems.fetch_add(1);
  } catch (const OperationCancelled&) {
    outcome = Outcome::cancelled;
  } catch (const TimeoutError&) {
    outcome = Outcome::timedOut;
  } catch (...) {
    problems.fetch_add(1);
    outcome = Outcome::failed;
  }
  if (round.inFlight.load(std::memory_order_acquire) != 0) problems.fetch_add(1);  // structured
  round.closed.store(true, std::memory_order_release);
  if (outcome == Outcome::succeeded) {
    if (results.size() != plan.kinds.size()) problems.fetch_add(1);
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (results[i] != static_cast<int>(plan.round * 1000 + i)) problems.fetch_add(1);
      if (round.ran[i].load(std::memory_order_relaxed) != 1) problems.fetch_add(1);
    }
  }
  co_return outcome;
}

ThreadPoolOptions stormPool(const char* name, ManualClock* clock = nullptr) {
  ThreadPoolOptions options;
  options.name = name;
  options.corePoolSize = 2;
  options.maximumPoolSize = 2;
  options.workQueue = WorkQueue::bounded(1024);
  options.clock = clock;
  return options;
}

}  // namespace

TEST_CASE(
    "1,000 rounds of invokeAll with random failures, cancellations and timeouts: structured, and every task "
    "accounted for",
    "[stress][invokeAll]") {
  std::mt19937 rng(20261201);
  auto chance = [&rng](int percent) { return static_cast<int>(rng() % 100) < percent; };
  Tally tally;
  Outcomes outcomes;
  std::atomic<std::uint64_t> problems{0};
  std::uint64_t handedOrNot = 0;  // tasks planned in all
  std::vector<std::unique_ptr<Round>> rounds;
  ManualClock clock;
  ThreadPoolExecutor driver(stormPool("driver"));
  ThreadPoolExecutor pool(stormPool("storm"));
  ThreadPoolExecutor timed(stormPool("timed", &clock));

  for (std::size_t r = 0; r < kRounds; ++r) {
    Plan plan{r, {}};
    const std::size_t n = 1 + rng() % kMaxTasks;
    for (std::size_t i = 0; i < n; ++i)
      plan.kinds.push_back(chance(3) ? Kind::failing : chance(25) ? Kind::slow : Kind::quick);
    handedOrNot += n;
    rounds.push_back(std::make_unique<Round>());
    Round& round = *rounds.back();
    std::vector<Body> tasks = makeTasks(plan, round, tally);
    const int mode = static_cast<int>(rng() % 10);
    if (mode < 5) {
      // From the test thread.
      outcomes.add(syncWait(awaitRound(pool, tasks, plan, round, 0ms, problems)));
    } else if (mode < 8) {
      // From a coroutine on the driver, cancelled at a random moment (or not).
      Future<Outcome> outer = driver.submit([&]() { return awaitRound(pool, tasks, plan, round, 0ms, problems); });
      const int wait = static_cast<int>(rng() % 40);
      if (wait < 30) {
        for (int y = 0; y < wait; ++y)
          std::this_thread::yield();
        (void)outer.cancel();
      }
      REQUIRE(outer.waitFor(kLong));
      try {
        outcomes.add(outer.get());
      } catch (const OperationCancelled&) {
        outcomes.add(Outcome::cancelled);  // cancelled before it ran, or its value dropped
      }
    } else {
      // With a deadline on the ManualClock, advanced at a random moment.
      Future<Outcome> outer = driver.submit([&]() { return awaitRound(timed, tasks, plan, round, 1ms, problems); });
      const int wait = static_cast<int>(rng() % 40);
      for (int y = 0; y < wait; ++y)
        std::this_thread::yield();
      const auto limit = std::chrono::steady_clock::now() + kLong;
      while (!outer.isDone() && std::chrono::steady_clock::now() < limit) {
        clock.advance(1ms);
        std::this_thread::yield();
      }
      REQUIRE(outer.waitFor(kLong));
      outcomes.add(outer.get());
    }
    // Whatever the outcome: nothing of this round runs any more.
    CHECK(round.inFlight.load() == 0);
  }

  for (ThreadPoolExecutor* p : {&pool, &timed, &driver}) {
    p->shutdown();
    REQUIRE(p->awaitTermination(kLong));
  }
  INFO(fmt::format("outcomes: {} succeeded, {} failed, {} cancelled, {} timed out; {} bodies of {} tasks planned",
                   outcomes.of(Outcome::succeeded), outcomes.of(Outcome::failed), outcomes.of(Outcome::cancelled),
                   outcomes.of(Outcome::timedOut), tally.bodies.load(), handedOrNot));
  CHECK(problems.load() == 0);
  CHECK(tally.violations.load() == 0);
  // Every task handed to a pool ran, or was cancelled before it started.
  std::uint64_t handed = 0;
  std::uint64_t ranOrCancelledInBody = 0;
  for (ThreadPoolExecutor* p : {&pool, &timed}) {
    const coexec::PoolStats stats = p->stats();
    checkLedgerAddsUp(stats);
    CHECK(stats.rejectedCount == 0);
    handed += stats.taskCount;
    ranOrCancelledInBody += stats.completedTaskCount + stats.failedCount;
  }
  CHECK(handed <= handedOrNot);  // a round that stopped early handed the rest over to nobody
  CHECK(tally.bodies.load() == ranOrCancelledInBody + tally.cancelledInBody.load());
  // Each outcome the test covers occurred.
  CHECK(outcomes.of(Outcome::succeeded) > 0);
  CHECK(outcomes.of(Outcome::failed) > 0);
  CHECK(outcomes.of(Outcome::cancelled) > 0);
  CHECK(outcomes.of(Outcome::timedOut) > 0);
}
