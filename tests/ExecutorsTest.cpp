// SPDX-License-Identifier: BSL-1.0
#include "coexec/Executors.h"

// The presets: each one's configuration read back from the pool it builds,
// the behaviour that configuration promises (saturation refuses, threads are
// named), the refusal of bad arguments, and the snippets docs/production.md
// shows, compiled here so that they cannot rot.

#include <pthread.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

#include "Assertions.h"

#include "TestSupport.h"
#include "coexec/Errors.h"
#include "coexec/ThreadPoolExecutor.h"

using namespace std::chrono_literals;

using coexec::Executors;
using coexec::PoolStats;
using coexec::RejectedExecution;
using coexec::RejectionPolicy;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::Counter;
using coexec::test::executeBlocked;
using coexec::test::Gate;
using coexec::test::OpenOnExit;

namespace {

std::string currentThreadName() {
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  return name;
}

/// What every preset promises: abort(), a bounded thread count, the name.
void checkCommon(const ThreadPoolExecutor& pool, const std::string& name) {
  CHECK(pool.name() == name);
  CHECK(pool.rejectionPolicy().name() == "abort");
  CHECK(pool.maximumPoolSize() >= 1);
}

}  // namespace

TEST_CASE("Executors::fixed builds n threads, a bounded queue of the capacity, abort() and the name", "[executors]") {
  ThreadPoolExecutor pool(Executors::fixed(3, 100));
  checkCommon(pool, "fixed");
  const PoolStats stats = pool.stats();
  CHECK(stats.corePoolSize == 3);
  CHECK(stats.maximumPoolSize == 3);
  CHECK(stats.queueCapacity == 100);
  CHECK(pool.workQueue().kind() == WorkQueue::Kind::bounded);
  CHECK_FALSE(pool.allowsCoreThreadTimeOut());
}

TEST_CASE("a fixed pool refuses with RejectedExecution once its threads are busy and its queue is full",
          "[executors]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(Executors::fixed(1, 1, "sat"));
  OpenOnExit release(gate);
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  executeBlocked(pool, 1, started, gate);  // queued
  CHECK_THROWS_AS(pool.execute([] {}), RejectedExecution);
  CHECK(pool.stats().rejectedCount == 1);
}

TEST_CASE("the presets name their threads after the name given", "[executors]") {
  ThreadPoolExecutor pool(Executors::single(8, "billing"));
  auto name = pool.submit([] { return currentThreadName(); });
  CHECK(name.get() == "billing-1");
}

TEST_CASE("Executors::fixedUnbounded has an unbounded queue and n threads", "[executors]") {
  ThreadPoolExecutor pool(Executors::fixedUnbounded(2));
  checkCommon(pool, "fixed");
  const PoolStats stats = pool.stats();
  CHECK(stats.corePoolSize == 2);
  CHECK(stats.maximumPoolSize == 2);
  CHECK(stats.queueCapacity == WorkQueue::kUnboundedCapacity);
  CHECK(pool.workQueue().kind() == WorkQueue::Kind::unbounded);
}

TEST_CASE("Executors::cached: maxThreads core threads that time out after 60 s, and a bounded queue", "[executors]") {
  ThreadPoolExecutor pool(Executors::cached(16, 50));
  checkCommon(pool, "cached");
  const PoolStats stats = pool.stats();
  CHECK(stats.corePoolSize == 16);
  CHECK(stats.maximumPoolSize == 16);
  CHECK(stats.queueCapacity == 50);
  CHECK(pool.keepAliveTime() == 60s);
  CHECK(pool.allowsCoreThreadTimeOut());
  CHECK(pool.workQueue().kind() == WorkQueue::Kind::bounded);
}

TEST_CASE("Executors::cached with a queue starts a thread per busy task up to maxThreads before anything waits",
          "[executors]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(Executors::cached(3, 10, "grow"));
  OpenOnExit release(gate);
  executeBlocked(pool, 3, started, gate);
  REQUIRE(started.waitFor(3));  // all three run at once: none waits in the queue behind a single thread
  const PoolStats stats = pool.stats();
  CHECK(stats.poolSize == 3);
  CHECK(stats.queueSize == 0);
  pool.execute([] {});  // the fourth waits: every thread is busy
  CHECK(pool.stats().queueSize + pool.stats().localQueueSize == 1);
}

TEST_CASE("Executors::cached with capacity 0 is a hand-off: a thread per busy task up to maxThreads, then refusal",
          "[executors]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(Executors::cached(2, 0, "burst"));
  OpenOnExit release(gate);
  CHECK(pool.workQueue().kind() == WorkQueue::Kind::synchronous);
  executeBlocked(pool, 2, started, gate);
  REQUIRE(started.waitFor(2));
  CHECK(pool.stats().poolSize == 2);
  CHECK_THROWS_AS(pool.execute([] {}), RejectedExecution);
}

TEST_CASE("Executors::single has one thread and a bounded queue", "[executors]") {
  ThreadPoolExecutor pool(Executors::single(10));
  checkCommon(pool, "single");
  const PoolStats stats = pool.stats();
  CHECK(stats.corePoolSize == 1);
  CHECK(stats.maximumPoolSize == 1);
  CHECK(stats.queueCapacity == 10);
}

