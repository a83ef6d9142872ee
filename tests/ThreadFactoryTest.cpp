// SPDX-License-Identifier: BSL-1.0
#include "coexec/ThreadPoolExecutor.h"

// Thread factories that fail (RTE-06 and RTE-07 of
// ../shared/reference/jdk-executor-behaviours.md, ported from the JDK's
// jtreg FlakyThreadFactory), and the pool's retry of a failed start when
// accepted work is left with no thread.

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include "Assertions.h"

#include "AdmissionTestSupport.h"
#include "TestSupport.h"
#include "coexec/Clock.h"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace coexec::test {
namespace {

struct FactoryError : std::runtime_error {
  FactoryError() : std::runtime_error("the test's thread factory refuses to create a thread") {}
};

enum class FactoryFailure { throwsError, throwsBadAlloc, returnsNotJoinable };

const char* failureName(FactoryFailure failure) {
  switch (failure) {
    case FactoryFailure::throwsError: return "the factory throws (Java: NullPointerException)";
    case FactoryFailure::throwsBadAlloc: return "the factory throws std::bad_alloc (Java: OutOfMemoryError)";
    case FactoryFailure::returnsNotJoinable: return "the factory returns a non-joinable thread (Java: null)";
  }
  return "?";
}

/// A thread factory that creates `successes` threads, then fails the given
/// way (until `healthy` is set), and an uncaught handler that counts what
/// reaches it.
struct FlakyFactory {
  FactoryFailure failure = FactoryFailure::throwsError;
  int successes = 0;
  std::atomic<bool> healthy{false};
  std::atomic<int> created{0};
  std::atomic<int> failures{0};
  std::atomic<int> handled{0};               // every exception the uncaught handler saw
  std::atomic<int> handledFactoryErrors{0};  // those that were the factory's own
  std::atomic<bool> handlerSawPoolName{true};

  bool throws() const { return failure != FactoryFailure::returnsNotJoinable; }

