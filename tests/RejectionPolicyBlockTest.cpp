// SPDX-License-Identifier: BSL-1.0
// RejectionPolicy::block(timeout): the producer waits for room, is released by a shutdown, gives up
// after its timeout, is woken by room in a local queue; a pool task that blocks on its own pool.
#include "coexec/RejectionPolicy.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

#include "Assertions.h"

#include "AdmissionTestSupport.h"
#include "RejectionPolicyTestSupport.h"
#include "TestSupport.h"
#include "coexec/ThreadPoolExecutor.h"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace coexec::test {
namespace {

// ---- block(timeout) ----------------------------------------------------------

/// A thread that executes one task on `pool` and records how that ended.
/// Declare it after the pool and before the pool's OpenOnExit guard: the gate
/// opens first, then the producer is joined, then the pool is destroyed.
class Producer {
 public:
  void start(ThreadPoolExecutor& pool, std::atomic<bool>& ran) {
    thread_ = std::jthread([this, &pool, &ran] {
      try {
        pool.execute([&ran] { ran = true; });
      } catch (...) {
        error_ = std::current_exception();
      }
      returned_ = true;
    });
  }
  [[nodiscard]] bool returned() const { return returned_.load(); }
  /// Joins the thread; then what execute() threw (null if it returned).
  std::exception_ptr join() {
    thread_.join();
    return error_;
  }

