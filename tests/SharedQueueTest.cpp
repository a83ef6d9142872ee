// SPDX-License-Identifier: BSL-1.0
// The pool's shared queue (src/engine/SharedQueue.h): first in, first out
// across the lock-free ring and its locked overflow, step by step through a
// small ring; purge()'s drain and requeue; and producers and consumers
// racing over a ring that keeps overflowing, with every task taken exactly
// once and each producer's tasks taken in the order it pushed them.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "coexec/PendingTask.h"
#include "coexec/WorkQueue.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/TaskCore.h"
#include "engine/SharedQueue.h"
#include "engine/TaskQueue.h"

using coexec::PendingTask;
using coexec::WorkQueue;
using coexec::detail::Ref;
using coexec::detail::SharedQueue;
using coexec::detail::TaskCore;
using coexec::detail::TaskQueue;

namespace {

/// A task that only carries who pushed it and its place in that order.
class NumberedTask final : public TaskCore {
 public:
  NumberedTask(int producer, int number)
      : TaskCore(/*hasFuture=*/false, /*wantsToken=*/false, /*priority=*/0), producer(producer), number(number) {}
  void invoke() override {}
  void discardValue() noexcept override {}
  const int producer;
  const int number;
};

PendingTask numbered(int producer, int number) { return TaskQueue::adopt(new NumberedTask(producer, number)); }

/// Takes over a reference the queue handed out and reads its number.
int numberOf(TaskCore* raw) {
  const auto task = Ref<TaskCore>::adopt(raw);
  return static_cast<const NumberedTask&>(*task).number;
}
int numberOf(PendingTask& pending) { return numberOf(TaskQueue::release(pending)); }

/// The next task as a worker takes it: the ring, else (the ring empty) the
/// overflow; -1 if both are empty.
int takeNext(SharedQueue& queue) {
  if (TaskCore* raw = nullptr; queue.tryPopRing(raw)) return numberOf(raw);
  if (PendingTask next = queue.pollLocked(); next.valid()) return numberOf(next);
  return -1;
}

}  // namespace

TEST_CASE("SharedQueue: tasks leave in the order they came, across the ring and its overflow", "[pool][queue]") {
  SharedQueue queue(WorkQueue::unbounded(), /*ringCapacity=*/4);
  REQUIRE(queue.hasRing());
  int next = 0;
  for (; next < 10; ++next) {
    PendingTask task = numbered(0, next);
    REQUIRE(queue.pushLocked(task));
    CHECK_FALSE(task.valid());
  }
  // Four in the ring, six behind it.
  CHECK(queue.overflowing());
  CHECK(queue.sizeLocked() == 10);
  CHECK(queue.lockedSizeLocked() == 6);

  std::vector<int> taken;
  for (int i = 0; i < 5; ++i)
    taken.push_back(takeNext(queue));
  // The overflow's oldest went back to the ring (half of it) when task 4 was
  // taken; a push while the overflow holds tasks goes behind them.
  CHECK(queue.overflowing());
  PendingTask late = numbered(0, next++);
  REQUIRE(queue.pushLocked(late));
  CHECK(queue.lockedSizeLocked() == 4);  // tasks 7, 8, 9 and 10
  while (queue.sizeLocked() > 0)
    taken.push_back(takeNext(queue));
  CHECK_FALSE(queue.overflowing());  // emptied: pushes take the ring again
  PendingTask last = numbered(0, next++);
  REQUIRE(queue.pushLocked(last));
  CHECK(queue.lockedSizeLocked() == 0);
  taken.push_back(takeNext(queue));
  CHECK(takeNext(queue) == -1);

  std::vector<int> expected;
  for (int i = 0; i < next; ++i)
    expected.push_back(i);
  CHECK(taken == expected);
}

TEST_CASE("SharedQueue: a drain takes every task in order, and the tasks put back queue ahead of new ones",
          "[pool][queue]") {
  SharedQueue queue(WorkQueue::unbounded(), /*ringCapacity=*/4);
  for (int i = 0; i < 6; ++i) {
    PendingTask task = numbered(0, i);
    REQUIRE(queue.pushLocked(task));
  }
  std::vector<PendingTask> all = queue.drainLocked();
  CHECK(queue.sizeLocked() == 0);
  CHECK_FALSE(queue.overflowing());
  REQUIRE(all.size() == 6);
  // Put back all but the odd ones, as purge() puts back the tasks that were
  // not cancelled; then a new push.
  queue.reserveLocked(all.size());
  std::vector<int> dropped;
  for (PendingTask& task : all) {
    TaskCore* raw = TaskQueue::release(task);
    const int number = static_cast<const NumberedTask*>(raw)->number;
    PendingTask again = TaskQueue::adopt(raw);
    if (number % 2 == 1) {
      dropped.push_back(numberOf(again));
    } else {
      queue.requeueLocked(again);
    }
  }
  CHECK(dropped == std::vector<int>{1, 3, 5});
  CHECK(queue.overflowing());  // the kept tasks are in the overflow: pushes go behind them
  PendingTask fresh = numbered(0, 6);
  REQUIRE(queue.pushLocked(fresh));
  std::vector<int> taken;
  for (int number; (number = takeNext(queue)) != -1;)
    taken.push_back(number);
  CHECK(taken == std::vector<int>{0, 2, 4, 6});
}

