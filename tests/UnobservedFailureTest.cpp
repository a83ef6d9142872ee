// SPDX-License-Identifier: BSL-1.0
#include "coexec/ThreadPoolOptions.h"

// No silently lost failure: a submitted task that fails and whose result
// nobody reads is reported once to the pool's uncaught-exception handler,
// marked unobserved (ThreadPoolOptions::reportUnobservedFailures). A result
// that was read, a cancellation, and the option turned off report nothing;
// combinators that consume their children's results never report twice.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "DeathTestSupport.h"
#include "TestSupport.h"
#include "coexec/AsCompleted.h"
#include "coexec/Errors.h"
#include "coexec/InvokeAll.h"
#include "coexec/Sleep.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/TaskGroup.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/WhenAll.h"

using namespace std::chrono_literals;

using coexec::CancellationToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::RejectionPolicy;
using coexec::Task;
using coexec::TaskInfo;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::Counter;
using coexec::test::Gate;
using coexec::test::kLeads;
using coexec::test::kLong;
using coexec::test::Lead;
using coexec::test::OpenOnExit;

namespace {

/// A task's own exception, numbered so that each report names its task.
struct TaskError : std::runtime_error {
  explicit TaskError(int id) : std::runtime_error("task " + std::to_string(id) + " failed"), id(id) {}
  int id;
};

struct Report {
  int id = -1;  // TaskError::id, or -1 for another exception
  bool unobserved = false;
  std::string poolName;
  std::string threadName;
  std::thread::id reportedOn;
};

/// A thread-safe uncaught-exception handler that records every report.
/// Declare it before the pool and the Futures: reports may come from any of
/// them.
class Reports {
 public:
  coexec::UncaughtExceptionHandler handler() {
    return [this](std::exception_ptr error, const TaskInfo& info) {
      Report report{-1, info.unobserved, std::string(info.poolName), std::string(info.threadName),
                    std::this_thread::get_id()};
      try {
        std::rethrow_exception(error);
      } catch (const TaskError& e) {
        report.id = e.id;
      } catch (...) {
      }
      {
        std::lock_guard lock(mutex_);
        items_.push_back(std::move(report));
      }
      arrived_.arrive();
    };
  }
  std::vector<Report> items() const {
    std::lock_guard lock(mutex_);
    return items_;
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return items_.size();
  }
  [[nodiscard]] bool waitFor(std::size_t n) { return arrived_.waitFor(n); }

 private:
  mutable std::mutex mutex_;
  std::vector<Report> items_;
  Counter arrived_;
};

ThreadPoolOptions reportingPool(Reports& reports, std::string name = "unread", std::size_t threads = 1) {
  ThreadPoolOptions options;
  options.name = std::move(name);
  options.corePoolSize = threads;
  options.maximumPoolSize = threads;
  options.uncaughtExceptionHandler = reports.handler();
  return options;
}

Task<int> failingCoroutine(int id) {
  if (id >= 0) throw TaskError(id);
  co_return id;
}

}  // namespace

TEST_CASE("a failure whose Future was dropped before it failed is reported once, unobserved, by the pool thread",
          "[unobserved]") {
  Reports reports;
  Gate gate;
  ThreadPoolExecutor pool(reportingPool(reports, "early"));
  OpenOnExit release(gate);
  {
    auto future = pool.submit([&gate]() -> int {
      gate.wait();
      throw TaskError(1);
    });
  }  // dropped unread, before the task fails
  gate.open();
  REQUIRE(reports.waitFor(1));
  pool.close();
  const std::vector<Report> items = reports.items();
  REQUIRE(items.size() == 1);
  CHECK(items[0].id == 1);
  CHECK(items[0].unobserved);
  CHECK(items[0].poolName == "early");
  CHECK(items[0].threadName == "early-1");
  CHECK(items[0].reportedOn != std::this_thread::get_id());  // the pool thread dropped the last reference
  CHECK(pool.stats().failedCount == 1);
}

