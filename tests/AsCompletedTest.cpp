// SPDX-License-Identifier: BSL-1.0
#include "coexec/AsCompleted.h"

// asCompleted(futures): co_await next() yields the inputs in the order they
// settle, each exactly once (already settled, failed and cancelled ones
// included), then std::nullopt; the awaiting task's cancellation cancels the
// inputs and throws OperationCancelled once they have settled; dropping an
// AsCompleted never blocks.

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "Assertions.h"

#include "CombinatorTestSupport.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using coexec::AsCompleted;
using coexec::asCompleted;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::test::Children;
using coexec::test::Counter;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::OpenOnExit;
using coexec::test::taggedPool;
using coexec::test::throwsA;

TEST_CASE("asCompleted yields the Futures in the order their tasks finish", "[asCompleted]") {
  std::vector<std::unique_ptr<Gate>> gates;
  for (int i = 0; i < 4; ++i)
    gates.push_back(std::make_unique<Gate>());
  ThreadPoolExecutor pool(taggedPool("asc", 4, 4, WorkQueue::bounded(16)));
  struct OpenAll {
    std::vector<std::unique_ptr<Gate>>& gates;
    ~OpenAll() {
      for (auto& g : gates)
        g->open();
    }
  } guard{gates};
  std::vector<Future<int>> futures;
  for (int i = 0; i < 4; ++i) {
    futures.push_back(pool.submit([&gates, i] {
      gates[static_cast<std::size_t>(i)]->wait();
      return i;
    }));
  }
  const auto run = [&]() -> Task<std::vector<int>> {
    auto completions = asCompleted(std::move(futures));
    std::vector<int> order;
    for (int next : {2, 0, 3, 1}) {
      gates[static_cast<std::size_t>(next)]->open();  // only this one can finish now
      std::optional<Future<int>> done = co_await completions.next();
      if (!done) co_return order;
      order.push_back(done->get());
    }
    if (co_await completions.next()) order.push_back(-1);  // nothing left
    co_return order;
  };
  CHECK(syncWait(run()) == std::vector<int>{2, 0, 3, 1});
  for (const Future<int>& f : futures)
    CHECK_FALSE(f.valid());  // taken over
}

TEST_CASE("asCompleted yields every input exactly once: settled before, failed, cancelled and running ones",
          "[asCompleted]") {
  Children children;
  ThreadPoolExecutor pool(taggedPool("asc", 2, 2, WorkQueue::bounded(16)));
  OpenOnExit guard(children.release);
  std::vector<Future<int>> futures;
  futures.push_back(pool.submit(children.cooperative()));  // 0: cancelled by cancelRemaining() below
  futures.push_back(pool.submit([] { return 1; }));        // 1: settled before asCompleted
  futures.push_back(pool.submit([]() -> int { throw std::runtime_error("2 failed"); }));
  futures.push_back(pool.submit([] { return 3; }));
  futures[1].wait();
  futures[2].wait();
  futures[3].wait();
  Gate queuedGate;
  OpenOnExit queuedGuard(queuedGate);
  REQUIRE(children.started.waitFor(1));
  // 4 and 5 queue behind the cooperative task and a blocker; 5 is cancelled before asCompleted.
  Counter blockerRunning;
  futures.push_back(pool.submit([&] {
    blockerRunning.arrive();
    queuedGate.wait();
    return 4;
  }));
  futures.push_back(pool.submit([] { return 5; }));
  REQUIRE(blockerRunning.waitFor(1));
  REQUIRE(futures[5].cancel());
  const auto run = [&]() -> Task<std::vector<std::string>> {
    AsCompleted<int> completions = asCompleted(futures);  // an lvalue range: its Futures are taken all the same
    std::vector<std::string> seen;
    // The four that settled before come first, in input order.
    for (int i = 0; i < 4; ++i) {
      std::optional<Future<int>> done = co_await completions.next();
      try {
        seen.push_back(std::to_string(done->get()));
      } catch (const OperationCancelled&) {
        seen.push_back("cancelled");
      } catch (const std::runtime_error& e) {
        seen.push_back(e.what());
      }
    }
    if (completions.remaining() != 2) co_return seen;
    if (completions.cancelRemaining() != 2) co_return seen;  // both run: their tokens are cancelled
    queuedGate.open();
    children.release.open();
    while (std::optional<Future<int>> done = co_await completions.next()) {
      try {
        seen.push_back(std::to_string(done->get()));
      } catch (const OperationCancelled&) {
        seen.push_back("cancelled");
      }
    }
    co_return seen;
  };
  const std::vector<std::string> seen = syncWait(run());
  REQUIRE(seen.size() == 6);
  CHECK(std::vector<std::string>(seen.begin(), seen.begin() + 4) ==
        std::vector<std::string>{"1", "2 failed", "3", "cancelled"});
  // 4 ignores its token: its value is dropped, as for any task cancelled while it runs.
  CHECK(std::vector<std::string>(seen.begin() + 4, seen.end()) == std::vector<std::string>{"cancelled", "cancelled"});
}