TEST_CASE("Executors::singleUnbounded has one thread and an unbounded queue", "[executors]") {
  ThreadPoolExecutor pool(Executors::singleUnbounded("log"));
  checkCommon(pool, "log");
  CHECK(pool.maximumPoolSize() == 1);
  CHECK(pool.stats().queueCapacity == WorkQueue::kUnboundedCapacity);
}

TEST_CASE("Executors::scheduled has n threads and a bounded queue for direct submissions", "[executors]") {
  ThreadPoolExecutor pool(Executors::scheduled(2));
  checkCommon(pool, "scheduled");
  const PoolStats stats = pool.stats();
  CHECK(stats.corePoolSize == 2);
  CHECK(stats.maximumPoolSize == 2);
  CHECK(stats.queueCapacity == Executors::kScheduledQueueCapacity);
}

TEST_CASE("a scheduled pool's timers hold no place of its queue: a full queue does not refuse a schedule",
          "[executors]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(Executors::scheduled(1, 1, "timers"));
  OpenOnExit release(gate);
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  executeBlocked(pool, 1, started, gate);  // the queue's one place
  CHECK_THROWS_AS(pool.execute([] {}), RejectedExecution);
  auto later = pool.schedule([] { return 7; }, 1h);  // accepted: it waits in a timer, not in the queue
  CHECK(pool.stats().scheduledCount == 1);
  CHECK(later.cancel());
}

TEST_CASE("the presets refuse bad arguments with std::invalid_argument naming the argument", "[executors]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(Executors::fixed(0, 10), Contains("n must be at least 1"));
  CHECK_THROWS_WITH(Executors::fixed(2, 0), Contains("capacity must be at least 1"));
  CHECK_THROWS_WITH(Executors::fixed(2, 10, ""), Contains("name must not be empty"));
  CHECK_THROWS_WITH(Executors::fixedUnbounded(0), Contains("n must be at least 1"));
  CHECK_THROWS_WITH(Executors::cached(0, 10), Contains("maxThreads must be at least 1"));
  CHECK_THROWS_WITH(Executors::single(0), Contains("capacity must be at least 1"));
  CHECK_THROWS_WITH(Executors::singleUnbounded(""), Contains("name must not be empty"));
  CHECK_THROWS_WITH(Executors::scheduled(0), Contains("n must be at least 1"));
  CHECK_THROWS_WITH(Executors::scheduled(1, 0), Contains("capacity must be at least 1"));
  CHECK_THROWS_AS(Executors::fixed(0, 10), std::invalid_argument);
}

TEST_CASE("docs/production.md: the preset snippets compile and build the pools they describe", "[executors][docs]") {
  // --- docs/production.md: presets ---
  ThreadPoolExecutor cpu(Executors::fixed(4, 1000, "cpu"));

  ThreadPoolOptions options = Executors::cached(64, 0, "io");
  options.rejectionPolicy = RejectionPolicy::callerRuns();
  ThreadPoolExecutor io(std::move(options));

  ThreadPoolExecutor audit(Executors::single(10'000, "audit"));
  ThreadPoolExecutor timers(Executors::scheduled(2));
  // --- end ---
  CHECK(cpu.maximumPoolSize() == 4);
  CHECK(io.rejectionPolicy().name() == "callerRuns");
  CHECK(io.maximumPoolSize() == 64);
  CHECK(audit.stats().queueCapacity == 10'000);
  CHECK(timers.corePoolSize() == 2);
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("every preset refuses an empty name, and each message names the preset and the argument",
          "[executors][bad-input]") {
  using Catch::Matchers::Contains;
  const auto emptyName = [](const char* preset) {
    return std::string("coexec::Executors::") + preset + ": name must not be empty";
  };
  CHECK_THROWS_AS(Executors::cached(4, 0, ""), std::invalid_argument);
  CHECK_THROWS_WITH(Executors::fixed(2, 10, ""), emptyName("fixed"));
  CHECK_THROWS_WITH(Executors::fixedUnbounded(2, ""), emptyName("fixedUnbounded"));
  CHECK_THROWS_WITH(Executors::cached(4, 0, ""), emptyName("cached"));
  CHECK_THROWS_WITH(Executors::single(8, ""), emptyName("single"));
  CHECK_THROWS_WITH(Executors::singleUnbounded(""), emptyName("singleUnbounded"));
  CHECK_THROWS_WITH(Executors::scheduled(2, 8, ""), emptyName("scheduled"));
  CHECK_THROWS_WITH(Executors::fixed(0, 10), "coexec::Executors::fixed: n must be at least 1, got 0");
  CHECK_THROWS_WITH(Executors::fixed(2, 0),
                    "coexec::Executors::fixed: capacity must be at least 1, got 0 (for a "
                    "hand-off without a queue use Executors::cached(n, 0))");
  CHECK_THROWS_WITH(Executors::cached(0, 10), "coexec::Executors::cached: maxThreads must be at least 1, got 0");
  CHECK_THROWS_WITH(Executors::scheduled(1, 0), "coexec::Executors::scheduled: capacity must be at least 1, got 0");
  // The first bad argument is the one named: n before capacity before name.
  CHECK_THROWS_WITH(Executors::fixed(0, 0, ""), Contains("n must be at least 1"));
  CHECK_NOTHROW(Executors::cached(4, 0));  // capacity 0 is cached()'s hand-off, not an error
}