TEST_CASE("a failure whose Future is dropped after it failed is reported by the thread dropping the Future",
          "[unobserved]") {
  Reports reports;
  std::optional<Future<int>> future;
  {
    ThreadPoolExecutor pool(reportingPool(reports, "late"));
    future.emplace(pool.submit([]() -> int { throw TaskError(2); }));
    REQUIRE(future->waitFor(kLong));
    pool.close();                // the pool thread has let go of the task: the Future holds the last reference
    CHECK(reports.size() == 0);  // settled, but the Future may still be read
  }
  // The pool is gone; the report still goes to the handler it was built with.
  future.reset();
  const std::vector<Report> items = reports.items();
  REQUIRE(items.size() == 1);
  CHECK(items[0].id == 2);
  CHECK(items[0].unobserved);
  CHECK(items[0].poolName == "late");
  CHECK(items[0].threadName == "late-1");  // the thread that ran the task
  CHECK(items[0].reportedOn == std::this_thread::get_id());
}

TEST_CASE("a failed coroutine task whose Future is dropped unread is reported once", "[unobserved][coroutine]") {
  Reports reports;
  ThreadPoolExecutor pool(reportingPool(reports, "coro"));
  { auto future = pool.submit(failingCoroutine(3)); }
  REQUIRE(reports.waitFor(1));
  pool.close();
  const std::vector<Report> items = reports.items();
  REQUIRE(items.size() == 1);
  CHECK(items[0].id == 3);
  CHECK(items[0].unobserved);
}

TEST_CASE("a failure that was read is never reported: get(), co_await, whenAll, asCompleted, invokeAll, TaskGroup",
          "[unobserved]") {
  Reports reports;
  ThreadPoolExecutor pool(reportingPool(reports, "read", 2));
  SECTION("get()") {
    auto future = pool.submit([]() -> int { throw TaskError(1); });
    CHECK_THROWS_AS(future.get(), TaskError);
  }
  SECTION("co_await") {
    auto awaitIt = [&pool]() -> Task<void> {
      auto future = pool.submit([]() -> int { throw TaskError(1); });
      CHECK_THROWS_AS(co_await future, TaskError);
    };
    coexec::syncWait(awaitIt());
  }
  SECTION("whenAll of Futures") {
    auto both = [&pool]() -> Task<void> {
      auto a = pool.submit([]() -> int { throw TaskError(1); });
      auto b = pool.submit([]() -> int { throw TaskError(2); });
      auto all = coexec::whenAll(a, b);
      CHECK_THROWS_AS(co_await all, TaskError);
    };
    coexec::syncWait(both());
  }
  SECTION("asCompleted") {
    auto drain = [&pool]() -> Task<void> {
      std::vector<Future<int>> futures;
      for (int i = 0; i < 3; ++i)
        futures.push_back(pool.submit([i]() -> int { throw TaskError(i); }));
      auto completions = coexec::asCompleted(std::move(futures));
      int failures = 0;
      while (std::optional<Future<int>> done = co_await completions.next()) {
        CHECK_THROWS_AS(done->get(), TaskError);
        ++failures;
      }
      CHECK(failures == 3);
    };
    coexec::syncWait(drain());
  }
  SECTION("invokeAll with every task failing") {
    auto all = [&pool]() -> Task<void> {
      std::vector<std::function<int()>> tasks;
      for (int i = 0; i < 4; ++i)
        tasks.push_back([i]() -> int { throw TaskError(i); });
      auto invoked = pool.invokeAll(tasks);
      CHECK_THROWS_AS(co_await invoked, TaskError);
    };
    coexec::syncWait(all());
  }
  SECTION("TaskGroup joined") {
    auto group = [&pool]() -> Task<void> {
      coexec::TaskGroup tasks(pool);
      auto a = tasks.spawn([]() -> int { throw TaskError(1); });
      auto b = tasks.spawn([]() -> int { throw TaskError(2); });
      auto joined = tasks.join();
      CHECK_THROWS_AS(co_await joined, TaskError);
    };
    coexec::syncWait(group());
  }
  pool.close();  // every reference the pool held is gone: a report would have come by now
  CHECK(reports.size() == 0);
  CHECK(pool.stats().failedCount >= 1);
}

TEST_CASE("a cancelled task is never reported as unobserved", "[unobserved][cancel]") {
  Reports reports;
  Gate gate;
  ThreadPoolExecutor pool(reportingPool(reports, "cancel"));
  OpenOnExit release(gate);
  Counter started;
  {
    // Running when cancelled, then throwing something else: the Future reports OperationCancelled.
    auto running = pool.submit([&](CancellationToken token) -> int {
      started.arrive();
      gate.wait();
      if (token.isCancellationRequested()) throw TaskError(1);
      return 0;
    });
    REQUIRE(started.waitFor(1));
    auto queued = pool.submit([]() -> int { throw TaskError(2); });  // cancelled before it starts
    auto selfCancelled = pool.submit([]() -> int { throw OperationCancelled(); });
    CHECK(running.cancel());
    CHECK(queued.cancel());
  }  // all dropped unread
  gate.open();
  pool.close();
  CHECK(reports.size() == 0);
}