TEST_CASE("asCompleted of no Futures yields std::nullopt at once, an empty Future is refused", "[asCompleted]") {
  ThreadPoolExecutor pool(taggedPool("asc", 1, 1, WorkQueue::bounded(8)));
  const auto run = [&]() -> Task<bool> {
    auto completions = asCompleted(std::vector<Future<int>>());
    co_return !(co_await completions.next()).has_value();
  };
  CHECK(syncWait(run()));
  std::vector<Future<int>> futures;
  futures.push_back(pool.submit([] { return 1; }));
  futures.emplace_back();
  CHECK(throwsA<std::invalid_argument>([&] { (void)asCompleted(futures); }));
  CHECK(futures[0].valid());  // nothing was taken
  CHECK(futures[0].get() == 1);
}

TEST_CASE(
    "cancelling the task awaiting next() cancels the inputs, OperationCancelled once they have settled, then "
    "each is still yielded once",
    "[asCompleted][cancel]") {
  Children children;
  std::atomic<int> yieldedAfter{-1};
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("asc", 2, 2, WorkQueue::bounded(16)));
  OpenOnExit guard(children.release);
  std::vector<Future<int>> futures;
  futures.push_back(pool.submit(children.cooperative()));
  futures.push_back(pool.submit(children.cooperative()));
  Counter outerStarted;
  Future<int> outer = driver.submit([&]() -> Task<int> {
    auto completions = asCompleted(std::move(futures));
    outerStarted.arrive();
    bool cancelled = false;
    try {
      (void)co_await completions.next();
    } catch (const OperationCancelled&) {
      cancelled = true;
    }
    if (!cancelled) co_return 0;
    int count = 0;  // both have settled: drained without waiting
    for (std::size_t i = completions.remaining(); i > 0; --i) {
      std::optional<Future<int>> done = co_await completions.next();
      if (done && done->isDone()) ++count;
    }
    yieldedAfter = count;
    throw OperationCancelled();
  });
  REQUIRE(children.started.waitFor(2));
  REQUIRE(outerStarted.waitFor(1));  // cancelled before it starts, it would never take the Futures
  CHECK(outer.cancel());
  REQUIRE(children.cancelled.waitFor(2));
  CHECK_FALSE(outer.isDone());
  children.release.open();
  CHECK(throwsA<OperationCancelled>([&] { (void)outer.get(); }));
  CHECK(yieldedAfter.load() == 2);
}

TEST_CASE("cancelRemaining from another thread while next() waits: every input is still yielded, cancelled",
          "[asCompleted][cancel]") {
  Children children;
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("asc", 2, 2, WorkQueue::bounded(16)));
  OpenOnExit guard(children.release);
  std::vector<Future<int>> futures;
  futures.push_back(pool.submit(children.cooperative()));
  futures.push_back(pool.submit(children.cooperative()));
  AsCompleted<int> completions = asCompleted(std::move(futures));
  Future<int> consumer = driver.submit([&]() -> Task<int> {
    int cancelled = 0;
    while (std::optional<Future<int>> done = co_await completions.next()) {
      try {
        (void)done->get();
      } catch (const OperationCancelled&) {
        ++cancelled;
      }
    }
    co_return cancelled;
  });
  REQUIRE(children.started.waitFor(2));
  driver.submit([] {}).get();  // the driver's one thread is free: the consumer waits in next()
  children.release.open();     // the inputs return as soon as they see the cancellation
  CHECK(completions.cancelRemaining() == 2);
  CHECK(consumer.get() == 2);
  CHECK(completions.remaining() == 0);
}

TEST_CASE("dropping an AsCompleted with inputs still running never blocks and cancels nothing", "[asCompleted]") {
  Gate gate;
  std::atomic<int> finished{0};
  ThreadPoolExecutor pool(taggedPool("asc", 2, 2, WorkQueue::bounded(8)));
  OpenOnExit guard(gate);
  std::vector<Future<int>> futures;
  for (int i = 0; i < 2; ++i) {
    futures.push_back(pool.submit([&gate, &finished, i] {
      gate.wait();
      finished.fetch_add(1);
      return i;
    }));
  }
  { AsCompleted<int> completions = asCompleted(std::move(futures)); }
  gate.open();
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(finished.load() == 2);
  CHECK(pool.stats().completedTaskCount == 2);
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE(
    "asCompleted names an empty Future it refuses, and next() on a moved-from AsCompleted throws std::logic_error",
    "[asCompleted][bad-input]") {
  ThreadPoolExecutor pool(taggedPool("asc", 1, 1, WorkQueue::bounded(8)));
  std::vector<Future<int>> withEmpty(1);
  CHECK_THROWS_AS((void)asCompleted(withEmpty), std::invalid_argument);
  CHECK_THROWS_WITH((void)asCompleted(withEmpty),
                    "coexec::asCompleted: a Future is empty (default-constructed or moved from)");
  std::vector<Future<int>> futures;
  futures.push_back(pool.submit([] { return 1; }));
  AsCompleted<int> completions = asCompleted(futures);
  AsCompleted<int> moved = std::move(completions);
  // NOLINTNEXTLINE(bugprone-use-after-move): the misuse under test
  CHECK_THROWS_AS((void)completions.next(), std::logic_error);
  CHECK_THROWS_WITH((void)completions.next(), "coexec::AsCompleted::next: this AsCompleted was moved from");
  CHECK(completions.remaining() == 0);  // the other members answer for an empty one
  CHECK(completions.size() == 0);
  CHECK(completions.cancelRemaining() == 0);
  const auto run = [&]() -> Task<int> {
    std::optional<Future<int>> done = co_await moved.next();
    co_return done ? done->get() : -1;
  };
  CHECK(syncWait(run()) == 1);
}
