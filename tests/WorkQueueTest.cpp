// SPDX-License-Identifier: BSL-1.0
#include "coexec/WorkQueue.h"

// The work queue kinds: their description, their validation, the capacity a
// pool gives each, and the order in which a pool's thread takes waiting tasks
// (FIFO for bounded and unbounded, highest priority first and FIFO among
// equals for priority). How the queue sits in the routing (core -> queue ->
// extra thread -> reject, synchronous hand-off growing the pool to max) is in
// ThreadPoolExecutorRoutingTest.cpp.

#include <atomic>
#include <cstddef>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "AdmissionTestSupport.h"
#include "ForkJoinTestSupport.h"
#include "TestSupport.h"
#include "coexec/ThreadPoolExecutor.h"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace coexec::test {
namespace {

TEST_CASE("each queue kind reports its kind, capacity and description", "[queue]") {
  const WorkQueue bounded = WorkQueue::bounded(1024);
  CHECK(bounded.kind() == WorkQueue::Kind::bounded);
  CHECK(bounded.capacity() == 1024);
  CHECK(bounded.describe() == "bounded(1024)");

  const WorkQueue unbounded = WorkQueue::unbounded();
  CHECK(unbounded.kind() == WorkQueue::Kind::unbounded);
  CHECK(unbounded.capacity() == WorkQueue::kUnboundedCapacity);
  CHECK(unbounded.capacity() == std::numeric_limits<std::size_t>::max());
  CHECK(unbounded.describe() == "unbounded");

  const WorkQueue synchronous = WorkQueue::synchronous();
  CHECK(synchronous.kind() == WorkQueue::Kind::synchronous);
  CHECK(synchronous.capacity() == 0);
  CHECK(synchronous.describe() == "synchronous");

  const WorkQueue priority = WorkQueue::priority(64);
  CHECK(priority.kind() == WorkQueue::Kind::priority);
  CHECK(priority.capacity() == 64);
  CHECK(priority.describe() == "priority(64)");

  CHECK(WorkQueue::bounded(1).capacity() == 1);
  CHECK(WorkQueue::priority(1).capacity() == 1);
}

TEST_CASE("bounded(0) and priority(0) throw invalid_argument naming the capacity", "[queue][construction]") {
  const auto requireRefused = [](const std::exception_ptr& error) {
    REQUIRE(holds<std::invalid_argument>(error));
    CHECK_THAT(whatOf(error), Contains("capacity"));
    CHECK_THAT(whatOf(error), Contains("0"));
  };
  SECTION("bounded(0)") {
    requireRefused(thrownBy([] { (void)WorkQueue::bounded(0); }));
  }
  SECTION("priority(0)") {
    requireRefused(thrownBy([] { (void)WorkQueue::priority(0); }));
  }
}

TEST_CASE("the default options hold waiting tasks in a bounded(1024) queue", "[queue][construction]") {
  const ThreadPoolOptions options;
  CHECK(options.workQueue.kind() == WorkQueue::Kind::bounded);
  CHECK(options.workQueue.capacity() == 1024);
  ThreadPoolExecutor pool{ThreadPoolOptions{}};
  CHECK(pool.workQueue().describe() == "bounded(1024)");
  CHECK(pool.stats().queueCapacity == 1024);
}

/// A queue kind and the capacity a pool reports for it.
struct QueueCase {
  WorkQueue queue;
  std::size_t capacity;
};

TEST_CASE("a pool keeps the queue it was given and reports its capacity in stats()", "[queue]") {
  const QueueCase q = GENERATE(QueueCase{WorkQueue::bounded(3), 3}, QueueCase{WorkQueue::priority(5), 5},
                               QueueCase{WorkQueue::synchronous(), 0},
                               QueueCase{WorkQueue::unbounded(), std::numeric_limits<std::size_t>::max()});
  INFO(q.queue.describe());
  ThreadPoolExecutor pool(1, 2, 1s, q.queue);
  CHECK(pool.workQueue().kind() == q.queue.kind());
  CHECK(pool.workQueue().capacity() == q.queue.capacity());
  const PoolStats stats = pool.stats();
  CHECK(stats.queueCapacity == q.capacity);
  CHECK(stats.queueSize == 0);
}

TEST_CASE("with its only thread busy, a pool holds exactly capacity() waiting tasks, then rejects",
          "[queue][routing]") {
  const WorkQueue queue =
      GENERATE(WorkQueue::bounded(1), WorkQueue::bounded(4), WorkQueue::priority(3), WorkQueue::synchronous());
  INFO(queue.describe());
  Gate gate;
  Counter started;
  Counter done;
  ThreadPoolExecutor pool(1, 1, 1s, queue);
  OpenOnExit release(gate);
  pool.execute(blockingTask(gate, started));
  REQUIRE(started.waitFor(1));
  for (std::size_t i = 0; i < queue.capacity(); ++i) {
    REQUIRE_NOTHROW(pool.execute([&] { done.arrive(); }));
    CHECK(pool.stats().queueSize == i + 1);
  }
  CHECK_THROWS_AS(pool.execute([&] { done.arrive(); }), RejectedExecution);
  CHECK(pool.stats().queueSize == queue.capacity());
  gate.open();
  REQUIRE(done.waitFor(queue.capacity()));
  REQUIRE(eventually([&] { return pool.stats().completedTaskCount == queue.capacity() + 1; }));
  CHECK(done.count() == queue.capacity());
}

TEST_CASE("after a fork/join run on its workers, a pool with bounded(1024) still holds exactly 1024 waiting tasks",
          "[queue][routing]") {
  // The workers' own pushes and pops leave places with them as credit
  // (src/admission/Room.h); a producer that finds the count full takes them
  // back, so the queue still refuses only at its capacity.
  constexpr std::size_t kCapacity = 1024;
  Gate gate;
  Counter started;
  Counter done;
  ThreadPoolExecutor pool(2, 2, 1s, WorkQueue::bounded(kCapacity));
  OpenOnExit release(gate);
  for (int round = 0; round < 4; ++round)
    REQUIRE(pool.submit(forkJoinFib(pool, 16)).get() == 987);
  pool.execute(blockingTask(gate, started));
  pool.execute(blockingTask(gate, started));
  REQUIRE(started.waitFor(2));
  for (std::size_t i = 0; i < kCapacity; ++i)
    REQUIRE_NOTHROW(pool.execute([&] { done.arrive(); }));
  CHECK(pool.stats().queueSize == kCapacity);
  CHECK_THROWS_AS(pool.execute([&] { done.arrive(); }), RejectedExecution);
  gate.open();
  REQUIRE(done.waitFor(kCapacity));
  pool.close();
  const PoolStats stats = pool.stats();
  CHECK(stats.rejectedCount == 1);
  checkLedgerAddsUp(stats);
}

/// Runs, on a pool of one thread with `queue`, a blocking task and then
/// `tasks` (id, priority) queued behind it; returns the ids in the order the
/// thread ran them.
std::vector<char> runOrder(WorkQueue queue, const std::vector<std::pair<char, int>>& tasks) {
  Gate gate;
  Counter started;
  Counter done;
  std::mutex mutex;
  std::vector<char> order;
  {
    ThreadPoolExecutor pool(1, 1, 1s, queue);
    OpenOnExit release(gate);
    pool.execute(blockingTask(gate, started));
    REQUIRE(started.waitFor(1));  // every task below waits in the queue
    for (const auto& [id, priority] : tasks) {
      const char taskId = id;
      pool.execute(
          [&, taskId] {
            {
              std::lock_guard lock(mutex);
              order.push_back(taskId);
            }
            done.arrive();
          },
          priority);
    }
    CHECK(pool.stats().queueSize == tasks.size());
    gate.open();
    REQUIRE(done.waitFor(tasks.size()));
  }
  std::lock_guard lock(mutex);
  return order;
}

TEST_CASE("bounded and unbounded queues run waiting tasks in submission order, ignoring priority", "[queue][order]") {
  const WorkQueue queue = GENERATE(WorkQueue::bounded(8), WorkQueue::unbounded());
  INFO(queue.describe());
  const std::vector<char> order =
      runOrder(queue, {{'a', 1}, {'b', 5}, {'c', 1}, {'d', 5}, {'e', 3}, {'f', -2}, {'g', 3}});
  CHECK(order == std::vector<char>{'a', 'b', 'c', 'd', 'e', 'f', 'g'});
}

TEST_CASE("a priority queue runs the highest priority first and equal priorities in submission order",
          "[queue][order]") {
  SECTION("mixed priorities") {
    const std::vector<char> order =
        runOrder(WorkQueue::priority(8), {{'a', 1}, {'b', 5}, {'c', 1}, {'d', 5}, {'e', 3}, {'f', -2}, {'g', 3}});
    CHECK(order == std::vector<char>{'b', 'd', 'e', 'g', 'a', 'c', 'f'});
  }
  SECTION("all equal: plain FIFO") {
    const std::vector<char> order = runOrder(
        WorkQueue::priority(8), {{'a', 7}, {'b', 7}, {'c', 7}, {'d', 7}, {'e', 7}, {'f', 7}, {'g', 7}, {'h', 7}});
    CHECK(order == std::vector<char>{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'});
  }
  SECTION("ascending priorities run in reverse") {
    const std::vector<char> order = runOrder(WorkQueue::priority(4), {{'a', 1}, {'b', 2}, {'c', 3}, {'d', 4}});
    CHECK(order == std::vector<char>{'d', 'c', 'b', 'a'});
  }
}

TEST_CASE("purge removes cancelled waiting tasks and keeps the order of the others", "[queue][order][purge]") {
  struct Variant {
    WorkQueue queue;
    std::vector<char> expected;
  };
  const Variant v =
      GENERATE(Variant{WorkQueue::bounded(8), {'a', 'd', 'e'}}, Variant{WorkQueue::priority(8), {'d', 'e', 'a'}});
  INFO(v.queue.describe());
  Gate gate;
  Counter started;
  std::mutex mutex;
  std::vector<char> order;
  ThreadPoolExecutor pool(1, 1, 1s, v.queue);
  OpenOnExit release(gate);
  pool.execute(blockingTask(gate, started));
  REQUIRE(started.waitFor(1));
  std::vector<Future<void>> futures;
  for (const auto& [id, priority] :
       std::vector<std::pair<char, int>>{{'a', 1}, {'b', 5}, {'c', 1}, {'d', 5}, {'e', 3}}) {
    const char taskId = id;
    futures.push_back(pool.submit(
        [&, taskId] {
          std::lock_guard lock(mutex);
          order.push_back(taskId);
        },
        priority));
  }
  REQUIRE(futures[1].cancel());  // b
  REQUIRE(futures[2].cancel());  // c
  CHECK(pool.purge() == 2);
  CHECK(pool.stats().queueSize == 3);
  gate.open();
  for (std::size_t i : {0u, 3u, 4u})
    REQUIRE(futures[i].waitFor(kLong));
  std::lock_guard lock(mutex);
  CHECK(order == v.expected);
}

TEST_CASE("a full priority queue refuses a new task even if it outranks the waiting ones", "[queue][routing]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(1, 1, 1s, WorkQueue::priority(2));
  OpenOnExit release(gate);
  pool.execute(blockingTask(gate, started));
  REQUIRE(started.waitFor(1));
  pool.execute([] {}, 1);
  pool.execute([] {}, 1);
  CHECK_THROWS_AS(pool.execute([] {}, 100), RejectedExecution);
  CHECK(pool.stats().queueSize == 2);
}

}  // namespace
}  // namespace coexec::test