TEST_CASE("a task whose beforeExecute hook throws after a cancel reached it fails with the hook's error, reported "
          "when unread",
          "[unobserved][cancel][hooks][reliability]") {
  // Caught by the fault sweep (beforeExecute): a detached child cancelled
  // with its parent just as it started, whose hook then threw. Its Future
  // held the hook's error, but the unread report was skipped as if the
  // cancellation had superseded it, and the failure was lost.
  Reports reports;
  Gate gate;
  Counter started;
  std::atomic<Future<int>*> victim{nullptr};
  ThreadPoolOptions options = reportingPool(reports, "hookcancel");
  options.hooks.beforeExecute = [&victim](const TaskInfo& info) {
    if (info.priority != 7) return;
    // (No Catch2 assertion here: it is not thread-safe. A wrong turn throws
    // another error, which the checks below see.)
    Future<int>* future = victim.load();
    if (future == nullptr || !future->cancel()) throw std::logic_error("the cancel did not reach the started task");
    throw TaskError(3);  // running (started): the cancel only marked it; the hook fails it
  };
  const bool read = GENERATE(false, true);
  INFO((read ? "the Future is read" : "the Future is dropped unread"));
  ThreadPoolExecutor pool(std::move(options));
  OpenOnExit release(gate);
  auto blocker = pool.submit([&] {
    started.arrive();
    gate.wait();
    return 0;
  });
  REQUIRE(started.waitFor(1));
  std::optional<Future<int>> future;
  future.emplace(pool.submit([]() -> int { return 1; }, 7));  // queued behind the blocker
  victim = &*future;
  gate.open();
  REQUIRE(future->waitFor(kLong));
  if (read) {
    CHECK_THROWS_AS(future->get(), TaskError);  // the hook's error, not OperationCancelled
  }
  future.reset();
  (void)blocker.get();
  pool.close();
  const std::vector<Report> items = reports.items();
  if (read) {
    CHECK(items.empty());
  } else {
    REQUIRE(items.size() == 1);
    CHECK(items[0].id == 3);
    CHECK(items[0].unobserved);
  }
  CHECK(pool.stats().failedCount == 1);
}

TEST_CASE("reportUnobservedFailures = false reports nothing for unread failures, and execute() still reports",
          "[unobserved][options]") {
  Reports reports;
  ThreadPoolOptions options = reportingPool(reports, "off");
  options.reportUnobservedFailures = false;
  ThreadPoolExecutor pool(std::move(options));
  {
    auto future = pool.submit([]() -> int { throw TaskError(1); });
  }
  pool.execute([] { throw TaskError(2); });
  pool.close();
  const std::vector<Report> items = reports.items();
  REQUIRE(items.size() == 1);
  CHECK(items[0].id == 2);
  CHECK_FALSE(items[0].unobserved);
}

TEST_CASE("every unread failure is reported exactly once, and execute() failures are not reported twice",
          "[unobserved]") {
  Reports reports;
  constexpr int kTasks = 200;
  ThreadPoolOptions options = reportingPool(reports, "once", 2);
  options.workQueue = WorkQueue::bounded(2 * kTasks);
  ThreadPoolExecutor pool(std::move(options));
  for (int i = 0; i < kTasks; ++i) {
    if (i % 2 == 0) {
      (void)pool.submit([i]() -> int { throw TaskError(i); });  // dropped at once, unread
    } else {
      pool.execute([i] { throw TaskError(i); });
    }
  }
  pool.close();
  std::vector<Report> items = reports.items();
  REQUIRE(items.size() == kTasks);
  std::sort(items.begin(), items.end(), [](const Report& a, const Report& b) { return a.id < b.id; });
  for (int i = 0; i < kTasks; ++i) {
    CHECK(items[i].id == i);
    CHECK(items[i].unobserved == (i % 2 == 0));  // submit()'s unread failures; execute()'s are plain uncaught
  }
}

