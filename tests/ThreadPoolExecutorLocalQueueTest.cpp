// SPDX-License-Identifier: BSL-1.0
// A pool's local queues and its lock-free ring: a pool thread's own submissions run newest first or
// are stolen oldest first, shutdownNow's order, FIFO through the ring, purge racing submissions.
#include "coexec/ThreadPoolExecutor.h"

// How a task reaches the pool's threads (core -> queue -> extra thread ->
// reject) is in ThreadPoolExecutorRoutingTest.cpp.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "AdmissionTestSupport.h"
#include "TestSupport.h"

namespace coexec::test {
namespace {

constexpr std::size_t kMaxSize = std::numeric_limits<std::size_t>::max();

// ---- local queues and the lock-free ring -----------------------------------------

/// The order in which tasks ran, by their ids. Thread-safe.
class RunOrder {
 public:
  void add(int id) {
    std::lock_guard lock(mutex_);
    ids_.push_back(id);
  }
  std::vector<int> ids() const {
    std::lock_guard lock(mutex_);
    return ids_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<int> ids_;
};

/// The queues with local queues for the pool's own submissions.
struct LocalQueueConfig {
  const char* name;
  WorkQueue queue;
};

TEST_CASE("tasks a pool thread submits go to its local queue, which it runs newest first", "[executor][local]") {
  const LocalQueueConfig config = GENERATE(LocalQueueConfig{"bounded(16)", WorkQueue::bounded(16)},
                                           LocalQueueConfig{"unbounded", WorkQueue::unbounded()});
  INFO(config.name);
  RunOrder order;
  Counter ran;
  std::atomic<std::size_t> localSeen{0};
  std::atomic<std::size_t> sharedSeen{kMaxSize};
  ThreadPoolExecutor pool(poolOptions("lifo", 1, 1, config.queue));
  StopOnFailure stopOnFailure(pool);
  pool.execute([&] {
    for (int id = 1; id <= 4; ++id) {
      pool.execute([&order, &ran, id] {
        order.add(id);
        ran.arrive();
      });
    }
    const PoolStats s = pool.stats();
    localSeen = s.localQueueSize;
    sharedSeen = s.queueSize;
  });
  REQUIRE(ran.waitFor(4));
  CHECK(localSeen.load() == 4);
  CHECK(sharedSeen.load() == 0);
  CHECK(order.ids() == std::vector<int>{4, 3, 2, 1});
}

TEST_CASE("an idle thread steals from a busy thread's local queue oldest first", "[executor][local][steal]") {
  Gate ownerGate;
  Counter forked;
  Counter ran;
  RunOrder order;
  ThreadSet thieves;
  std::atomic<std::thread::id> owner{};
  ThreadPoolExecutor pool(poolOptions("steal", 2, 2, WorkQueue::bounded(16)));
  REQUIRE(pool.prestartAllCoreThreads() == 2);
  OpenOnExit release(ownerGate);
  pool.execute([&] {
    owner = std::this_thread::get_id();
    for (int id = 1; id <= 4; ++id) {
      pool.execute([&, id] {
        thieves.addCurrent();
        order.add(id);
        ran.arrive();
      });
    }
    forked.arrive();
    ownerGate.wait();  // the owner stays busy: only the other thread can run them
  });
  REQUIRE(forked.waitFor(1));
  REQUIRE(ran.waitFor(4));
  CHECK(order.ids() == std::vector<int>{1, 2, 3, 4});
  CHECK(thieves.size() == 1);
  CHECK_FALSE(thieves.contains(owner.load()));
  ownerGate.open();
}

TEST_CASE("shutdownNow returns the shared queue's tasks in order, then the local queues', oldest first",
          "[executor][local][shutdown]") {
  const LocalQueueConfig config = GENERATE(LocalQueueConfig{"bounded(16)", WorkQueue::bounded(16)},
                                           LocalQueueConfig{"unbounded", WorkQueue::unbounded()});
  INFO(config.name);
  // The priority tags each task (the FIFO queues ignore it for ordering, and
  // PendingTask::priority() reports it).
  Gate gate;
  Counter forked;
  ThreadPoolExecutor pool(poolOptions("drain", 1, 1, config.queue));
  StopOnExit stop(gate, pool);
  pool.execute([&] {
    for (int tag : {11, 12, 13})
      pool.execute([] {}, tag);  // local: submitted by the pool's thread
    forked.arrive();
    gate.wait();
  });
  REQUIRE(forked.waitFor(1));
  for (int tag : {21, 22})
    pool.execute([] {}, tag);  // shared: submitted from outside, after the local ones
  REQUIRE(pool.stats().localQueueSize == 3);
  std::vector<PendingTask> returned = pool.shutdownNow();
  std::vector<int> tags;
  for (const PendingTask& task : returned)
    tags.push_back(task.priority());
  CHECK(tags == std::vector<int>{21, 22, 11, 12, 13});
  gate.open();
  REQUIRE(pool.awaitTermination(kLong));
  checkLedgerAddsUp(pool.stats());
}

TEST_CASE("tasks submitted from outside run in submission order through the 4,096-place ring and the queue behind it",
          "[executor][routing][fifo]") {
  const LocalQueueConfig config = GENERATE(LocalQueueConfig{"bounded(10000)", WorkQueue::bounded(10'000)},
                                           LocalQueueConfig{"unbounded", WorkQueue::unbounded()});
  INFO(config.name);
  constexpr int kFirst = 6'000;   // with the worker blocked: fills the ring and queues 1,904 behind it
  constexpr int kPause = 99;      // the worker stops again after 100 of them, leaving free places in the ring
  constexpr int kSecond = 2'000;  // submitted then: they must still run after all of the first batch
  Gate blocker;
  Gate pause;
  Counter blockerStarted;
  Counter paused;
  Counter ran;
  std::vector<int> order;  // written by the pool's only thread; read after `ran` has counted every task
  order.reserve(kFirst + kSecond);
  ThreadPoolExecutor pool(poolOptions("fifo", 1, 1, config.queue));
  OpenOnExit releasePause(pause);
  OpenOnExit releaseBlocker(blocker);
  REQUIRE(pool.prestartCoreThread());
  executeBlocked(pool, 1, blockerStarted, blocker);
  REQUIRE(blockerStarted.waitFor(1));
  auto task = [&](int id) {
    return [&, id] {
      order.push_back(id);
      if (id == kPause) {
        paused.arrive();
        pause.wait();
      }
      ran.arrive();
    };
  };
  for (int id = 0; id < kFirst; ++id)
    pool.execute(task(id));
  blocker.open();
  REQUIRE(paused.waitFor(1));
  for (int id = kFirst; id < kFirst + kSecond; ++id)
    pool.execute(task(id));
  pause.open();
  REQUIRE(ran.waitFor(kFirst + kSecond));
  REQUIRE(order.size() == static_cast<std::size_t>(kFirst + kSecond));
  std::size_t firstOutOfOrder = order.size();
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i] != static_cast<int>(i)) {
      firstOutOfOrder = i;
      break;
    }
  }
  INFO("position " << firstOutOfOrder << " ran task "
                   << (firstOutOfOrder < order.size() ? order[firstOutOfOrder] : -1));
  CHECK(firstOutOfOrder == order.size());
}

TEST_CASE("purge racing lock-free submissions loses no task and keeps each producer's order",
          "[executor][routing][purge][stress]") {
  // purge() sends lock-free submissions to the locked path while it moves the
  // ring's tasks to the overflow queue. Two producers submit at full speed and
  // cancel every third task; the main thread purges meanwhile. Every task not
  // cancelled runs exactly once, each producer's tasks run in submission
  // order (one worker), and the ledger adds up.
  constexpr int kProducers = 2;
  const int perProducer = static_cast<int>(stressSize(20'000, 4));
  ThreadPoolExecutor pool(poolOptions("purger", 1, 1, WorkQueue::unbounded()));
  std::vector<std::vector<int>> ranOrder(kProducers);  // written by the one worker only
  std::vector<std::vector<Future<void>>> futures(kProducers);
  std::atomic<int> producing{kProducers};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      futures[p].reserve(static_cast<std::size_t>(perProducer));
      for (int i = 0; i < perProducer; ++i) {
        futures[p].push_back(pool.submit([&ranOrder, p, i] { ranOrder[p].push_back(i); }));
        if (i % 3 == 0) futures[p].back().cancel();
      }
      producing.fetch_sub(1);
    });
  }
  std::size_t purged = 0;
  const bool purging = GENERATE(true, false);
  INFO((purging ? "purging meanwhile" : "no purge (the overflow alone)"));
  while (producing.load() > 0) {
    if (purging) purged += pool.purge();
  }
  for (std::thread& t : producers)
    t.join();
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  std::size_t cancelled = 0;
  for (int p = 0; p < kProducers; ++p) {
    INFO("producer " << p);
    const std::vector<int>& ran = ranOrder[p];
    // In submission order, each once: strictly increasing.
    const auto outOfOrder = std::adjacent_find(ran.begin(), ran.end(), std::greater_equal<int>());
    INFO((outOfOrder == ran.end() ? std::string("in order")
                                  : fmt::format("{} ran after {}", *std::next(outOfOrder), *outOfOrder)));
    CHECK(outOfOrder == ran.end());
    // Every task not cancelled ran (a task cancelled while it ran ran too).
    std::size_t missing = 0;
    for (int i = 0; i < perProducer; ++i) {
      Future<void>& f = futures[p][static_cast<std::size_t>(i)];
      REQUIRE(f.isDone());
      if (f.isCancelled()) {
        ++cancelled;
      } else if (!std::binary_search(ran.begin(), ran.end(), i)) {
        ++missing;
      }
    }
    CHECK(missing == 0);
  }
  INFO("purged " << purged << ", cancelled " << cancelled);
  const PoolStats s = pool.stats();
  CHECK(s.taskCount == static_cast<std::uint64_t>(kProducers * perProducer));
  CHECK(s.cancelledCount <= cancelled);  // a task cancelled while it ran counts by how it ended
  checkLedgerAddsUp(s);
}

}  // namespace
}  // namespace coexec::test
