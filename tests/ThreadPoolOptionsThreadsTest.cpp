// SPDX-License-Identifier: BSL-1.0
// ThreadPoolOptions' defaults, the uncaught-exception handler, thread names and the thread factory,
// and a terminated hook that throws (bad input, docs/reliability.md).
#include "coexec/ThreadPoolOptions.h"

// The hooks (HK-01..05) are in ThreadPoolOptionsHooksTest.cpp.

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "TestSupport.h"
#include "ThreadPoolOptionsTestSupport.h"
#include "coexec/ThreadPoolExecutor.h"

using coexec::Future;
using coexec::PoolStats;
using coexec::TaskInfo;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::copyOf;
using coexec::test::Counter;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::Log;
using coexec::test::OpenOnExit;
using coexec::test::SeenInfo;
using coexec::test::TaskError;

namespace {

std::string osThreadName() {
  char name[64] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  return name;
}

/// Sends the process's stderr to a temporary file from construction until
/// text() (or the destructor, if a check throws first) puts it back.
class StderrCapture {
 public:
  StderrCapture() : file_(std::tmpfile()) {
    REQUIRE(file_ != nullptr);
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    if (saved_ < 0) std::fclose(file_);
    REQUIRE(saved_ >= 0);
    ::dup2(::fileno(file_), STDERR_FILENO);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;
  ~StderrCapture() {
    restore();
    std::fclose(file_);
  }

  /// Puts stderr back and returns everything written to it meanwhile.
  std::string text() {
    restore();
    std::string text;
    std::rewind(file_);
    char buffer[512];
    while (std::fgets(buffer, sizeof buffer, file_) != nullptr)
      text += buffer;
    return text;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }

  std::FILE* file_;
  int saved_ = -1;
};

}  // namespace

TEST_CASE("ThreadPoolOptions defaults are the documented ones", "[options]") {
  const ThreadPoolOptions options;
  CHECK(options.name == "coexec");
  CHECK(options.corePoolSize == 1u);
  CHECK_FALSE(options.maximumPoolSize.has_value());  // unset: corePoolSize, at least 1
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
  StderrCapture capture;
  {
    ThreadPoolOptions options;
    options.name = "loud";
    ThreadPoolExecutor pool(std::move(options));
    pool.execute([] { throw std::runtime_error("kaboom-7"); });
    pool.close();
  }
  const std::string text = capture.text();
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
  // Every body started must have returned before the test's locals go: the
  // pool retries a failed start on its clock (ThreadFactory), so there may
  // be more than the two attempts below.
  std::atomic<std::size_t> bodiesStarted{0};
  std::vector<std::string> errors;
  std::mutex errorsMutex;
  {
    ThreadPoolOptions options;
    options.name = "detach";
    options.workQueue = WorkQueue::bounded(4);
    options.threadFactory = [&](std::string, std::function<void()> body) {
      bodiesStarted.fetch_add(1);
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
  // The pool is gone: no more attempts. At least two: the core thread (step
  // 1) and a thread for the queued task.
  const std::size_t attempts = bodiesStarted.load();
  CHECK(attempts >= 2);
  REQUIRE(bodiesReturned.waitFor(attempts));
  std::lock_guard lock(errorsMutex);
  REQUIRE_FALSE(errors.empty());
  CHECK_THAT(errors.front(), Catch::Matchers::Contains("not joinable"));
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("a terminated hook that throws is printed to stderr and dropped, and the pool still terminates",
          "[hooks][lifecycle][bad-input]") {
  StderrCapture capture;
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
  const std::string text = capture.text();
  INFO("stderr: " << text);
  CHECK(terminated);
  CHECK(calls.load() == 1);
  CHECK_THAT(text, Catch::Matchers::Contains("coexec: the terminated hook on pool 'hkthrow' thread '") &&
                       Catch::Matchers::Contains("threw: terminated hook failed (expected by the test)"));
}