TEST_CASE("a caller-run task that fails with its Future dropped unread is reported", "[unobserved][policy]") {
  Reports reports;
  Gate gate;
  Counter started;
  ThreadPoolOptions options = reportingPool(reports, "caller");
  options.workQueue = WorkQueue::bounded(1);
  options.rejectionPolicy = RejectionPolicy::callerRuns();
  ThreadPoolExecutor pool(std::move(options));
  OpenOnExit release(gate);
  coexec::test::executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  coexec::test::executeBlocked(pool, 1, started, gate);  // fills the queue
  {
    auto future = pool.submit([]() -> int { throw TaskError(5); });
  }  // runs here, in the caller
  const std::vector<Report> items = reports.items();
  REQUIRE(items.size() == 1);
  CHECK(items[0].id == 5);
  CHECK(items[0].unobserved);
  CHECK(items[0].threadName == "(caller)");
  CHECK(items[0].reportedOn == std::this_thread::get_id());
}

/// A pool of one busy thread and a full queue of one: the next submission
/// reaches the rejection policy. The gate releases the busy tasks.
ThreadPoolOptions saturatedPool(Reports& reports, const char* name, RejectionPolicy policy) {
  ThreadPoolOptions options = reportingPool(reports, name);
  options.workQueue = WorkQueue::bounded(1);
  options.rejectionPolicy = std::move(policy);
  return options;
}

namespace {

Task<int> failingAfterSleep(int id) {
  co_await coexec::sleepFor(1ms);
  throw TaskError(id);
}

}  // namespace

TEST_CASE("a caller-run coroutine task that fails with its Future dropped unread is reported",
          "[unobserved][policy][coroutine][reliability]") {
  // Caught by the model-based stress driver: a coroutine task run by
  // callerRuns() was not watched, so its unread failure went nowhere.
  Reports reports;
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(saturatedPool(reports, "caller", RejectionPolicy::callerRuns()));
  OpenOnExit release(gate);
  coexec::test::executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  coexec::test::executeBlocked(pool, 1, started, gate);  // fills the queue
  (void)pool.submit(failingCoroutine(7));                // runs here, in the caller, and fails at once
  {
    auto future = pool.submit(failingAfterSleep(8));  // starts here, fails after its sleep, on another thread
  }
  REQUIRE(reports.waitFor(2));
  std::vector<Report> items = reports.items();
  std::sort(items.begin(), items.end(), [](const Report& a, const Report& b) { return a.id < b.id; });
  REQUIRE(items.size() == 2);
  CHECK(items[0].id == 7);
  CHECK(items[1].id == 8);
  for (const Report& r : items) {
    CHECK(r.unobserved);
    CHECK(r.threadName == "(caller)");
  }
}

TEST_CASE("a fire-and-forget coroutine that fails under callerRuns reaches the uncaught handler",
          "[unobserved][policy][coroutine][reliability]") {
  // Caught by the model-based stress driver: it was printed to stderr
  // instead, past the pool's handler.
  Reports reports;
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(saturatedPool(reports, "caller", RejectionPolicy::callerRuns()));
  OpenOnExit release(gate);
  coexec::test::executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  coexec::test::executeBlocked(pool, 1, started, gate);
  pool.execute([]() -> Task<void> {
    (void)co_await failingCoroutine(9);
  });
  REQUIRE(reports.waitFor(1));
  const std::vector<Report> items = reports.items();
  REQUIRE(items.size() == 1);
  CHECK(items[0].id == 9);
  CHECK_FALSE(items[0].unobserved);
  CHECK(items[0].threadName == "(caller)");
}

TEST_CASE("a coroutine task run on a newThreadRuns temporary thread that fails unread is reported",
          "[unobserved][policy][coroutine][reliability]") {
  // Caught by the model-based stress driver, as the callerRuns() case above.
  Reports reports;
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(saturatedPool(reports, "temporary", RejectionPolicy::newThreadRuns(2)));
  OpenOnExit release(gate);
  coexec::test::executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  coexec::test::executeBlocked(pool, 1, started, gate);
  (void)pool.submit(failingCoroutine(11));
  pool.execute([]() -> Task<void> {
    (void)co_await failingCoroutine(12);
  });
  REQUIRE(reports.waitFor(2));
  std::vector<Report> items = reports.items();
  std::sort(items.begin(), items.end(), [](const Report& a, const Report& b) { return a.id < b.id; });
  REQUIRE(items.size() == 2);
  CHECK(items[0].id == 11);
  CHECK(items[0].unobserved);
  CHECK(items[1].id == 12);
  CHECK_FALSE(items[1].unobserved);
  for (const Report& r : items) CHECK(r.threadName == "(temporary thread)");
}