  void install(ThreadPoolOptions& options) {
    options.threadFactory = [this](std::string, std::function<void()> body) -> std::thread {
      if (!healthy && created.load() >= successes) {
        ++failures;
        switch (failure) {
          case FactoryFailure::throwsError: throw FactoryError();
          case FactoryFailure::throwsBadAlloc: throw std::bad_alloc();
          case FactoryFailure::returnsNotJoinable: return std::thread();
        }
      }
      ++created;
      return std::thread(std::move(body));
    };
    options.uncaughtExceptionHandler = [this, name = options.name](std::exception_ptr error, const TaskInfo& info) {
      ++handled;
      if (info.poolName != name) handlerSawPoolName = false;
      const bool fromFactory =
          failure == FactoryFailure::throwsBadAlloc ? holds<std::bad_alloc>(error) : holds<FactoryError>(error);
      if (fromFactory) ++handledFactoryErrors;
    };
  }
};

TEST_CASE(
    "a thread factory that fails after the first thread leaves every task to that thread, and none is rejected "
    "(RTE-06)",
    "[executor][routing][factory]") {
  FlakyFactory factory;
  factory.failure = GENERATE(FactoryFailure::throwsError, FactoryFailure::returnsNotJoinable);
  factory.successes = 1;
  INFO(failureName(factory.failure));
  ThreadPoolOptions options = poolOptions("rte06", 100, 100, WorkQueue::unbounded());
  factory.install(options);

  ThreadSet threads;
  Counter done;
  ThreadPoolExecutor pool(std::move(options));
  StopOnFailure stopOnFailure(pool);
  for (int i = 0; i < 100; ++i) {
    REQUIRE_NOTHROW(pool.execute([&] {
      threads.addCurrent();
      done.arrive();
    }));
  }
  REQUIRE(done.waitFor(100));
  CHECK(threads.size() == 1);
  const PoolStats stats = pool.stats();
  CHECK(stats.poolSize == 1);
  CHECK(stats.largestPoolSize == 1);
  CHECK(stats.taskCount == 100);
  CHECK(stats.rejectedCount == 0);
  CHECK(factory.created.load() == 1);
  CHECK(factory.failures.load() > 0);
  if (factory.throws()) {
    // Each exception the factory threw reached the uncaught handler once.
    CHECK(factory.handledFactoryErrors.load() == factory.failures.load());
    CHECK(factory.handled.load() == factory.failures.load());
    CHECK(factory.handlerSawPoolName.load());
  }
}

TEST_CASE(
    "a flaky thread factory's error reaches the uncaught handler, not the submitter, and the pool still terminates "
    "(RTE-07, Java throws it from execute)",
    "[executor][routing][factory]") {
  FlakyFactory factory;
  factory.failure =
      GENERATE(FactoryFailure::throwsError, FactoryFailure::throwsBadAlloc, FactoryFailure::returnsNotJoinable);
  factory.successes = 4;
  INFO(failureName(factory.failure));
  ThreadPoolOptions options = poolOptions("rte07", 10, 10, WorkQueue::unbounded());
  options.keepAliveTime = 0s;
  factory.install(options);

  Counter done;
  ThreadPoolExecutor pool(std::move(options));
  StopOnFailure stopOnFailure(pool);
  for (int i = 0; i < 8; ++i)
    REQUIRE_NOTHROW(pool.execute([&] { done.arrive(); }));
  REQUIRE(done.waitFor(8));
  CHECK(pool.stats().poolSize == 4);
  CHECK(pool.stats().rejectedCount == 0);
  CHECK(factory.failures.load() >= 4);  // tasks 4 to 7 each asked for a core thread
  if (factory.throws()) {
    CHECK(factory.handledFactoryErrors.load() == factory.failures.load());
    CHECK(factory.handled.load() == factory.failures.load());
  }
  pool.shutdown();
  CHECK(pool.awaitTermination(kLong));
  CHECK(pool.stats().completedTaskCount == 8);
}

TEST_CASE(
    "when the thread factory fails, a task goes to the queue, then to the policy, whose RejectedExecution says the "
    "factory failed",
    "[executor][routing][factory]") {
  FlakyFactory factory;
  factory.failure = GENERATE(FactoryFailure::throwsError, FactoryFailure::returnsNotJoinable);
  factory.successes = 0;
  INFO(failureName(factory.failure));
  ThreadPoolOptions options = poolOptions("rtefail", 1, 1, WorkQueue::bounded(1));
  // The pool retries a failed start on its clock while the queued task has
  // no thread: on a ManualClock that never moves here, only submissions call
  // the factory, and the counts below are exact.
  ManualClock clock;
  options.clock = &clock;
  factory.install(options);

  std::atomic<bool> queuedRan{false};
  std::atomic<bool> rejectedRan{false};
  std::atomic<bool> laterRan{false};
  ThreadPoolExecutor pool(std::move(options));
  StopOnFailure stopOnFailure(pool);

  // No core thread: the task is queued (and waits for a thread).
  REQUIRE_NOTHROW(pool.execute([&] { queuedRan = true; }));
  PoolStats stats = pool.stats();
  CHECK(stats.poolSize == 0);
  CHECK(stats.queueSize == 1);
  CHECK(stats.taskCount == 1);
  CHECK(stats.rejectedCount == 0);

  // Queue full, no extra thread either: the policy (abort).
  const std::exception_ptr error = thrownBy([&] { pool.execute([&] { rejectedRan = true; }); });
  REQUIRE(holds<RejectedExecution>(error));
  CHECK_THAT(whatOf(error), Contains("factory", Catch::CaseSensitive::No));
  CHECK_THAT(whatOf(error), Contains("rtefail"));
  stats = pool.stats();
  CHECK(stats.poolSize == 0);
  CHECK(stats.largestPoolSize == 0);
  CHECK(stats.queueSize == 1);
  CHECK(stats.taskCount == 1);
  CHECK(stats.rejectedCount == 1);
  if (factory.throws()) {
    CHECK(factory.failures.load() >= 2);
    CHECK(factory.handledFactoryErrors.load() == factory.failures.load());
  }

  // Once the factory works again, the next task gets a thread, which then
  // serves the queue.
  factory.healthy = true;
  REQUIRE_NOTHROW(pool.execute([&] { laterRan = true; }));
  REQUIRE(eventually([&] { return pool.stats().completedTaskCount == 2; }));
  CHECK(queuedRan.load());
  CHECK(laterRan.load());
  CHECK_FALSE(rejectedRan.load());
  stats = pool.stats();
  CHECK(stats.poolSize == 1);
  CHECK(stats.taskCount == 2);
  CHECK(stats.rejectedCount == 1);
}

// ---- the retry of a failed start ------------------------------------------

const char* queueName(int kind) {
  switch (kind) {
    case 0: return "unbounded (the lock-free ring)";
    case 1: return "bounded(4)";
    case 2: return "priority(4) (the locked path)";
  }
  return "?";
}

WorkQueue queueOf(int kind) {
  switch (kind) {
    case 0: return WorkQueue::unbounded();
    case 1: return WorkQueue::bounded(4);
    default: return WorkQueue::priority(4);
  }
}

TEST_CASE(
    "a task queued on a pool with no thread whose factory failed runs once a retry on the pool's clock starts one, "
    "without another submission",
    "[executor][routing][factory][reliability]") {
  // Caught by the fault sweep (thread factory, core 0): the queued task
  // waited for a thread that only a later submission would have started. The
  // stress driver's probe task, the last submission, never ran.
  const int kind = GENERATE(0, 1, 2);
  INFO(queueName(kind));
  ManualClock clock;
  std::atomic<int> calls{0};
  std::atomic<int> reports{0};
  ThreadPoolOptions options = poolOptions("retryq", 0, 1, queueOf(kind));
  options.clock = &clock;
  options.threadFactory = [&calls](const std::string& /*name*/, std::function<void()> body) {
    if (++calls <= 2) throw std::runtime_error("no thread now");
    return std::thread(std::move(body));
  };
  options.uncaughtExceptionHandler = [&reports](const std::exception_ptr&, const TaskInfo&) { ++reports; };
  ThreadPoolExecutor pool(std::move(options));
  StopOnFailure stopOnFailure(pool);

  auto future = pool.submit([] { return 7; });  // queued; its thread fails to start (call 1); a retry in 1 ms
  CHECK(calls == 1);
  CHECK(reports == 1);
  CHECK(pool.stats().poolSize == 0);
  CHECK(pool.stats().queueSize == 1);
  clock.advance(999us);  // not yet
  CHECK(calls == 1);
  CHECK_FALSE(future.isDone());
  clock.advance(1us);  // the retry fails too (call 2); the next in 2 ms
  CHECK(calls == 2);
  CHECK(reports == 2);
  CHECK_FALSE(future.isDone());
  clock.advance(1ms);  // half way
  CHECK(calls == 2);
  clock.advance(1ms);  // the thread starts and runs the task
  REQUIRE(future.waitFor(kLong));
  CHECK(future.get() == 7);
  CHECK(calls == 3);
  CHECK(reports == 2);  // each failure reached the handler once
  CHECK(pool.stats().rejectedCount == 0);
  pool.shutdown();
  CHECK(pool.awaitTermination(kLong));
  CHECK(pool.stats().completedTaskCount == 1);
}

TEST_CASE("the retry of a failed start doubles its delay up to 1 s and starts again from 1 ms after a success",
          "[executor][routing][factory][reliability]") {
  ManualClock clock;
  std::atomic<bool> healthy{false};
  std::atomic<int> calls{0};
  ThreadPoolOptions options = poolOptions("retryd", 0, 1, WorkQueue::unbounded());
  options.clock = &clock;
  options.keepAliveTime = 0s;  // the thread leaves once the queue is empty
  options.threadFactory = [&](const std::string& /*name*/, std::function<void()> body) {
    ++calls;
    if (!healthy) throw std::runtime_error("no thread now");
    return std::thread(std::move(body));
  };
  options.uncaughtExceptionHandler = [](const std::exception_ptr&, const TaskInfo&) {};
  ThreadPoolExecutor pool(std::move(options));
  StopOnFailure stopOnFailure(pool);

  auto first = pool.submit([] { return 1; });
  CHECK(calls == 1);
  // Retries after 1, 2, 4, ..., 512 ms, then every 1000 ms.
  int expected = 1;
  for (const int delay : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000}) {
    clock.advance(std::chrono::milliseconds(delay) - 1us);
    CHECK(calls == expected);
    clock.advance(1us);
    CHECK(calls == ++expected);
  }
  CHECK_FALSE(first.isDone());
  healthy = true;
  clock.advance(1000ms);
  REQUIRE(first.waitFor(kLong));
  CHECK(calls == expected + 1);
  // The thread times out (keep-alive 0, on the pool's clock: once it parked,
  // an advance fires its alarm); the next failure starts again at 1 ms.
  REQUIRE(eventually([&] {
    clock.advance(1us);
    return pool.stats().poolSize == 0;
  }));
  healthy = false;
  const int before = calls.load();
  auto second = pool.submit([] { return 2; });
  CHECK(calls == before + 1);
  healthy = true;
  clock.advance(1ms);
  REQUIRE(second.waitFor(kLong));
  CHECK(second.get() == 2);
  CHECK(calls == before + 2);
  pool.shutdown();
  CHECK(pool.awaitTermination(kLong));
}

}  // namespace
}  // namespace coexec::test
