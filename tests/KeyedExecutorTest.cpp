// SPDX-License-Identifier: BSL-1.0
#include "coexec/KeyedExecutor.h"

// KeyedExecutor: per-key order and no overlap across many keys, different
// lanes in parallel (a slow key blocks only its own lane), stable routing,
// Futures, coroutine tasks, and lanes == 0.

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "Assertions.h"

#include "CoroutineTestSupport.h"
#include "TestSupport.h"
#include "coexec/Sleep.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using coexec::Future;
using coexec::KeyedExecutor;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::Counter;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::OpenOnExit;
using coexec::test::stressSize;
using coexec::test::throwsA;

namespace {

ThreadPoolOptions keyedPool(std::size_t threads) {
  ThreadPoolOptions options;
  options.name = "keyed-pool";
  options.corePoolSize = threads;
  options.maximumPoolSize = threads;
  options.workQueue = WorkQueue::bounded(4096);
  return options;
}

constexpr int kKeys = 64;

/// Per key: tasks in flight, and the last sequence number seen.
struct KeyLedger {
  std::array<std::atomic<int>, kKeys> inFlight{};
  std::array<std::atomic<std::int64_t>, kKeys> last{};
  std::atomic<int> overlaps{0};
  std::atomic<int> outOfOrder{0};
  std::atomic<std::int64_t> ran{0};

  KeyLedger() {
    for (auto& l : last)
      l.store(-1);
  }
  void run(int key, std::int64_t seq) {
    const auto k = static_cast<std::size_t>(key);
    if (inFlight[k].fetch_add(1) != 0) overlaps.fetch_add(1);
    if (last[k].load(std::memory_order_relaxed) != seq - 1) outOfOrder.fetch_add(1);
    last[k].store(seq, std::memory_order_relaxed);
    inFlight[k].fetch_sub(1);
    ran.fetch_add(1, std::memory_order_relaxed);
  }
};

}  // namespace

