// SPDX-License-Identifier: BSL-1.0
// The scheduler's two lock-free queues on their own, under contention: the
// MPMC ring that takes submissions from outside the pool, and the Chase-Lev
// deque behind each worker's local queue. Every value pushed is taken exactly
// once (a ledger of counts per value), in FIFO order per producer for the
// ring; sizes shrink under the sanitizers.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <latch>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "foundation/MpmcRing.h"
#include "TestSupport.h"
#include "foundation/WorkStealingDeque.h"

using coexec::detail::MpmcRing;
using coexec::detail::WorkStealingDeque;

namespace {

/// Consumers give up after this (a lost value would otherwise hang the test);
/// the ledger then shows what is missing.
constexpr auto kGiveUp = std::chrono::seconds(30);

bool pastDeadline(std::chrono::steady_clock::time_point deadline) {
  return std::chrono::steady_clock::now() >= deadline;
}

/// Values are encoded as pointers (the queues hold TaskCore*): never null.
std::uintptr_t* encode(std::size_t value) { return reinterpret_cast<std::uintptr_t*>((value + 1) * 8); }
std::size_t decode(std::uintptr_t* p) { return reinterpret_cast<std::size_t>(p) / 8 - 1; }

}  // namespace

TEST_CASE("MpmcRing: a full ring refuses, an empty one gives nothing, order is FIFO", "[lockfree][ring]") {
  MpmcRing<std::uintptr_t*> ring(4);
  std::uintptr_t* out = nullptr;
  CHECK_FALSE(ring.tryPop(out));
  for (std::size_t i = 0; i < 4; ++i)
    REQUIRE(ring.tryPush(encode(i)));
  CHECK_FALSE(ring.tryPush(encode(4)));
  CHECK(ring.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    REQUIRE(ring.tryPop(out));
    CHECK(decode(out) == i);
  }
  CHECK_FALSE(ring.tryPop(out));
  CHECK(ring.empty());
  // A claimed slot counts in size() but pops only once published.
  std::size_t pos = 0;
  REQUIRE(ring.tryClaim(pos));
  CHECK(ring.size() == 1);
  CHECK_FALSE(ring.tryPop(out));
  ring.publish(pos, encode(7));
  REQUIRE(ring.tryPop(out));
  CHECK(decode(out) == 7);
}

TEST_CASE("MpmcRing: producers and consumers racing on a small ring lose and duplicate nothing", "[lockfree][ring]") {
  constexpr std::size_t kProducers = 3;
  constexpr std::size_t kConsumers = 3;
  const std::size_t perProducer = coexec::test::stressSize(200'000, 10);
  MpmcRing<std::uintptr_t*> ring(64);  // small: producers often find it full
  std::vector<std::atomic<int>> taken(kProducers * perProducer);
  std::atomic<std::size_t> consumed{0};
  std::atomic<bool> outOfOrder{false};
  const auto deadline = std::chrono::steady_clock::now() + kGiveUp;
  std::latch go(kProducers + kConsumers);
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      go.arrive_and_wait();
      for (std::size_t i = 0; i < perProducer; ++i) {
        while (!ring.tryPush(encode(p * perProducer + i))) {
          if (pastDeadline(deadline)) return;
          std::this_thread::yield();
        }
      }
    });
  }
  for (std::size_t c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&] {
      go.arrive_and_wait();
      // Per producer, the values one consumer sees must increase (FIFO).
      std::vector<std::size_t> last(kProducers, 0);
      std::vector<bool> seen(kProducers, false);
      std::uintptr_t* out = nullptr;
      while (consumed.load() < kProducers * perProducer && !pastDeadline(deadline)) {
        if (!ring.tryPop(out)) {
          std::this_thread::yield();
          continue;
        }
        const std::size_t value = decode(out);
        const std::size_t producer = value / perProducer;
        if (seen[producer] && value <= last[producer]) outOfOrder = true;
        seen[producer] = true;
        last[producer] = value;
        taken[value].fetch_add(1);
        consumed.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads)
    t.join();
  CHECK_FALSE(outOfOrder.load());
  CHECK(std::all_of(taken.begin(), taken.end(), [](const std::atomic<int>& n) { return n.load() == 1; }));
  CHECK(ring.empty());
}

TEST_CASE("WorkStealingDeque: the owner pops newest first, thieves steal oldest first, it grows", "[lockfree][deque]") {
  WorkStealingDeque<std::uintptr_t*> deque(2);
  for (std::size_t i = 0; i < 10; ++i)
    CHECK(deque.push(encode(i)) == i + 1);  // grows from 2 to 16
  std::uintptr_t* out = nullptr;
  REQUIRE(deque.steal(out) == WorkStealingDeque<std::uintptr_t*>::Steal::taken);
  CHECK(decode(out) == 0);
  REQUIRE(deque.pop(out));
  CHECK(decode(out) == 9);
  CHECK(deque.size() == 8);
  for (std::size_t i = 8; i > 0; --i) {
    REQUIRE(deque.pop(out));
    CHECK(decode(out) == i);
  }
  CHECK_FALSE(deque.pop(out));
  CHECK(deque.steal(out) == WorkStealingDeque<std::uintptr_t*>::Steal::empty);
}