 private:
  std::atomic<bool> returned_{false};
  std::exception_ptr error_;  // written by the producer, read after join
  std::jthread thread_;
};

TEST_CASE(
    "block makes the producer wait for room (a queue slot, or an idle thread for a hand-off), then admits the task",
    "[rejection][saturated][block]") {
  struct Variant {
    const char* name;
    WorkQueue queue;
    std::size_t blockers;  // tasks that saturate a pool of one thread
  };
  const Variant v =
      GENERATE(Variant{"bounded(1)", WorkQueue::bounded(1), 2}, Variant{"synchronous", WorkQueue::synchronous(), 1});
  INFO(v.name);
  // Far longer than the wait below: a producer that only gets in when the
  // timeout expires fails the test.
  constexpr auto kBlockTimeout = kLong * 3;
  Gate gate;
  Counter started;
  std::atomic<bool> ran{false};
  ThreadPoolExecutor pool(poolOptions("rejblk", 1, 1, v.queue, RejectionPolicy::block(kBlockTimeout)));
  Producer producer;
  OpenOnExit release(gate);
  for (std::size_t i = 0; i < v.blockers; ++i)
    pool.execute(blockingTask(gate, started));
  REQUIRE(started.waitFor(1));
  producer.start(pool, ran);

  // The task reached the policy and the producer waits: a waiting producer,
  // not (yet, or ever) a refusal.
  REQUIRE(eventually([&] { return pool.stats().waitingProducers == 1; }));
  CHECK_FALSE(producer.returned());
  CHECK(pool.stats().rejectedCount == 0);

  gate.open();
  REQUIRE(eventually([&] { return producer.returned(); }));
  CHECK(producer.join() == nullptr);
  REQUIRE(eventually([&] { return pool.stats().completedTaskCount == v.blockers + 1; }));
  CHECK(ran.load());
  const PoolStats stats = pool.stats();
  CHECK(stats.taskCount == v.blockers + 1);
  CHECK(stats.rejectedCount == 0);  // admitted after waiting: counted as a wait, not as a refusal
  CHECK(stats.waitedForRoomCount == 1);
  CHECK(stats.waitingProducers == 0);
}

TEST_CASE("a producer waiting under block is released with RejectedExecution when the pool shuts down",
          "[rejection][saturated][block][shutdown]") {
  const bool now = GENERATE(false, true);
  INFO((now ? "shutdownNow()" : "shutdown()"));
  Gate gate;
  Counter started;
  std::atomic<bool> ran{false};
  ThreadPoolExecutor pool(poolOptions("rejblks", 1, 1, WorkQueue::bounded(1), RejectionPolicy::block(kLong * 3)));
  Producer producer;
  OpenOnExit release(gate);
  pool.execute(blockingTask(gate, started));
  pool.execute(blockingTask(gate, started));
  REQUIRE(started.waitFor(1));
  producer.start(pool, ran);
  REQUIRE(eventually([&] { return pool.stats().waitingProducers == 1; }));

  if (now) {
    CHECK(pool.shutdownNow().size() == 1);
  } else {
    pool.shutdown();
  }
  REQUIRE(eventually([&] { return producer.returned(); }));  // without waiting for room or the timeout
  requireRejectedExecution(producer.join(), "rejblks", now ? PoolState::stop : PoolState::shutdown);
  gate.open();
  REQUIRE(pool.awaitTermination(kLong));
  CHECK_FALSE(ran.load());
  CHECK(pool.stats().taskCount == 2);
  CHECK(pool.stats().rejectedCount == 1);  // refused by the shutdown
  CHECK(pool.stats().waitedForRoomCount == 0);
}

TEST_CASE("block gives up after its timeout and throws RejectedExecution, the task never runs",
          "[rejection][saturated][block]") {
  constexpr auto kTimeout = 50ms;
  Saturated sat("rejblkt", RejectionPolicy::block(kTimeout));
  std::atomic<bool> ran{false};
  const auto start = std::chrono::steady_clock::now();
  const std::exception_ptr thrown = thrownBy([&] { sat.pool.execute([&] { ran = true; }); });
  CHECK(std::chrono::steady_clock::now() - start >= kTimeout);
  requireRejectedExecution(thrown, "rejblkt", PoolState::running);
  const PoolStats stats = sat.pool.stats();
  CHECK(stats.taskCount == 2);
  CHECK(stats.rejectedCount == 1);
  sat.gate.open();
  sat.pool.shutdown();
  REQUIRE(sat.pool.awaitTermination(kLong));
  CHECK_FALSE(ran.load());
}

TEST_CASE("block with a negative timeout throws invalid_argument", "[rejection][construction][block]") {
  CHECK_THROWS_AS(RejectionPolicy::block(-1ms), std::invalid_argument);
  CHECK_THROWS_WITH(RejectionPolicy::block(-1ms),
                    "coexec::RejectionPolicy::block: timeout must be non-negative, got -1000000ns");
  CHECK(RejectionPolicy::block(0ms).name() == "block");
}

// ---- local queues (tasks the pool's own threads submitted) -----------------

TEST_CASE("block() producers are woken when a task leaves a local queue, not only the shared queue",
          "[policy][block][local]") {
  // The only place of bounded(1) is held by a subtask in the worker's local
  // queue. The worker then takes it and runs it, and it stays running: room
  // appeared, but no worker parks and the shared queue never changes. The
  // producer must be admitted long before its 60 s timeout.
  Gate parentGate;
  Gate childGate;
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::bounded(1), RejectionPolicy::block(60s));
  OpenOnExit releaseParent(parentGate);
  OpenOnExit releaseChild(childGate);
  Counter subtaskQueued;
  Counter childRunning;
  pool.execute([&] {
    pool.execute([&] {  // from the pool's thread: its local queue, the only place
      childRunning.arrive();
      childGate.wait();
    });
    subtaskQueued.arrive();
    parentGate.wait();
  });
  REQUIRE(subtaskQueued.waitFor(1));
  std::atomic<bool> admitted{false};
  std::thread producer([&] {
    pool.execute([] {});  // full: waits in block()
    admitted = true;
  });
  REQUIRE(eventually([&] { return pool.stats().waitingProducers == 1; }));  // it waits in the policy
  parentGate.open();                                                     // the worker takes the subtask
  REQUIRE(childRunning.waitFor(1));
  const bool wokenInTime = eventually([&] { return admitted.load(); });
  childGate.open();
  producer.join();
  CHECK(wokenInTime);
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("a pool task submitting to its own saturated pool under block() waits out the timeout, then is rejected",
          "[rejection][saturated][block][bad-input]") {
  // The hazard of RejectionPolicy::block()'s note: the only thread is the
  // submitter, so nothing can make room before the timeout.
  static constexpr auto kTimeout = 20ms;
  ThreadPoolExecutor pool(poolOptions("rejself", 1, 1, WorkQueue::bounded(1), RejectionPolicy::block(kTimeout)));
  Future<std::string> outcome = pool.submit([&pool] {
    pool.execute([] {});  // holds the queue's one place until this task returns
    const auto start = std::chrono::steady_clock::now();
    try {
      pool.execute([] {});
    } catch (const RejectedExecution& e) {
      const bool waited = std::chrono::steady_clock::now() - start >= kTimeout;
      return std::string(waited ? "waited, then: " : "did not wait: ") + e.what();
    }
    return std::string("admitted");
  });
  REQUIRE(outcome.waitFor(kLong));
  const std::string what = outcome.get();
  CHECK_THAT(what, Catch::StartsWith("waited, then: coexec: task rejected: ") && Contains("pool 'rejself' RUNNING"));
  pool.close();
  const PoolStats stats = pool.stats();
  CHECK(stats.rejectedCount == 1);
  CHECK(stats.completedTaskCount == 2);  // the submitter and the task that held the place
}

}  // namespace
}  // namespace coexec::test
