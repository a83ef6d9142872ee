// SPDX-License-Identifier: BSL-1.0
// The ThreadPoolOptions hooks (HK-01..05, ported from ../shared/reference/jdk-executor-behaviours.md
// with their numbers): beforeExecute/afterExecute, TaskInfo, the exceptions, the terminated hook.
#include "coexec/ThreadPoolOptions.h"

// coexec differs from the JDK on HK-04 on purpose: a throwing beforeExecute
// fails the task (its Future reports the hook's exception, it counts as
// failed) and the worker survives, instead of the worker dying and the task
// counting as completed.
//
// The defaults, the uncaught-exception handler, thread names and the thread
// factory, and a terminated hook that throws are in ThreadPoolOptionsThreadsTest.cpp.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "TestSupport.h"
#include "ThreadPoolOptionsTestSupport.h"
#include "coexec/ResumeOn.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/ThisThread.h"

using namespace std::chrono_literals;

using coexec::Future;
using coexec::PoolStats;
using coexec::RejectionPolicy;
using coexec::Task;
using coexec::TaskInfo;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::copyOf;
using coexec::test::Counter;
using coexec::test::executeBlocked;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::Log;
using coexec::test::OpenOnExit;
using coexec::test::SeenInfo;
using coexec::test::TaskError;