TEST_CASE("an unjoined TaskGroup's failure is reported once, as unobserved", "[unobserved][taskGroup]") {
  Reports reports;
  ThreadPoolExecutor pool(reportingPool(reports, "group"));
  {
    coexec::TaskGroup group(pool);
    Future<int> child = group.spawn([]() -> int { throw TaskError(9); });
    child.wait();
    REQUIRE(coexec::test::eventually([&] { return group.running() == 0; }));
  }  // the group and the child's Future go unread
  pool.close();
  const std::vector<Report> items = reports.items();
  REQUIRE(items.size() == 1);
  CHECK(items[0].id == 9);
  CHECK(items[0].unobserved);
}

TEST_CASE("Futures dropped on another thread while their tasks fail: every failure is reported exactly once",
          "[unobserved][race]") {
  Reports reports;
  const int rounds = static_cast<int>(coexec::test::stressSize(600, 6));
  ThreadPoolOptions options = reportingPool(reports, "race", 2);
  // Unbounded: the rounds do not wait for their task to end, so a bounded
  // queue could fill and refuse a round on a busy machine.
  options.workQueue = WorkQueue::unbounded();
  ThreadPoolExecutor pool(std::move(options));
  for (int i = 0; i < rounds; ++i) {
    auto gate = std::make_shared<Gate>();
    std::optional<Future<int>> future(pool.submit([gate, i]() -> int {
      gate->wait();
      throw TaskError(i);
    }));
    const Lead lead = kLeads[static_cast<std::size_t>(i) % std::size(kLeads)];
    coexec::test::race(
        lead, [&] { gate->open(); }, [&] { future.reset(); });  // the drop on another thread
  }
  pool.close();
  std::vector<Report> items = reports.items();
  REQUIRE(items.size() == static_cast<std::size_t>(rounds));
  std::sort(items.begin(), items.end(), [](const Report& a, const Report& b) { return a.id < b.id; });
  for (int i = 0; i < rounds; ++i) {
    CHECK(items[static_cast<std::size_t>(i)].id == i);
    CHECK(items[static_cast<std::size_t>(i)].unobserved);
  }
}

// ---- a task destroyed during exit -------------------------------------------

namespace {

// Never destroyed: the child drops the Future it holds from an atexit handler.
std::optional<Future<int>>* lateFuture = nullptr;

void dropLateFuture() {
  lateFuture->reset();  // the task's last reference: its report, from here
  std::fputs("the Future was dropped after the static destructors\n", stdout);
  std::fflush(stdout);
}

}  // namespace

TEST_CASE("exit child: a failed task's Future dropped after the static destructors", "[.]") {
  if (!coexec::test::isDeathChild()) return;
  // Registered before anything arms a report, so it runs after exit() has
  // destroyed every static that the report and the task use, if any is ever
  // destroyed: a task may be dropped on a thread that outlives them (Asio's
  // system_executor threads, a detached thread).
  std::atexit(dropLateFuture);
  lateFuture = new std::optional<Future<int>>();
  ThreadPoolOptions options;
  options.name = "late";
  options.uncaughtExceptionHandler = [](const std::exception_ptr& error, const TaskInfo& info) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      std::fprintf(stdout, "reported%s: %s\n", info.unobserved ? " unobserved" : "", e.what());
    }
    std::fflush(stdout);
  };
  {
    ThreadPoolExecutor pool(options);
    lateFuture->emplace(pool.submit([]() -> int { throw TaskError(7); }));
    REQUIRE((*lateFuture)->waitFor(kLong));
    pool.close();
  }
  // main returns: exit() runs the static destructors, then dropLateFuture.
}

TEST_CASE("a failed task whose Future is dropped during exit after the static destructors is still reported",
          "[unobserved][exit]") {
  const coexec::test::ChildOutcome outcome =
      coexec::test::runDeathChild("exit child: a failed task's Future dropped after the static destructors");
  INFO("the child wrote:\n" << outcome.output);
  REQUIRE_FALSE(outcome.killed);
  CHECK_FALSE(outcome.signalled);
  CHECK(outcome.exitCode == 0);
  CHECK_THAT(outcome.output, Catch::Matchers::Contains("reported unobserved: task 7 failed"));
  CHECK_THAT(outcome.output, Catch::Matchers::Contains("the Future was dropped after the static destructors"));
}
