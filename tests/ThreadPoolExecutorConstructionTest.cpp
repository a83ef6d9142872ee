// SPDX-License-Identifier: BSL-1.0
// Constructing a ThreadPoolExecutor (CON): validation through every constructor, the getters, the
// runtime setters' refusals, empty callables and names, and a pool destroyed by one of its own tasks.
#include "coexec/ThreadPoolExecutor.h"

// Construction / validation (CON) of
// ../shared/reference/jdk-executor-behaviours.md, ported from the JDK's
// ThreadPoolExecutorTest, jtreg ConfigChanges / TimeOutShrink /
// FlakyThreadFactory / CoreThreadTimeOut and Python's test_thread_pool.
//
// Not ported, no C++ counterpart:
// - CON-05 null work queue / null time unit: WorkQueue is a value and
//   std::chrono durations carry their unit. (A null factory maps to an empty
//   ThreadFactory = the default one, tested below; a null handler to an empty
//   policy callable, in RejectionPolicyCustomTest.cpp.)
// - CON-07 factory / handler setters: options are fixed at construction;
//   the policy getter is checked below.
// - CON-11 / CON-12: no scheduled pool and no completion service yet.
//
// Task routing (RTE) is in ThreadPoolExecutorRoutingTest.cpp, the local
// queues and the lock-free ring in ThreadPoolExecutorLocalQueueTest.cpp.

#include <pthread.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "Assertions.h"