TEST_CASE("WorkStealingDeque: an owner pushing and popping against thieves loses and duplicates nothing",
          "[lockfree][deque]") {
  constexpr std::size_t kThieves = 3;
  const std::size_t total = coexec::test::stressSize(400'000, 10);
  WorkStealingDeque<std::uintptr_t*> deque(4);  // small: it grows under the thieves
  std::vector<std::atomic<int>> taken(total);
  std::atomic<std::size_t> done{0};
  const auto deadline = std::chrono::steady_clock::now() + kGiveUp;
  std::latch go(kThieves + 1);
  std::vector<std::thread> thieves;
  for (std::size_t i = 0; i < kThieves; ++i) {
    thieves.emplace_back([&] {
      go.arrive_and_wait();
      std::uintptr_t* out = nullptr;
      while (done.load() < total && !pastDeadline(deadline)) {
        if (deque.steal(out) == WorkStealingDeque<std::uintptr_t*>::Steal::taken) {
          taken[decode(out)].fetch_add(1);
          done.fetch_add(1);
        }
      }
    });
  }
  go.arrive_and_wait();
  // The owner pushes in bursts and pops some back, racing the thieves for
  // the last element again and again.
  std::uintptr_t* out = nullptr;
  std::size_t next = 0;
  while (next < total) {
    const std::size_t burst = std::min<std::size_t>(1 + next % 7, total - next);
    for (std::size_t i = 0; i < burst; ++i)
      deque.push(encode(next++));
    for (std::size_t i = 0; i < burst / 2 + 1; ++i) {
      if (deque.pop(out)) {
        taken[decode(out)].fetch_add(1);
        done.fetch_add(1);
      }
    }
  }
  while (deque.pop(out)) {
    taken[decode(out)].fetch_add(1);
    done.fetch_add(1);
  }
  for (std::thread& t : thieves)
    t.join();
  CHECK(done.load() == total);
  CHECK(std::all_of(taken.begin(), taken.end(), [](const std::atomic<int>& n) { return n.load() == 1; }));
}

namespace {

/// Samples `sizeOf()` while two threads keep a queue near full, each pushing
/// one value and, if the push succeeded, popping one; returns the largest
/// size seen.
template <class Queue, class Push, class Pop, class Size>
std::size_t largestSizeSeen(Queue& queue, Push push, Pop pop, Size sizeOf, std::size_t samples) {
  std::atomic<bool> done{false};
  std::latch go(3);
  std::vector<std::thread> churners;
  for (int i = 0; i < 2; ++i) {
    churners.emplace_back([&] {
      go.arrive_and_wait();
      while (!done.load(std::memory_order_relaxed)) {
        if (push(queue)) pop(queue);
      }
    });
  }
  std::size_t largest = 0;
  go.arrive_and_wait();
  for (std::size_t i = 0; i < samples; ++i)
    largest = std::max(largest, sizeOf(queue));
  done = true;
  for (std::thread& t : churners)
    t.join();
  return largest;
}

}  // namespace

TEST_CASE("MpmcRing: sizeAtOneInstant never reports more than the ring holds while pushes and pops race",
          "[lockfree][ring][stats]") {
  // size() reads head, then tail: a reader delayed between the two counts the
  // pops before it and the pushes after it, and reported up to 11 queued
  // tasks on a bounded(8) pool (stats().queueSize). The ring here holds at
  // most 8 values: 6 prefilled, and each churner pushes one and pops one.
  constexpr std::size_t kCapacity = 8;
  MpmcRing<std::uintptr_t*> ring(kCapacity);
  for (std::size_t i = 0; i < kCapacity - 2; ++i)
    REQUIRE(ring.tryPush(encode(i)));
  std::atomic<std::size_t> pushed{0};
  auto push = [&](MpmcRing<std::uintptr_t*>& r) {
    // A push may fail while a pop of its slot is half done: then no pop.
    if (!r.tryPush(encode(0))) return false;
    pushed.fetch_add(1, std::memory_order_relaxed);
    return true;
  };
  auto pop = [](MpmcRing<std::uintptr_t*>& r) {
    std::uintptr_t* out = nullptr;
    while (!r.tryPop(out)) {
    }
  };
  const std::size_t largest = largestSizeSeen(
      ring, push, pop, [](const MpmcRing<std::uintptr_t*>& r) { return r.sizeAtOneInstant(); },
      coexec::test::stressSize(2'000'000, 10));
  INFO("pushes " << pushed.load());
  CHECK(largest <= kCapacity);
}

TEST_CASE("WorkStealingDeque: sizeAtOneInstant never reports more than the deque holds while thieves race",
          "[lockfree][deque][stats]") {
  // The owner is the reader here (push/pop are owner-only); two thieves steal
  // while the owner refills, so top moves under the reader.
  WorkStealingDeque<std::uintptr_t*> deque(8);
  constexpr std::size_t kMax = 6;
  std::atomic<bool> done{false};
  std::latch go(3);
  std::vector<std::thread> thieves;
  for (int i = 0; i < 2; ++i) {
    thieves.emplace_back([&] {
      go.arrive_and_wait();
      std::uintptr_t* out = nullptr;
      while (!done.load(std::memory_order_relaxed))
        (void)deque.steal(out);
    });
  }
  std::atomic<std::size_t> largest{0};
  std::thread observer([&] {
    go.arrive_and_wait();
    std::size_t seen = 0;
    while (!done.load(std::memory_order_relaxed))
      seen = std::max(seen, deque.sizeAtOneInstant());
    largest = seen;
  });
  const std::size_t rounds = coexec::test::stressSize(2'000'000, 10);
  for (std::size_t i = 0; i < rounds; ++i) {
    if (deque.size() < kMax) deque.push(encode(i));
  }
  done = true;
  for (std::thread& t : thieves)
    t.join();
  observer.join();
  CHECK(largest.load() <= kMax);
}

TEST_CASE("MpmcRing: takeAll takes the rest in one piece while consumers pop: never a value from its middle",
          "[lockfree][ring][takeAll]") {
  // purge() and shutdownNow() take the shared ring's tasks while workers pop
  // without the lock; a worker that took a task from the middle of the batch
  // would run it before the older tasks of the batch (which go to the
  // overflow queue). Each round: 200 values pushed, two consumers popping at
  // most 50 values each, and takeAll as soon as the first value was popped,
  // while the consumers are still at it: its batch must be one run of
  // consecutive values, newer than everything the consumers took, and nothing
  // is lost or taken twice. The consumers' budget makes the batch non-empty
  // whatever the timing (a machine too slow for the consumers to pop at all
  // before takeAll would otherwise leave nothing to check).
  constexpr std::size_t kPerRound = 200;
  constexpr std::size_t kBudget = 50;  // per consumer
  const std::size_t rounds = coexec::test::stressSize(2'000, 10);
  MpmcRing<std::uintptr_t*> ring(256);
  std::size_t next = 0;
  for (std::size_t round = 0; round < rounds; ++round) {
    const std::size_t first = next;
    for (std::size_t i = 0; i < kPerRound; ++i)
      REQUIRE(ring.tryPush(encode(next++)));
    std::vector<std::vector<std::size_t>> popped(2);
    std::atomic<std::size_t> poppedCount{0};
    std::atomic<bool> stop{false};
    std::latch go(3);
    std::vector<std::thread> consumers;
    for (std::size_t c = 0; c < 2; ++c) {
      consumers.emplace_back([&, c] {
        go.arrive_and_wait();
        std::uintptr_t* out = nullptr;
        while (!stop.load(std::memory_order_relaxed) && popped[c].size() < kBudget) {
          if (ring.tryPop(out)) {
            popped[c].push_back(decode(out));
            poppedCount.fetch_add(1, std::memory_order_release);
          }
        }
      });
    }
    go.arrive_and_wait();
    while (poppedCount.load(std::memory_order_acquire) == 0) {  // the ring holds 200: a consumer pops soon
      std::this_thread::yield();
    }
    std::vector<std::size_t> batch;
    ring.takeAll([&batch](std::uintptr_t* value) noexcept { batch.push_back(decode(value)); });
    stop = true;
    for (std::thread& t : consumers)
      t.join();
    INFO("round " << round);
    std::vector<std::size_t> all(batch);
    for (const auto& values : popped)
      all.insert(all.end(), values.begin(), values.end());
    std::sort(all.begin(), all.end());
    REQUIRE(all.size() == kPerRound);  // nothing lost, nothing twice
    for (std::size_t i = 0; i < kPerRound; ++i)
      REQUIRE(all[i] == first + i);
    REQUIRE(batch.size() >= kPerRound - 2 * kBudget);  // the consumers left at least this much
    for (std::size_t i = 1; i < batch.size(); ++i)
      REQUIRE(batch[i] == batch[i - 1] + 1);  // one run, in order
    for (const auto& values : popped) {
      for (std::size_t v : values)
        REQUIRE(v < batch.front());  // consumers took only older values
    }
  }
}