TEST_CASE("SharedQueue: a priority queue has no ring: every task takes the locked part", "[pool][queue]") {
  SharedQueue queue(WorkQueue::priority(16), /*ringCapacity=*/0);
  CHECK_FALSE(queue.hasRing());
  CHECK(queue.ringEmpty());
  CHECK(queue.ringSize() == 0);
  TaskCore* none = nullptr;
  CHECK_FALSE(queue.tryPopRing(none));
  PendingTask task = numbered(0, 1);
  REQUIRE(queue.pushLocked(task));
  CHECK_FALSE(queue.overflowing());  // no ring: nothing to overflow
  CHECK(queue.lockedSizeLocked() == 1);
  CHECK(takeNext(queue) == 1);
}

TEST_CASE(
    "SharedQueue: racing producers and consumers over a ring that keeps overflowing lose no task and keep "
    "each producer's order",
    "[pool][queue][stress]") {
  constexpr int kProducers = 2;
  constexpr int kConsumers = 2;
  constexpr int kPerProducer = 20000;
  std::mutex mutex;  // stands for the pool's
  SharedQueue queue(WorkQueue::unbounded(), /*ringCapacity=*/64);
  std::atomic<int> produced{0};
  std::atomic<int> consumed{0};
  std::atomic<int> outOfOrder{0};
  std::atomic<int> lockedPushes{0};
  auto seen = std::make_unique<std::atomic<int>[]>(kProducers * kPerProducer);

  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        // Bursts: every 256 pushes, wait until the consumers have nearly
        // caught up, so that the overflow empties and the ring's lock-free
        // path comes back, again and again.
        if (i % 256 == 0) {
          while (produced.load(std::memory_order_relaxed) - consumed.load(std::memory_order_relaxed) > 16)
            std::this_thread::yield();
        }
        produced.fetch_add(1, std::memory_order_relaxed);
        // As the pool's lock-free admission: the ring unless the overflow
        // holds tasks or the ring is full, else the locked push.
        std::size_t pos = 0;
        if (!queue.overflowing() && queue.tryClaim(pos)) {
          queue.publish(pos, new NumberedTask(p, i));
          continue;
        }
        PendingTask task = numbered(p, i);
        std::lock_guard lock(mutex);
        (void)queue.pushLocked(task);  // unbounded: always taken
        lockedPushes.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&] {
      std::vector<int> last(kProducers, -1);
      const auto take = [&](TaskCore* raw) {
        const auto task = Ref<TaskCore>::adopt(raw);
        const auto& numberedTask = static_cast<const NumberedTask&>(*task);
        if (numberedTask.number <= last[numberedTask.producer]) outOfOrder.fetch_add(1, std::memory_order_relaxed);
        last[numberedTask.producer] = numberedTask.number;
        seen[numberedTask.producer * kPerProducer + numberedTask.number].fetch_add(1, std::memory_order_relaxed);
        consumed.fetch_add(1, std::memory_order_relaxed);
      };
      while (consumed.load(std::memory_order_relaxed) < kProducers * kPerProducer) {
        if (TaskCore* raw = nullptr; queue.tryPopRing(raw)) {
          take(raw);
          continue;
        }
        // As a worker under the pool's lock: the ring again, and a claim
        // not yet published is waited for rather than overtaken.
        std::unique_lock lock(mutex);
        if (TaskCore* raw = nullptr; queue.tryPopRing(raw)) {
          lock.unlock();
          take(raw);
          continue;
        }
        if (!queue.ringEmpty()) {
          lock.unlock();
          std::this_thread::yield();
          continue;
        }
        PendingTask next = queue.pollLocked();
        lock.unlock();
        if (next.valid()) {
          take(TaskQueue::release(next));
        } else {
          std::this_thread::yield();
        }
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();

  INFO(lockedPushes.load() << " of " << kProducers * kPerProducer << " pushes took the overflow's path");
  CHECK(consumed.load() == kProducers * kPerProducer);
  CHECK(outOfOrder.load() == 0);
  int missingOrTwice = 0;
  for (int i = 0; i < kProducers * kPerProducer; ++i)
    missingOrTwice += seen[i].load() == 1 ? 0 : 1;
  CHECK(missingOrTwice == 0);
  std::lock_guard lock(mutex);
  CHECK(queue.sizeLocked() == 0);
}
