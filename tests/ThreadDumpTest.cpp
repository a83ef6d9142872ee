// SPDX-License-Identifier: BSL-1.0
#include "coexec/ThreadDump.h"

// dumpThreads() and task names: a named task running on a worker shows with
// its name and age, idle workers show parked once their spin window is
// over, local queue lengths, the formatting, and the name reaching the
// hooks and the report of a failure nobody read (TaskOptions, TaskInfo).

#include <algorithm>
#include <chrono>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "Assertions.h"
#include <fmt/format.h>

#include "TestSupport.h"
#include "coexec/TaskOptions.h"
#include "coexec/ThreadPoolExecutor.h"

using namespace std::chrono_literals;

using coexec::TaskInfo;
using coexec::TaskOptions;
using coexec::ThreadDump;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkerDump;
using coexec::WorkerState;
using coexec::WorkQueue;
using coexec::test::Counter;
using coexec::test::eventually;
using coexec::test::Gate;
using coexec::test::OpenOnExit;

namespace {

ThreadPoolOptions dumpPool(std::size_t threads) {
  ThreadPoolOptions options;
  options.name = "dump";
  options.corePoolSize = threads;
  options.maximumPoolSize = threads;
  return options;
}

const WorkerDump* findWorker(const ThreadDump& dump, const std::string& name) {
  for (const WorkerDump& worker : dump.workers)
    if (worker.name == name) return &worker;
  return nullptr;
}

}  // namespace

TEST_CASE("a dump shows the worker running a named gated task, with its name and an age that grows", "[dump][names]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(dumpPool(1));
  OpenOnExit release(gate);
  auto future = pool.submit(
      [&] {
        started.arrive();
        gate.wait();
        return 1;
      },
      {.name = "resize-image"});
  REQUIRE(started.waitFor(1));
  ThreadDump dump = pool.dumpThreads();
  REQUIRE(dump.workers.size() == 1);
  CHECK(dump.workers[0].name == "dump-1");
  CHECK(dump.workers[0].state == WorkerState::running);
  CHECK(dump.workers[0].runningTask);
  CHECK(dump.workers[0].taskName == "resize-image");
  CHECK(dump.stats.activeCount == 1);
  // The age is on a coarse clock: it passes 0 within a tick or two.
  REQUIRE(eventually([&] { return pool.dumpThreads().workers.at(0).taskAge > 0ns; }));
  const std::string text = fmt::format("{}", pool.dumpThreads());
  CHECK(text.find("pool 'dump' RUNNING") != std::string::npos);
  CHECK(text.find("\n  dump-1 RUNNING task 'resize-image' for ") != std::string::npos);
  gate.open();
  CHECK(future.get() == 1);
}

TEST_CASE("an unnamed task shows as running, without a name", "[dump]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(dumpPool(1));
  OpenOnExit release(gate);
  coexec::test::executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  const ThreadDump dump = pool.dumpThreads();
  REQUIRE(dump.workers.size() == 1);
  CHECK(dump.workers[0].runningTask);
  CHECK(dump.workers[0].taskName.empty());
  CHECK(fmt::format("{}", dump.workers[0]).find("dump-1 RUNNING task (unnamed) for ") == 0);
}

TEST_CASE("idle workers show parked once their spin window is over, running none", "[dump]") {
  ThreadPoolExecutor pool(dumpPool(3));
  REQUIRE(pool.prestartAllCoreThreads() == 3);
  REQUIRE(eventually([&] {
    const ThreadDump dump = pool.dumpThreads();
    if (dump.workers.size() != 3) return false;
    for (const WorkerDump& worker : dump.workers)
      if (worker.state != WorkerState::parked) return false;
    return true;
  }));
  const ThreadDump dump = pool.dumpThreads();
  for (const WorkerDump& worker : dump.workers) {
    CHECK_FALSE(worker.runningTask);
    CHECK(worker.taskAge == 0ns);
    CHECK(worker.localQueueSize == 0);
  }
  CHECK(findWorker(dump, "dump-1") != nullptr);
  CHECK(findWorker(dump, "dump-3") != nullptr);
  CHECK(fmt::format("{}", *findWorker(dump, "dump-2")) == "dump-2 PARKED, local queue 0");
}

TEST_CASE("a dump shows the tasks a worker submitted waiting in its local queue", "[dump]") {
  Gate gate;
  Counter started;
  ThreadPoolOptions options = dumpPool(1);
  options.workQueue = WorkQueue::bounded(16);
  ThreadPoolExecutor pool(std::move(options));
  OpenOnExit release(gate);
  pool.execute(
      [&] {
        for (int i = 0; i < 3; ++i)
          pool.execute([] {});  // from the pool's own thread: its local queue
        started.arrive();
        gate.wait();
      },
      TaskOptions{.name = "fork"});
  REQUIRE(started.waitFor(1));
  const ThreadDump dump = pool.dumpThreads();
  REQUIRE(dump.workers.size() == 1);
  CHECK(dump.workers[0].localQueueSize == 3);
  CHECK(dump.workers[0].taskName == "fork");
  CHECK(dump.stats.localQueueSize == 3);
  gate.open();
  pool.close();
  CHECK(pool.stats().completedTaskCount == 4);
}