#include "AdmissionTestSupport.h"
#include "DeathTestSupport.h"
#include "TestSupport.h"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace coexec::test {
namespace {

constexpr std::size_t kSizeMax = std::numeric_limits<std::size_t>::max();

// ---- construction helpers ----------------------------------------------------

/// The constructor overloads (Java has four; coexec has the options struct and
/// the Java-style one with and without a policy).
enum class Ctor { options, optionsWithFactoryAndHandler, javaStyle, javaStyleWithPolicy };

const char* ctorName(Ctor ctor) {
  switch (ctor) {
    case Ctor::options: return "ThreadPoolExecutor(ThreadPoolOptions)";
    case Ctor::optionsWithFactoryAndHandler: return "ThreadPoolExecutor(ThreadPoolOptions with factory and handler)";
    case Ctor::javaStyle: return "ThreadPoolExecutor(core, max, keepAlive, queue)";
    case Ctor::javaStyleWithPolicy: return "ThreadPoolExecutor(core, max, keepAlive, queue, policy)";
  }
  return "?";
}

/// Constructs (and destroys) a pool through `ctor`; returns what it threw.
std::exception_ptr constructThrough(Ctor ctor, std::size_t core, std::size_t max, std::chrono::nanoseconds keepAlive) {
  return thrownBy([&] {
    switch (ctor) {
      case Ctor::options:
      case Ctor::optionsWithFactoryAndHandler: {
        ThreadPoolOptions options = poolOptions("con", core, max, WorkQueue::bounded(10));
        options.keepAliveTime = keepAlive;
        if (ctor == Ctor::optionsWithFactoryAndHandler) {
          options.threadFactory = [](std::string, std::function<void()> body) { return std::thread(std::move(body)); };
          options.rejectionPolicy = RejectionPolicy::discard();
        }
        ThreadPoolExecutor pool(std::move(options));
        break;
      }
      case Ctor::javaStyle: {
        ThreadPoolExecutor pool(core, max, keepAlive, WorkQueue::bounded(10));
        break;
      }
      case Ctor::javaStyleWithPolicy: {
        ThreadPoolExecutor pool(core, max, keepAlive, WorkQueue::bounded(10), RejectionPolicy::callerRuns());
        break;
      }
    }
  });
}

/// Checks that `error` is a std::invalid_argument whose message names every
/// one of `words` (the field and the value).
void requireInvalidArgumentNaming(const std::exception_ptr& error, std::initializer_list<std::string> words) {
  REQUIRE(holds<std::invalid_argument>(error));
  const std::string message = whatOf(error);
  for (const std::string& word : words)
    CHECK_THAT(message, Contains(word));
}

// ---- CON: construction and argument validation -------------------------------

TEST_CASE(
    "constructing with corePoolSize above maximumPoolSize throws invalid_argument naming corePoolSize (CON-01, CON-04)",
    "[executor][construction]") {
  const Ctor ctor =
      GENERATE(Ctor::options, Ctor::optionsWithFactoryAndHandler, Ctor::javaStyle, Ctor::javaStyleWithPolicy);
  INFO(ctorName(ctor));

  SECTION("core 2, max 1 (CON-04)") {
    requireInvalidArgumentNaming(constructThrough(ctor, 2, 1, 1s), {"corePoolSize", "2"});
  }
  SECTION("core -1 converts to SIZE_MAX, above any max (CON-01: std::size_t cannot be negative)") {
    requireInvalidArgumentNaming(constructThrough(ctor, static_cast<std::size_t>(-1), 1, 1s),
                                 {"corePoolSize", std::to_string(kSizeMax)});
  }
}

TEST_CASE("constructing with maximumPoolSize 0 throws invalid_argument naming the field and the value (CON-02)",
          "[executor][construction]") {
  // Java's max = -1 has no counterpart: -1 converts to SIZE_MAX, a valid bound.
  const Ctor ctor =
      GENERATE(Ctor::options, Ctor::optionsWithFactoryAndHandler, Ctor::javaStyle, Ctor::javaStyleWithPolicy);
  INFO(ctorName(ctor));
  SECTION("core 0") { requireInvalidArgumentNaming(constructThrough(ctor, 0, 0, 1s), {"maximumPoolSize", "0"}); }
  SECTION("core 1") { requireInvalidArgumentNaming(constructThrough(ctor, 1, 0, 1s), {"maximumPoolSize", "0"}); }
}

TEST_CASE("an unset maximumPoolSize is corePoolSize, and at least 1", "[executor][construction]") {
  SECTION("{.corePoolSize = 4}: max 4") {
    ThreadPoolExecutor pool({.corePoolSize = 4});
    CHECK(pool.corePoolSize() == 4);
    CHECK(pool.maximumPoolSize() == 4);
    CHECK(pool.stats().maximumPoolSize == 4);
  }
  SECTION("{}: core 1, max 1") {
    ThreadPoolExecutor pool({});
    CHECK(pool.corePoolSize() == 1);
    CHECK(pool.maximumPoolSize() == 1);
  }
  SECTION("{.corePoolSize = 0}: max 1") {
    ThreadPoolExecutor pool({.corePoolSize = 0});
    CHECK(pool.corePoolSize() == 0);
    CHECK(pool.maximumPoolSize() == 1);
  }
  SECTION("a value set is kept: core 2, max 5") {
    ThreadPoolOptions options;
    options.corePoolSize = 2;
    options.maximumPoolSize = 5;
    REQUIRE(options.maximumPoolSize == 5u);
    ThreadPoolExecutor pool(std::move(options));
    CHECK(pool.maximumPoolSize() == 5);
  }
}

TEST_CASE("an explicit maximumPoolSize is checked as given: 0, or below corePoolSize, throws",
          "[executor][construction]") {
  SECTION("{.maximumPoolSize = 0}") {
    requireInvalidArgumentNaming(thrownBy([] { ThreadPoolExecutor pool({.maximumPoolSize = 0}); }),
                                 {"maximumPoolSize", "0"});
  }
  SECTION("{.corePoolSize = 0, .maximumPoolSize = 0}") {
    requireInvalidArgumentNaming(thrownBy([] { ThreadPoolExecutor pool({.corePoolSize = 0, .maximumPoolSize = 0}); }),
                                 {"maximumPoolSize", "0"});
  }
  SECTION("{.corePoolSize = 4, .maximumPoolSize = 2}") {
    requireInvalidArgumentNaming(thrownBy([] { ThreadPoolExecutor pool({.corePoolSize = 4, .maximumPoolSize = 2}); }),
                                 {"corePoolSize (4)", "maximumPoolSize (2)"});
  }
}

TEST_CASE("constructing with a negative keepAliveTime throws invalid_argument naming the field and the value (CON-03)",
          "[executor][construction]") {
  const Ctor ctor =
      GENERATE(Ctor::options, Ctor::optionsWithFactoryAndHandler, Ctor::javaStyle, Ctor::javaStyleWithPolicy);
  INFO(ctorName(ctor));
  requireInvalidArgumentNaming(constructThrough(ctor, 1, 2, -1ns), {"keepAliveTime", "-1"});
}

TEST_CASE("valid sizes construct through every constructor: core 0, core == max, a huge max",
          "[executor][construction]") {
  const Ctor ctor =
      GENERATE(Ctor::options, Ctor::optionsWithFactoryAndHandler, Ctor::javaStyle, Ctor::javaStyleWithPolicy);
  INFO(ctorName(ctor));
  CHECK(constructThrough(ctor, 0, 1, 0ns) == nullptr);
  CHECK(constructThrough(ctor, 3, 3, 1s) == nullptr);
  CHECK(constructThrough(ctor, 1, kSizeMax, 1s) == nullptr);
}

TEST_CASE("an empty ThreadFactory means the default one, which names threads <name>-<n> (CON-05)",
          "[executor][construction][factory]") {
  ThreadPoolOptions options = poolOptions("con05", 1, 1, WorkQueue::bounded(10));
  REQUIRE_FALSE(options.threadFactory);
  ThreadPoolExecutor pool(std::move(options));
  Future<std::string> name = pool.submit([] {
    std::array<char, 16> buffer{};
    if (pthread_getname_np(pthread_self(), buffer.data(), buffer.size()) != 0) return std::string("<unknown>");
    return std::string(buffer.data());
  });
  REQUIRE(name.waitFor(kLong));
  CHECK(name.get() == "con05-1");
}

TEST_CASE("getters echo the constructor's arguments, the default policy is abort (CON-06, CON-07)",
          "[executor][construction]") {
  SECTION("Java-style constructor") {
    ThreadPoolExecutor pool(1, 1, 1000ms, WorkQueue::bounded(10));
    CHECK(pool.corePoolSize() == 1);
    CHECK(pool.maximumPoolSize() == 1);
    CHECK(pool.keepAliveTime() == 1s);  // unit conversion: 1000 ms is 1 s
    CHECK_FALSE(pool.allowsCoreThreadTimeOut());
    CHECK(pool.name() == "coexec");
    CHECK(pool.workQueue().kind() == WorkQueue::Kind::bounded);
    CHECK(pool.workQueue().capacity() == 10);
    CHECK(pool.rejectionPolicy().name() == "abort");
  }
  SECTION("Java-style constructor with a policy") {
    ThreadPoolExecutor pool(2, 2, 1000ms, WorkQueue::synchronous(), RejectionPolicy::callerRuns());
    CHECK(pool.corePoolSize() == 2);
    CHECK(pool.maximumPoolSize() == 2);
    CHECK(pool.keepAliveTime() == 1s);
    CHECK(pool.workQueue().kind() == WorkQueue::Kind::synchronous);
    CHECK(pool.rejectionPolicy().name() == "callerRuns");
  }
  SECTION("options") {
    ThreadPoolOptions options = poolOptions("con06", 2, 5, WorkQueue::priority(7), RejectionPolicy::discardOldest());
    options.keepAliveTime = 250ms;
    options.allowCoreThreadTimeOut = true;
    ThreadPoolExecutor pool(std::move(options));
    CHECK(pool.corePoolSize() == 2);
    CHECK(pool.maximumPoolSize() == 5);
    CHECK(pool.keepAliveTime() == 250ms);
    CHECK(pool.allowsCoreThreadTimeOut());
    CHECK(pool.name() == "con06");
    CHECK(pool.workQueue().kind() == WorkQueue::Kind::priority);
    CHECK(pool.workQueue().capacity() == 7);
    CHECK(pool.rejectionPolicy().name() == "discardOldest");
    const PoolStats stats = pool.stats();
    CHECK(stats.name == "con06");
    CHECK(stats.corePoolSize == 2);
    CHECK(stats.maximumPoolSize == 5);
    CHECK(stats.queueCapacity == 7);
  }
  SECTION("default options") {
    ThreadPoolExecutor pool(ThreadPoolOptions{});
    CHECK(pool.corePoolSize() == 1);
    CHECK(pool.maximumPoolSize() == 1);
    CHECK(pool.keepAliveTime() == 60s);
    CHECK_FALSE(pool.allowsCoreThreadTimeOut());
    CHECK(pool.name() == "coexec");
    CHECK(pool.rejectionPolicy().name() == "abort");
  }
}

TEST_CASE("runtime setters refuse invalid values and keep the old ones (CON-08)", "[executor][construction][resize]") {
  SECTION("setCorePoolSize(-1) on (1, 2): -1 converts to SIZE_MAX, above max") {
    ThreadPoolExecutor pool(1, 2, 1s, WorkQueue::bounded(10));
    requireInvalidArgumentNaming(thrownBy([&] { pool.setCorePoolSize(static_cast<std::size_t>(-1)); }),
                                 {"corePoolSize"});
    CHECK(pool.corePoolSize() == 1);
    CHECK(pool.maximumPoolSize() == 2);
  }
  SECTION("setMaximumPoolSize(1) on (2, 3): below core") {
    ThreadPoolExecutor pool(2, 3, 1s, WorkQueue::bounded(10));
    requireInvalidArgumentNaming(thrownBy([&] { pool.setMaximumPoolSize(1); }), {"maximumPoolSize", "1"});
    CHECK(pool.corePoolSize() == 2);
    CHECK(pool.maximumPoolSize() == 3);
  }
  SECTION("setMaximumPoolSize(0) (Java's -1: std::size_t cannot be negative)") {
    ThreadPoolExecutor pool(0, 3, 1s, WorkQueue::bounded(10));
    requireInvalidArgumentNaming(thrownBy([&] { pool.setMaximumPoolSize(0); }), {"maximumPoolSize", "0"});
    CHECK(pool.maximumPoolSize() == 3);
  }
  SECTION("setKeepAliveTime(-1ms)") {
    ThreadPoolExecutor pool(1, 2, 1s, WorkQueue::bounded(10));
    requireInvalidArgumentNaming(thrownBy([&] { pool.setKeepAliveTime(-1ms); }), {"keepAliveTime", "-1"});
    CHECK(pool.keepAliveTime() == 1s);
  }
}

TEST_CASE("core and max stay equal through refused updates for sizes 1 to 4 (CON-09)",
          "[executor][construction][resize]") {
  ThreadPoolExecutor pool(1, 1, 1s, WorkQueue::bounded(10));
  for (std::size_t s = 1; s <= 4; ++s) {
    INFO("s = " << s);
    pool.setMaximumPoolSize(s);
    pool.setCorePoolSize(s);
    CHECK_THROWS_AS(pool.setMaximumPoolSize(s - 1), std::invalid_argument);
    CHECK(pool.corePoolSize() == s);
    CHECK(pool.maximumPoolSize() == s);
    CHECK_THROWS_AS(pool.setCorePoolSize(s + 1), std::invalid_argument);
    CHECK(pool.corePoolSize() == s);
    CHECK(pool.maximumPoolSize() == s);
  }
}

TEST_CASE("an empty callable is refused with invalid_argument and counts nothing (CON-10: Java's NPE)",
          "[executor][construction]") {
  ThreadPoolExecutor pool(1, 1, 1s, WorkQueue::bounded(10));
  const bool afterShutdown = GENERATE(false, true);
  INFO((afterShutdown ? "after shutdown" : "running pool"));
  if (afterShutdown) pool.shutdown();

  const std::function<void()> emptyAction;
  const std::function<int()> emptyCallable;
  void (*nullFunction)() = nullptr;
  SECTION("execute(empty std::function)") { CHECK_THROWS_AS(pool.execute(emptyAction), std::invalid_argument); }
  SECTION("execute(null function pointer)") { CHECK_THROWS_AS(pool.execute(nullFunction), std::invalid_argument); }
  SECTION("submit(empty std::function<void()>)") {
    CHECK_THROWS_AS((void)pool.submit(emptyAction), std::invalid_argument);
  }
  SECTION("submit(empty std::function<int()>)") {
    CHECK_THROWS_AS((void)pool.submit(emptyCallable), std::invalid_argument);
  }
  SECTION("tryExecute(empty std::function)") {
    CHECK_THROWS_AS((void)pool.tryExecute(emptyAction), std::invalid_argument);
  }
  const PoolStats stats = pool.stats();
  CHECK(stats.taskCount == 0);
  CHECK(stats.rejectedCount == 0);
  CHECK(stats.poolSize == 0);
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("constructing with an empty name throws invalid_argument saying the name must not be empty",
          "[executor][construction][bad-input]") {
  ThreadPoolOptions options = poolOptions("unnamed", 1, 1, WorkQueue::bounded(10));
  options.name.clear();
  CHECK_THROWS_AS(ThreadPoolExecutor(options), std::invalid_argument);
  CHECK_THROWS_WITH(ThreadPoolExecutor(options), "coexec::ThreadPoolExecutor: name must not be empty");
}

TEST_CASE("an empty callable or Task is refused with invalid_argument naming the operation that refused it",
          "[executor][construction][bad-input]") {
  ThreadPoolExecutor pool(poolOptions("empty", 1, 1, WorkQueue::bounded(10)));
  const std::function<void()> emptyAction;
  const std::string callable = ": the task is empty (an empty std::function or a null pointer)";
  CHECK_THROWS_AS(pool.execute(emptyAction), std::invalid_argument);
  CHECK_THROWS_WITH(pool.execute(emptyAction), "coexec::ThreadPoolExecutor::execute" + callable);
  CHECK_THROWS_WITH((void)pool.submit(emptyAction), "coexec::ThreadPoolExecutor::submit" + callable);
  CHECK_THROWS_WITH((void)pool.submit(emptyAction, TaskOptions{.name = "named"}),
                    "coexec::ThreadPoolExecutor::submit" + callable);
  CHECK_THROWS_WITH((void)pool.tryExecute(emptyAction), "coexec::ThreadPoolExecutor::tryExecute" + callable);
  const std::string task =
      ": the Task is empty (default-constructed or moved from), so there is no coroutine to start.";
  CHECK_THROWS_AS(pool.execute(Task<void>()), std::invalid_argument);
  CHECK_THROWS_WITH(pool.execute(Task<void>()), "coexec::ThreadPoolExecutor::execute" + task);
  CHECK_THROWS_WITH((void)pool.tryExecute(Task<void>()), "coexec::ThreadPoolExecutor::tryExecute" + task);
  const PoolStats stats = pool.stats();
  CHECK(stats.taskCount == 0);
  CHECK(stats.rejectedCount == 0);
}

TEST_CASE("death child: a pool destroyed by one of its own tasks", "[.][executor][death]") {
  if (!isDeathChild()) return;
  prepareDeathChild();
  auto pool = std::make_unique<ThreadPoolExecutor>(poolOptions("selfkill", 1, 1, WorkQueue::bounded(4)));
  pool->execute([&pool] { pool.reset(); });  // the destructor on the pool's own thread: abort
  std::this_thread::sleep_for(kLong);        // the abort ends the process long before
}

TEST_CASE("a pool destroyed on one of its own threads prints the error and aborts the program",
          "[executor][lifecycle][bad-input][death]") {
  requireAbortsWith(
      "death child: a pool destroyed by one of its own tasks",
      "coexec: fatal: ~ThreadPoolExecutor of pool 'selfkill': coexec::ThreadPoolExecutor::close (or the "
      "destructor) called from a thread of pool 'selfkill' itself: a pool cannot wait for its own threads");
}

}  // namespace
}  // namespace coexec::test
