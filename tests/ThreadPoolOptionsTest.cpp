#include "coexec/ThreadPoolOptions.h"

// The options a pool is built from: defaults, hooks (HK, ported from
// ../shared/reference/jdk-executor-behaviours.md with their numbers), thread
// names and the thread factory, and the uncaught-exception handler.
//
// coexec differs from the JDK on HK-04 on purpose: a throwing beforeExecute
// fails the task (its Future reports the hook's exception, it counts as
// failed) and the worker survives, instead of the worker dying and the task
// counting as completed.

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "TestSupport.h"
#include "coexec/ResumeOn.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using namespace std::chrono_literals;

using coexec::Future;
using coexec::PoolStats;
using coexec::RejectionPolicy;
using coexec::Task;
using coexec::TaskInfo;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::Counter;
using coexec::test::eventually;
using coexec::test::executeBlocked;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::OpenOnExit;

namespace {

/// A task's own exception type, to tell it apart from anything the pool throws.
struct TaskError {
  int code;
};

/// What beforeExecute throws in these tests.
struct HookError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A copy of a TaskInfo (its views only live for the call).
struct SeenInfo {
  std::string poolName;
  std::string threadName;
  bool hasFuture = false;
  int priority = 0;
  std::thread::id thread;
};

SeenInfo copyOf(const TaskInfo& info) {
  return {std::string(info.poolName), std::string(info.threadName), info.hasFuture, info.priority,
          std::this_thread::get_id()};
}

std::string osThreadName() {
  char name[64] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  return name;
}

/// Collects values from pool threads; read them on the test thread once the
/// writers are done.
template <class T>
class Log {
 public:
  void add(T value) {
    std::lock_guard lock(mutex_);
    items_.push_back(std::move(value));
  }
  std::vector<T> items() const {
    std::lock_guard lock(mutex_);
    return items_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<T> items_;
};

}  // namespace

TEST_CASE("ThreadPoolOptions defaults are the documented ones", "[options]") {
  const ThreadPoolOptions options;
  CHECK(options.name == "coexec");
  CHECK(options.corePoolSize == 1u);
  CHECK(options.maximumPoolSize == 1u);
  CHECK(options.keepAliveTime == std::chrono::seconds(60));
  CHECK_FALSE(options.allowCoreThreadTimeOut);
  CHECK(options.workQueue.kind() == WorkQueue::Kind::bounded);
  CHECK(options.workQueue.capacity() == 1024u);
  CHECK(options.rejectionPolicy.name() == "abort");
  CHECK_FALSE(options.threadFactory);
  CHECK_FALSE(options.hooks.beforeExecute);
  CHECK_FALSE(options.hooks.afterExecute);
  CHECK_FALSE(options.hooks.terminated);
  CHECK_FALSE(options.uncaughtExceptionHandler);

  ThreadPoolExecutor pool{ThreadPoolOptions{}};
  CHECK(pool.name() == "coexec");
  CHECK(pool.corePoolSize() == 1u);
  CHECK(pool.maximumPoolSize() == 1u);
  CHECK(pool.keepAliveTime() == std::chrono::seconds(60));
  CHECK(pool.workQueue().capacity() == 1024u);
  CHECK(pool.rejectionPolicy().name() == "abort");
}

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
        seen.started = std::this_thread::get_id();
        startedOn = seen.started;
        co_await coexec::resumeOn(pool);  // a resumption, not a task: no hook
        Future<int> later = q.submit([&remote] {
          remote.wait();
          return 1;
        });
        reached.arrive();
        co_await later;
        seen.finished = std::this_thread::get_id();
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
  REQUIRE(pool.prestartCoreThread());  // the last thread to exit runs the hook
  std::atomic<bool> waiterTerminated{false};
  std::atomic<bool> waiterSawHookReturned{false};
  // Waits from before the shutdown; joined after the guard below opens the gate.
  std::jthread waiter([&] {
    waiterTerminated = pool.awaitTermination(kLong);
    waiterSawHookReturned = hookReturned.load();
  });
  OpenOnExit release(hookMayReturn);
  pool.shutdown();
  REQUIRE(hookEntered.waitFor(1));
  // The hook is running and cannot return yet.
  CHECK_FALSE(pool.awaitTermination(0ns));
  CHECK_FALSE(pool.isTerminated());
  hookMayReturn.open();
  waiter.join();
  CHECK(waiterTerminated.load());
  CHECK(waiterSawHookReturned.load());
  CHECK(pool.awaitTermination(0ns));
  CHECK(hookReturned.load());
}

// ---- uncaught-exception handler -----------------------------------------------