namespace {

/// What beforeExecute throws in these tests.
struct HookError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

// ---- HK: hooks ---------------------------------------------------------------

TEST_CASE("beforeExecute and afterExecute run around each task on its pool thread (HK-01)", "[hooks]") {
  Log<std::string> events;
  Log<std::thread::id> threads;
  Counter afterCalls;
  ThreadPoolOptions options;
  options.name = "hk";
  options.workQueue = WorkQueue::synchronous();
  options.hooks.beforeExecute = [&](const TaskInfo& info) {
    events.add("before " + std::string(info.threadName));
    threads.add(std::this_thread::get_id());
  };
  options.hooks.afterExecute = [&](const TaskInfo&, std::exception_ptr error) {
    events.add(error ? "after error" : "after ok");
    threads.add(std::this_thread::get_id());
    afterCalls.arrive();
  };
  ThreadPoolExecutor pool(std::move(options));

  pool.submit([&] {
        events.add("task");
        threads.add(std::this_thread::get_id());
      })
      .get();
  REQUIRE(afterCalls.waitFor(1));
  CHECK(events.items() == std::vector<std::string>{"before hk-1", "task", "after ok"});
  const auto ids = threads.items();
  REQUIRE(ids.size() == 3u);
  CHECK(ids[0] != std::this_thread::get_id());
  CHECK(ids[1] == ids[0]);
  CHECK(ids[2] == ids[0]);
}

TEST_CASE("TaskInfo tells hooks the pool name thread name priority and whether there is a Future", "[hooks]") {
  Log<SeenInfo> seen;
  ThreadPoolOptions options;
  options.name = "info";
  options.hooks.beforeExecute = [&](const TaskInfo& info) { seen.add(copyOf(info)); };
  ThreadPoolExecutor pool(std::move(options));
  CHECK(pool.submit([] { return 1; }, 7).get() == 1);
  pool.execute([] {}, -3);
  pool.close();

  const auto infos = seen.items();
  REQUIRE(infos.size() == 2u);
  CHECK(infos[0].poolName == "info");
  CHECK(infos[0].threadName == "info-1");
  CHECK(infos[0].hasFuture);
  CHECK(infos[0].priority == 7);
  CHECK(infos[1].poolName == "info");
  CHECK(infos[1].threadName == "info-1");
  CHECK_FALSE(infos[1].hasFuture);
  CHECK(infos[1].priority == -3);
}

TEST_CASE("afterExecute receives exactly the exception each task threw (HK-03)", "[hooks][exceptions]") {
  const bool submitted = GENERATE(true, false);
  INFO((submitted ? "submit()" : "execute()"));
  Log<std::exception_ptr> afterErrors;
  std::atomic<int> beforeCalls{0};
  std::atomic<int> uncaught{0};
  ThreadPoolOptions options;
  options.name = "hk";
  options.workQueue = WorkQueue::bounded(16);
  options.hooks.beforeExecute = [&](const TaskInfo&) { ++beforeCalls; };
  options.hooks.afterExecute = [&](const TaskInfo&, std::exception_ptr error) { afterErrors.add(error); };
  options.uncaughtExceptionHandler = [&](std::exception_ptr, const TaskInfo&) { ++uncaught; };
  ThreadPoolExecutor pool(std::move(options));

  std::vector<std::function<void()>> bodies = {
      [] {},
      [] { throw std::runtime_error("boom"); },
      [] { throw TaskError{42}; },
      [] { throw 7; },
  };
  std::vector<Future<void>> futures;
  for (auto& body : bodies) {
    if (submitted) {
      futures.push_back(pool.submit(body));
    } else {
      pool.execute(body);
    }
  }
  pool.close();

  CHECK(beforeCalls == 4);
  const auto errors = afterErrors.items();
  REQUIRE(errors.size() == 4u);
  CHECK_FALSE(errors[0]);
  REQUIRE(errors[1]);
  CHECK_THROWS_WITH(std::rethrow_exception(errors[1]), "boom");
  REQUIRE(errors[2]);
  try {
    std::rethrow_exception(errors[2]);
  } catch (const TaskError& e) {
    CHECK(e.code == 42);
  } catch (...) {
    FAIL("afterExecute did not get the TaskError the task threw");
  }
  REQUIRE(errors[3]);
  try {
    std::rethrow_exception(errors[3]);
  } catch (int e) {
    CHECK(e == 7);
  } catch (...) {
    FAIL("afterExecute did not get the int the task threw");
  }

  if (submitted) {
    CHECK(uncaught == 0);  // a submitted task's exception goes to its Future only
    CHECK_NOTHROW(futures[0].get());
    CHECK_THROWS_WITH(futures[1].get(), "boom");
    CHECK_THROWS_AS(futures[2].get(), TaskError);
    CHECK_THROWS_AS(futures[3].get(), int);
  } else {
    CHECK(uncaught == 3);
  }
  const PoolStats s = pool.stats();
  CHECK(s.completedTaskCount == 1u);
  CHECK(s.failedCount == 3u);
}

TEST_CASE("a throwing beforeExecute fails the task with that exception and the worker survives (HK-04 coexec rule)",
          "[hooks][exceptions]") {
  std::atomic<int> bodyRan{0};
  std::atomic<int> afterCalls{0};
  Log<SeenInfo> uncaught;
  Log<std::string> handlerMessages;
  Log<std::string> threadNames;
  ThreadPoolOptions options;
  options.name = "hk";
  options.workQueue = WorkQueue::bounded(8);
  // Priority 1 marks the tasks whose beforeExecute throws.
  options.hooks.beforeExecute = [&](const TaskInfo& info) {
    threadNames.add(std::string(info.threadName));
    if (info.priority == 1) throw HookError("before refused");
  };
  options.hooks.afterExecute = [&](const TaskInfo&, std::exception_ptr) { ++afterCalls; };
  options.uncaughtExceptionHandler = [&](std::exception_ptr error, const TaskInfo& info) {
    uncaught.add(copyOf(info));
    try {
      std::rethrow_exception(error);
    } catch (const HookError& e) {
      handlerMessages.add(e.what());
    } catch (...) {
      handlerMessages.add("something else");
    }
  };
  ThreadPoolExecutor pool(std::move(options));

  auto refused = pool.submit([&] { return ++bodyRan; }, 1);
  pool.execute([&] { ++bodyRan; }, 1);
  auto accepted = pool.submit([&] { return 100 + ++bodyRan; }, 0);

  CHECK_THROWS_AS(refused.get(), HookError);
  CHECK(accepted.get() == 101);  // the only body that ran
  pool.close();

  CHECK(bodyRan == 1);
  CHECK(afterCalls == 1);                                                          // not called for the refused tasks
  CHECK(threadNames.items() == std::vector<std::string>{"hk-1", "hk-1", "hk-1"});  // the worker survived
  // The execute() task's hook exception goes to the uncaught handler.
  const auto infos = uncaught.items();
  REQUIRE(infos.size() == 1u);
  CHECK(infos[0].threadName == "hk-1");
  CHECK_FALSE(infos[0].hasFuture);
  CHECK(handlerMessages.items() == std::vector<std::string>{"before refused"});
  const PoolStats s = pool.stats();
  CHECK(s.failedCount == 2u);
  CHECK(s.completedTaskCount == 1u);
  CHECK(s.largestPoolSize == 1u);
}

TEST_CASE("an exception from afterExecute is dropped and the worker survives", "[hooks][exceptions]") {
  std::atomic<int> afterCalls{0};
  std::atomic<int> uncaught{0};
  Log<std::string> threadNames;
  ThreadPoolOptions options;
  options.name = "hk";
  options.hooks.beforeExecute = [&](const TaskInfo& info) { threadNames.add(std::string(info.threadName)); };
  options.hooks.afterExecute = [&](const TaskInfo&, std::exception_ptr) {
    ++afterCalls;
    throw std::runtime_error("afterExecute failed (expected by the test)");
  };
  options.uncaughtExceptionHandler = [&](std::exception_ptr, const TaskInfo&) { ++uncaught; };
  ThreadPoolExecutor pool(std::move(options));

  for (int i = 0; i < 3; ++i)
    CHECK(pool.submit([i] { return i; }).get() == i);
  pool.close();
  CHECK(afterCalls == 3);
  CHECK(uncaught == 0);
  CHECK(threadNames.items() == std::vector<std::string>{"hk-1", "hk-1", "hk-1"});
  const PoolStats s = pool.stats();
  CHECK(s.completedTaskCount == 3u);
  CHECK(s.failedCount == 0u);
}

TEST_CASE("terminated runs once with the pool shut down but not yet terminated (HK-05 LIF-07)", "[hooks][lifecycle]") {
  enum class End { shutdown, shutdownNow, close, destructor };
  const End end = GENERATE(End::shutdown, End::shutdownNow, End::close, End::destructor);
  INFO("ended by " << static_cast<int>(end));
  std::atomic<int> terminatedCalls{0};
  std::atomic<bool> sawShutdown{false};
  std::atomic<bool> sawTerminating{false};
  std::atomic<bool> sawTerminated{false};
  std::atomic<bool> hookSawTerminated{false};
  std::atomic<int> tasksRan{0};
  ThreadPoolExecutor* self = nullptr;  // set before the first task, read only by hooks

  ThreadPoolOptions options;
  options.name = "hk";
  options.corePoolSize = 2;
  options.maximumPoolSize = 2;
  options.workQueue = WorkQueue::bounded(32);
  options.hooks.beforeExecute = [&](const TaskInfo&) {
    if (self->isTerminated()) hookSawTerminated = true;
  };
  options.hooks.afterExecute = [&](const TaskInfo&, std::exception_ptr) {
    if (self->isTerminated()) hookSawTerminated = true;
  };
  options.hooks.terminated = [&] {
    ++terminatedCalls;
    sawShutdown = self->isShutdown();
    sawTerminating = self->isTerminating();
    sawTerminated = self->isTerminated();
  };
  std::optional<ThreadPoolExecutor> pool(std::in_place, std::move(options));
  self = &*pool;
  for (int i = 0; i < 20; ++i)
    pool->execute([&] { ++tasksRan; });

  switch (end) {
    case End::shutdown:
      pool->shutdown();
      REQUIRE(pool->awaitTermination(kLong));
      break;
    case End::shutdownNow:
      (void)pool->shutdownNow();
      REQUIRE(pool->awaitTermination(kLong));
      break;
    case End::close: pool->close(); break;
    case End::destructor: pool.reset(); break;
  }
  CHECK(terminatedCalls == 1);
  CHECK(sawShutdown);
  CHECK(sawTerminating);
  CHECK_FALSE(sawTerminated);
  CHECK_FALSE(hookSawTerminated);
  if (end != End::shutdownNow) CHECK(tasksRan == 20);

  if (pool) {  // LIF-07: later calls on the terminated pool do not run it again
    pool->shutdown();
    CHECK(pool->shutdownNow().empty());
    pool->close();
    pool.reset();
    CHECK(terminatedCalls == 1);
  }
}

TEST_CASE("terminated has already run when shutdown returns on a pool that never ran a task (HK-02)",
          "[hooks][lifecycle]") {
  std::atomic<int> terminatedCalls{0};
  std::atomic<std::thread::id> hookThread{};
  ThreadPoolOptions options;
  options.hooks.terminated = [&] {
    ++terminatedCalls;
    hookThread = std::this_thread::get_id();
  };
  ThreadPoolExecutor pool(std::move(options));
  pool.shutdown();
  CHECK(terminatedCalls == 1);
  CHECK(hookThread.load() == std::this_thread::get_id());
  CHECK(pool.isShutdown());
  CHECK(pool.isTerminated());
}

TEST_CASE("hooks do not run for caller-run tasks", "[hooks][rejection]") {
  Counter started;
  std::atomic<int> beforeCalls{0};
  std::atomic<int> afterCalls{0};
  std::atomic<bool> hookOnCaller{false};
  const auto caller = std::this_thread::get_id();
  Gate gate;
  ThreadPoolOptions options;
  options.workQueue = WorkQueue::bounded(1);
  options.rejectionPolicy = RejectionPolicy::callerRuns();
  options.hooks.beforeExecute = [&](const TaskInfo&) {
    ++beforeCalls;
    if (std::this_thread::get_id() == caller) hookOnCaller = true;
  };
  options.hooks.afterExecute = [&](const TaskInfo&, std::exception_ptr) {
    ++afterCalls;
    if (std::this_thread::get_id() == caller) hookOnCaller = true;
  };
  ThreadPoolExecutor pool(std::move(options));
  OpenOnExit release{gate};

  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  pool.execute([] {});  // queued
  auto callerRun = pool.submit([] { return std::this_thread::get_id(); });
  REQUIRE(callerRun.isDone());
  CHECK(callerRun.get() == caller);
  gate.open();
  pool.close();
  CHECK(beforeCalls == 2);
  CHECK(afterCalls == 2);
  CHECK_FALSE(hookOnCaller);
}

TEST_CASE("beforeExecute and afterExecute run once per coroutine task, on the threads that start and finish it",
          "[hooks][coroutine]") {
  constexpr int kCoroutineTag = 7;  // the priority marks the coroutine's hook calls
  struct HookCall {
    std::thread::id thread;
    std::string threadName;
  };
  std::mutex mutex;
  std::vector<HookCall> before;  // guarded by mutex
  std::vector<HookCall> after;   // guarded by mutex
  Gate remote;
  std::array<Gate, 2> blockerGates;
  std::array<std::atomic<std::thread::id>, 2> blockerThreads{};
  Counter reached;
  Counter blockersStarted;
  std::atomic<std::thread::id> startedOn{};

  ThreadPoolOptions options;
  options.name = "hc";
  options.corePoolSize = 2;
  options.maximumPoolSize = 2;
  options.workQueue = WorkQueue::bounded(8);
  options.hooks.beforeExecute = [&](const TaskInfo& info) {
    std::lock_guard lock(mutex);
    if (info.priority == kCoroutineTag) before.push_back({std::this_thread::get_id(), std::string(info.threadName)});
  };
  options.hooks.afterExecute = [&](const TaskInfo& info, std::exception_ptr) {
    std::lock_guard lock(mutex);
    if (info.priority == kCoroutineTag) after.push_back({std::this_thread::get_id(), std::string(info.threadName)});
  };
  ThreadPoolExecutor q(1, 1, 60s, WorkQueue::bounded(4));
  ThreadPoolExecutor pool(std::move(options));
  OpenOnExit releaseRemote(remote);
  OpenOnExit releaseFirst(blockerGates[0]);
  OpenOnExit releaseSecond(blockerGates[1]);

  struct Path {
    std::thread::id started;
    std::thread::id finished;
  };
  Future<Path> path = pool.submit(
      [&]() -> Task<Path> {
        Path seen;
        seen.started = coexec::thisThreadId();
        startedOn = seen.started;
        co_await coexec::resumeOn(pool);  // a resumption, not a task: no hook
        Future<int> later = q.submit([&remote] {
          remote.wait();
          return 1;
        });
        reached.arrive();
        co_await later;
        seen.finished = coexec::thisThreadId();
        co_return seen;
      },
      kCoroutineTag);
  REQUIRE(reached.waitFor(1));
  // Two blockers occupy both threads, so one of them runs on the thread that
  // started the coroutine (which it can do only once the coroutine has
  // suspended). Release the other: the coroutine must then finish there.
  for (std::size_t i = 0; i < 2; ++i) {
    pool.execute([&, i] {
      blockerThreads[i] = std::this_thread::get_id();
      blockersStarted.arrive();
      blockerGates[i].wait();
    });
  }
  REQUIRE(blockersStarted.waitFor(2));
  const std::thread::id starter = startedOn.load();
  const std::size_t onStarter = blockerThreads[0].load() == starter ? 0 : 1;
  REQUIRE(blockerThreads[onStarter].load() == starter);
  blockerGates[1 - onStarter].open();
  remote.open();
  const Path seen = path.get();
  blockerGates[onStarter].open();
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));

  CHECK(seen.started == starter);
  CHECK(seen.finished != seen.started);
  std::lock_guard lock(mutex);
  REQUIRE(before.size() == 1);
  REQUIRE(after.size() == 1);
  CHECK(before[0].thread == seen.started);
  CHECK(after[0].thread == seen.finished);
  CHECK(before[0].threadName.rfind("hc-", 0) == 0);
  CHECK(after[0].threadName.rfind("hc-", 0) == 0);
  CHECK(after[0].threadName != before[0].threadName);
}