TEST_CASE("WorkerDump and ThreadDump format one line per worker", "[dump][format]") {
  const WorkerDump named{"io-1", WorkerState::running, true, 1204ms, "resize", 3};
  const WorkerDump unnamed{"io-2", WorkerState::running, true, 5ms, "", 0};
  const WorkerDump coroutine{"io-3", WorkerState::running, false, 0ns, "", 0};
  const WorkerDump idle{"io-4", WorkerState::idle, false, 0ns, "", 1};
  CHECK(fmt::format("{}", named) == "io-1 RUNNING task 'resize' for 1.204s, local queue 3");
  CHECK(fmt::format("{}", unnamed) == "io-2 RUNNING task (unnamed) for 0.005s, local queue 0");
  CHECK(fmt::format("{}", coroutine) == "io-3 RUNNING a coroutine, local queue 0");
  CHECK(fmt::format("{}", idle) == "io-4 IDLE, local queue 1");
  CHECK(fmt::format("{:>8}", WorkerState::parked) == "  PARKED");

  ThreadDump dump;
  dump.stats.name = "io";
  dump.workers = {named, idle};
  dump.temporaryThreads = 2;
  CHECK(fmt::format("{}", dump) == fmt::format("{}\n  {}\n  {}\n  temporary threads: 2", dump.stats, named, idle));
}

TEST_CASE("a task's name reaches the hooks and the uncaught-exception handler", "[names][hooks]") {
  std::mutex mutex;
  std::vector<std::string> before;
  std::vector<std::string> reported;
  Counter reports;
  ThreadPoolOptions options = dumpPool(1);
  options.hooks.beforeExecute = [&](const TaskInfo& info) {
    std::lock_guard lock(mutex);
    before.emplace_back(info.taskName);
  };
  options.uncaughtExceptionHandler = [&](std::exception_ptr, const TaskInfo& info) {
    {
      std::lock_guard lock(mutex);
      reported.push_back(fmt::format("{}:{}", info.taskName, info.unobserved));
    }
    reports.arrive();
  };
  ThreadPoolExecutor pool(std::move(options));
  std::string transient = "built-at-runtime";  // the name is copied: it need not outlive the call
  auto named = pool.submit([] { return 1; }, {.name = transient});
  transient.assign("overwritten-now!");
  CHECK(named.get() == 1);
  pool.execute([] { throw std::runtime_error("boom"); }, {.name = "fire-and-forget"});
  (void)pool.submit([]() -> int { throw std::runtime_error("unread"); }, {.name = "unread-task"});
  pool.execute([] {});
  REQUIRE(reports.waitFor(2));
  pool.close();
  std::lock_guard lock(mutex);
  CHECK(before == std::vector<std::string>{"built-at-runtime", "fire-and-forget", "unread-task", ""});
  std::sort(reported.begin(), reported.end());
  CHECK(reported == std::vector<std::string>{"fire-and-forget:false", "unread-task:true"});
}

TEST_CASE("TaskOptions::priority orders a priority queue like submit's priority argument", "[names][priority]") {
  Gate gate;
  Counter started;
  std::mutex mutex;
  std::vector<int> order;
  ThreadPoolOptions options = dumpPool(1);
  options.workQueue = WorkQueue::priority(8);
  ThreadPoolExecutor pool(std::move(options));
  OpenOnExit release(gate);
  coexec::test::executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  for (int p : {1, 3, 2}) {
    pool.execute(
        [&, p] {
          std::lock_guard lock(mutex);
          order.push_back(p);
        },
        {.name = "ranked", .priority = p});
  }
  gate.open();
  pool.close();
  CHECK(order == std::vector<int>{3, 2, 1});
}

TEST_CASE("the table of task names keeps kMaxTaskNames names, then names new ones '(too many task names)'", "[names]") {
  // Runs alone in its process under ctest; run by hand, it comes last in this file.
  Gate first;
  Gate second;
  Counter started;
  ThreadPoolOptions options = dumpPool(1);
  options.workQueue = WorkQueue::unbounded();  // room for every named task below
  ThreadPoolExecutor pool(std::move(options));
  std::string lastName;
  for (unsigned i = 0; i <= TaskOptions::kMaxTaskNames; ++i) {
    lastName = fmt::format("overflow-{}", i);
    pool.execute([] {}, {.name = lastName});
  }
  OpenOnExit releaseFirst(first);
  OpenOnExit releaseSecond(second);
  const auto dumpedNameOf = [&](const std::string& name, Gate& gate, std::size_t arrivals) {
    pool.execute(
        [&started, &gate] {
          started.arrive();
          gate.wait();
        },
        {.name = name});
    REQUIRE(started.waitFor(arrivals));
    return pool.dumpThreads().workers.at(0).taskName;
  };
  CHECK(dumpedNameOf("one-more-name", first, 1) == "(too many task names)");
  first.open();
  CHECK(dumpedNameOf("overflow-0", second, 2) == "overflow-0");  // a name kept before the table filled keeps its own
  second.open();
}