TEST_CASE("the uncaught handler gets each execute exception exactly once with the pool and thread name",
          "[options][uncaught][exceptions]") {
  Log<SeenInfo> infos;
  Log<std::string> messages;
  ThreadPoolOptions options;
  options.name = "uh";
  options.workQueue = WorkQueue::bounded(16);
  options.uncaughtExceptionHandler = [&](std::exception_ptr error, const TaskInfo& info) {
    infos.add(copyOf(info));
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      messages.add(e.what());
    } catch (...) {
      messages.add("not a std::exception");
    }
  };
  ThreadPoolExecutor pool(std::move(options));

  for (int i = 0; i < 3; ++i)
    pool.execute([i] { throw std::runtime_error("e" + std::to_string(i)); });
  auto submitted = pool.submit([] { throw std::runtime_error("for the Future"); });
  pool.execute([] {});  // a task that does not throw
  CHECK_THROWS_WITH(submitted.get(), "for the Future");
  pool.close();

  CHECK(messages.items() == std::vector<std::string>{"e0", "e1", "e2"});
  for (const auto& info : infos.items()) {
    CHECK(info.poolName == "uh");
    CHECK(info.threadName == "uh-1");
    CHECK_FALSE(info.hasFuture);
    CHECK(info.thread != std::this_thread::get_id());
  }
  const PoolStats s = pool.stats();
  CHECK(s.failedCount == 4u);
  CHECK(s.completedTaskCount == 1u);
  CHECK(s.largestPoolSize == 1u);  // the worker survived every throw
}

TEST_CASE("an exception from the uncaught handler is dropped and the worker survives",
          "[options][uncaught][exceptions]") {
  std::atomic<int> handlerCalls{0};
  Log<std::string> threadNames;
  ThreadPoolOptions options;
  options.name = "uh";
  options.hooks.beforeExecute = [&](const TaskInfo& info) { threadNames.add(std::string(info.threadName)); };
  options.uncaughtExceptionHandler = [&](std::exception_ptr, const TaskInfo&) {
    ++handlerCalls;
    throw std::runtime_error("the handler failed (expected by the test)");
  };
  ThreadPoolExecutor pool(std::move(options));
  for (int i = 0; i < 3; ++i)
    pool.execute([] { throw TaskError{1}; });
  CHECK(pool.submit([] { return 5; }).get() == 5);
  pool.close();
  CHECK(handlerCalls == 3);
  CHECK(threadNames.items() == std::vector<std::string>(4, "uh-1"));
}

TEST_CASE("the default uncaught handler prints the error with the pool and thread name to stderr",
          "[options][uncaught][exceptions]") {
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  std::fflush(stderr);
  const int savedStderr = ::dup(STDERR_FILENO);
  REQUIRE(savedStderr >= 0);
  ::dup2(::fileno(capture), STDERR_FILENO);
  {
    ThreadPoolOptions options;
    options.name = "loud";
    ThreadPoolExecutor pool(std::move(options));
    pool.execute([] { throw std::runtime_error("kaboom-7"); });
    pool.close();
  }
  std::fflush(stderr);
  ::dup2(savedStderr, STDERR_FILENO);
  ::close(savedStderr);

  std::string text;
  std::rewind(capture);
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, capture) != nullptr)
    text += buffer;
  std::fclose(capture);
  INFO("stderr: " << text);
  CHECK(text.find("kaboom-7") != std::string::npos);
  CHECK(text.find("loud") != std::string::npos);
  CHECK(text.find("loud-1") != std::string::npos);
}

// ---- thread names and the thread factory ----------------------------------------

TEST_CASE("default threads are named after the pool with a count from 1", "[options][threads]") {
  Counter started;
  Log<std::string> osNames;
  Log<std::string> infoNames;
  Gate gate;
  ThreadPoolOptions options;
  options.name = "nm";
  options.corePoolSize = 3;
  options.maximumPoolSize = 3;
  options.hooks.beforeExecute = [&](const TaskInfo& info) { infoNames.add(std::string(info.threadName)); };
  ThreadPoolExecutor pool(std::move(options));
  OpenOnExit release{gate};
  for (int i = 0; i < 3; ++i) {
    pool.execute([&] {
      osNames.add(osThreadName());
      started.arrive();
      gate.wait();
    });
  }
  REQUIRE(started.waitFor(3));
  gate.open();
  pool.close();
  auto names = osNames.items();
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"nm-1", "nm-2", "nm-3"});
  auto fromInfo = infoNames.items();
  std::sort(fromInfo.begin(), fromInfo.end());
  CHECK(fromInfo == names);
}

TEST_CASE("a long pool name is cut to 15 characters in the OS but kept whole in TaskInfo", "[options][threads]") {
  Log<std::string> osNames;
  Log<std::string> infoNames;
  ThreadPoolOptions options;
  options.name = "averyveryverylongpoolname";
  options.hooks.beforeExecute = [&](const TaskInfo& info) { infoNames.add(std::string(info.threadName)); };
  ThreadPoolExecutor pool(std::move(options));
  pool.submit([&] { osNames.add(osThreadName()); }).get();
  pool.close();
  CHECK(infoNames.items() == std::vector<std::string>{"averyveryverylongpoolname-1"});
  CHECK(osNames.items() == std::vector<std::string>{"averyveryverylo"});
}