TEST_CASE("awaitTermination returns true only after the terminated hook has returned", "[hooks][lifecycle]") {
  Gate hookMayReturn;
  Counter hookEntered;
  std::atomic<bool> hookReturned{false};
  ThreadPoolOptions options;
  options.name = "tw";
  options.hooks.terminated = [&] {
    hookEntered.arrive();
    hookMayReturn.wait();
    hookReturned = true;
  };
  ThreadPoolExecutor pool(std::move(options));
  REQUIRE(pool.prestartCoreThread());
  std::atomic<bool> waiterTerminated{false};
  std::atomic<bool> waiterSawHookReturned{false};
  // Waits from before the shutdown; joined after the guard below opens the gate.
  std::jthread waiter([&] {
    waiterTerminated = pool.awaitTermination(kLong);
    waiterSawHookReturned = hookReturned.load();
  });
  OpenOnExit release(hookMayReturn);
  // The hook runs on whichever thread finds the pool able to terminate: the
  // worker as it exits, or shutdown()'s caller if the worker has exited
  // already (as Java's terminated()). shutdown() is called from a thread of
  // its own, so that this thread can open the gate either way.
  std::jthread shutter([&pool] { pool.shutdown(); });
  REQUIRE(hookEntered.waitFor(1));
  // The hook is running and cannot return yet.
  CHECK_FALSE(pool.awaitTermination(0ns));
  CHECK_FALSE(pool.isTerminated());
  hookMayReturn.open();
  waiter.join();
  shutter.join();
  CHECK(waiterTerminated.load());
  CHECK(waiterSawHookReturned.load());
  CHECK(pool.awaitTermination(0ns));
  CHECK(hookReturned.load());
}