TEST_CASE("tasks of one key run in submission order and never overlap, across many keys and tasks",
          "[lanes][keyed][stress]") {
  ThreadPoolExecutor pool(keyedPool(4));
  KeyedExecutor keyed(pool, 16);  // fewer lanes than keys: keys share lanes, and keep their order
  KeyLedger ledger;
  const auto total = static_cast<std::int64_t>(stressSize(100'000, 1));
  std::array<std::int64_t, kKeys> next{};
  // Two submitting threads, each with its own keys: order is per submitter.
  auto produce = [&](int firstKey) {
    for (std::int64_t i = 0; i < total / 2; ++i) {
      const int key = firstKey + static_cast<int>(i % (kKeys / 2));
      const std::int64_t seq = next[static_cast<std::size_t>(key)]++;
      keyed.execute(key, [&ledger, key, seq] { ledger.run(key, seq); });
    }
  };
  {
    std::jthread other([&] { produce(kKeys / 2); });
    produce(0);
  }
  REQUIRE(coexec::test::eventually([&] { return ledger.ran.load() == total; }));
  CHECK(ledger.overlaps.load() == 0);
  CHECK(ledger.outOfOrder.load() == 0);
  for (int k = 0; k < kKeys; ++k)
    CHECK(ledger.last[static_cast<std::size_t>(k)].load() == next[static_cast<std::size_t>(k)] - 1);
  // Every task went through the pool once: the ledger adds up once the last
  // one is counted.
  CHECK(coexec::test::eventually([&] {
    const coexec::PoolStats s = pool.stats();
    return s.taskCount == static_cast<std::uint64_t>(total) && coexec::test::ledgerAccountedFor(s) == s.taskCount;
  }));
}

TEST_CASE("a slow key blocks only its own lane: other lanes run meanwhile", "[lanes][keyed]") {
  Gate gate;
  ThreadPoolExecutor pool(keyedPool(2));
  OpenOnExit opener(gate);
  KeyedExecutor keyed(pool, 8);
  const std::string slow = "slow-account";
  std::string fast = "fast-account";
  for (int i = 0; keyed.laneIndex(fast) == keyed.laneIndex(slow); ++i)
    fast = "fast-account-" + std::to_string(i);
  Counter started;
  Future<void> blocked = keyed.submit(slow, [&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  std::atomic<bool> slowSecondRan{false};
  Future<void> behind = keyed.submit(slow, [&] { slowSecondRan = true; });
  std::vector<Future<int>> others;
  for (int i = 0; i < 100; ++i)
    others.push_back(keyed.submit(fast, [i] { return i; }));
  for (int i = 0; i < 100; ++i)
    REQUIRE(others[static_cast<std::size_t>(i)].get(kLong) == i);  // while the slow key is still blocked
  CHECK_FALSE(slowSecondRan.load());
  CHECK(keyed.lane(slow).queued() == 1);
  gate.open();
  behind.get();
  blocked.get();
  CHECK(slowSecondRan.load());
}

TEST_CASE("a key always goes to the same lane, and keys spread over the lanes", "[lanes][keyed]") {
  ThreadPoolExecutor pool(keyedPool(1));
  KeyedExecutor keyed(pool, 64);
  CHECK(keyed.laneCount() == 64);
  CHECK(&keyed.pool() == &pool);
  std::array<int, 64> perLane{};
  for (std::uint64_t key = 0; key < 64 * 64; ++key) {
    CHECK(keyed.laneIndex(key) == keyed.laneIndex(key));
    CHECK(&keyed.lane(key) == &keyed.lane(key));
    ++perLane[keyed.laneIndex(key)];
  }
  // Consecutive integers (whose std::hash is the identity) are mixed: every
  // lane gets some, none gets more than three times its share.
  for (int n : perLane) {
    CHECK(n > 0);
    CHECK(n < 3 * 64);
  }
  // Values that differ only in their high bits are spread too.
  std::array<int, 64> highBits{};
  for (std::uint64_t i = 0; i < 64 * 64; ++i)
    ++highBits[keyed.laneIndex(i << 40)];
  for (int n : highBits)
    CHECK(n > 0);
}

TEST_CASE("a keyed task's Future carries its value or exception, coroutine tasks keep their key's order",
          "[lanes][keyed][future]") {
  ThreadPoolExecutor pool(keyedPool(2));
  KeyedExecutor keyed(pool, 4);
  std::vector<int> seen;  // touched only by key 1's tasks, one at a time
  Future<int> a = keyed.submit(1, [&]() -> Task<int> {
    co_await coexec::sleepFor(std::chrono::milliseconds(2));
    seen.push_back(1);
    co_return 10;
  });
  Future<int> b = keyed.submit(1, [&] {
    seen.push_back(2);
    return 20;
  });
  Future<int> failing = keyed.submit(2, []() -> int { throw std::runtime_error("bad key"); });
  CHECK(a.get() == 10);
  CHECK(b.get() == 20);
  CHECK(seen == std::vector<int>{1, 2});
  CHECK(throwsA<std::runtime_error>([&] { (void)failing.get(); }));
}

TEST_CASE("a KeyedExecutor with 0 lanes is refused with std::invalid_argument", "[lanes][keyed][config]") {
  ThreadPoolExecutor pool(keyedPool(1));
  CHECK_THROWS_AS(KeyedExecutor(pool, 0), std::invalid_argument);
  CHECK_THROWS_WITH(KeyedExecutor(pool, 0), Catch::Contains("lanes is 0"));
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("a keyed submit of an empty callable throws what SerialExecutor::submit throws, and the lane goes on",
          "[lanes][keyed][bad-input]") {
  ThreadPoolExecutor pool(keyedPool(1));
  KeyedExecutor keyed(pool, 4);
  const std::function<int()> empty;
  CHECK_THROWS_AS((void)keyed.submit(7, empty), std::invalid_argument);
  CHECK_THROWS_WITH((void)keyed.submit(7, empty),
                    "coexec::SerialExecutor::submit: the task is empty (an empty std::function or a null pointer)");
  CHECK_THROWS_AS(keyed.execute(7, empty), std::invalid_argument);
  CHECK(keyed.submit(7, [] { return 3; }).get() == 3);
}

TEST_CASE("a keyed submit after the pool's shutdown never throws RejectedExecution: its Future reports it",
          "[lanes][keyed][shutdown][bad-input]") {
  ThreadPoolExecutor pool(keyedPool(1));
  KeyedExecutor keyed(pool, 4);
  pool.shutdown();
  std::atomic<bool> ran{false};
  Future<int> refused = keyed.submit(std::string("key"), [&ran] {
    ran = true;
    return 1;
  });
  REQUIRE(refused.isDone());
  CHECK_THROWS_AS(refused.get(), coexec::RejectedExecution);
  CHECK_FALSE(ran.load());
  CHECK(pool.stats().rejectedCount == 1);
}