TEST_CASE("a custom ThreadFactory gets each thread's name and its threads run the tasks", "[options][threads]") {
  Counter started;
  Log<std::string> factoryNames;
  Log<std::thread::id> factoryThreads;
  Log<std::thread::id> taskThreads;
  Gate gate;
  ThreadPoolOptions options;
  options.name = "fx";
  options.corePoolSize = 2;
  options.maximumPoolSize = 2;
  options.threadFactory = [&](std::string name, std::function<void()> body) {
    factoryNames.add(name);
    std::thread thread(std::move(body));
    factoryThreads.add(thread.get_id());
    return thread;
  };
  ThreadPoolExecutor pool(std::move(options));
  OpenOnExit release{gate};
  for (int i = 0; i < 2; ++i) {
    pool.execute([&] {
      taskThreads.add(std::this_thread::get_id());
      started.arrive();
      gate.wait();
    });
  }
  REQUIRE(started.waitFor(2));
  gate.open();
  pool.close();
  CHECK(factoryNames.items() == std::vector<std::string>{"fx-1", "fx-2"});
  const auto made = factoryThreads.items();
  for (const auto& id : taskThreads.items())
    CHECK(std::find(made.begin(), made.end(), id) != made.end());
  CHECK(pool.stats().largestPoolSize == 2u);
}

TEST_CASE("a thread factory that detaches its thread: the thread returns without touching the pool",
          "[options][factory]") {
  // The factory starts the body on a thread, detaches it and returns an empty
  // std::thread. The pool refuses it (not joinable) and erases the worker; the
  // detached body must then return at once rather than run a worker on erased
  // state (or on a pool that is gone by the time it runs).
  Counter bodiesReturned;
  Gate holdBodies;  // the bodies start only once the pool is gone
  std::vector<std::string> errors;
  std::mutex errorsMutex;
  {
    ThreadPoolOptions options;
    options.name = "detach";
    options.workQueue = WorkQueue::bounded(4);
    options.threadFactory = [&](std::string, std::function<void()> body) {
      std::thread([&bodiesReturned, &holdBodies, body = std::move(body)] {
        holdBodies.wait();
        body();
        bodiesReturned.arrive();
      }).detach();
      return std::thread();
    };
    options.uncaughtExceptionHandler = [&](std::exception_ptr error, const TaskInfo&) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        std::lock_guard lock(errorsMutex);
        errors.emplace_back(e.what());
      }
    };
    ThreadPoolExecutor pool(options);
    Future<int> queued = pool.submit([] { return 1; });  // no thread: it waits in the queue
    CHECK(pool.stats().poolSize == 0);
    CHECK_FALSE(queued.isDone());
    (void)pool.shutdownNow();
  }
  holdBodies.open();
  CHECK(bodiesReturned.waitFor(2));  // two attempts: the core thread (step 1) and a thread for the queued task
  std::lock_guard lock(errorsMutex);
  REQUIRE_FALSE(errors.empty());
  CHECK_THAT(errors.front(), Catch::Matchers::Contains("not joinable"));
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("a terminated hook that throws is printed to stderr and dropped, and the pool still terminates",
          "[hooks][lifecycle][bad-input]") {
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  std::fflush(stderr);
  const int savedStderr = ::dup(STDERR_FILENO);
  REQUIRE(savedStderr >= 0);
  ::dup2(::fileno(capture), STDERR_FILENO);
  std::atomic<int> calls{0};
  bool terminated = false;
  {
    ThreadPoolOptions options;
    options.name = "hkthrow";
    options.hooks.terminated = [&calls] {
      ++calls;
      throw std::runtime_error("terminated hook failed (expected by the test)");
    };
    ThreadPoolExecutor pool(std::move(options));
    CHECK(pool.submit([] { return 1; }).get() == 1);
    pool.shutdown();
    terminated = pool.awaitTermination(kLong);
  }
  std::fflush(stderr);
  ::dup2(savedStderr, STDERR_FILENO);
  ::close(savedStderr);
  std::string text;
  std::rewind(capture);
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, capture) != nullptr)
    text += buffer;
  std::fclose(capture);
  INFO("stderr: " << text);
  CHECK(terminated);
  CHECK(calls.load() == 1);
  CHECK_THAT(text, Catch::Matchers::Contains("coexec: the terminated hook on pool 'hkthrow' thread '") &&
                       Catch::Matchers::Contains("threw: terminated hook failed (expected by the test)"));
}
