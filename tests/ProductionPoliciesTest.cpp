// SPDX-License-Identifier: BSL-1.0
#include "coexec/RejectionPolicy.h"

// The production rejection policies: abortWithReport (the report's
// contents, its rate limit on the pool's clock, a sink free to call the
// pool) and newThreadRuns (its cap, its tasks' results, termination waiting
// for its threads, failures reaching the handler), and the docs' snippets.

#include <pthread.h>

#include <chrono>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "Assertions.h"
#include <fmt/format.h>

#include "TestSupport.h"
#include "coexec/Clock.h"
#include "coexec/Errors.h"
#include "coexec/Executors.h"
#include "coexec/ThreadPoolExecutor.h"

using namespace std::chrono_literals;

using coexec::Future;
using coexec::ManualClock;
using coexec::RejectedExecution;
using coexec::RejectionPolicy;
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

/// A sink that keeps every report.
class Sink {
 public:
  RejectionPolicy::ReportSink sink() {
    return [this](std::string_view report) {
      std::lock_guard lock(mutex_);
      reports_.emplace_back(report);
    };
  }
  std::vector<std::string> reports() const {
    std::lock_guard lock(mutex_);
    return reports_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> reports_;
};

/// One thread, a queue of one: saturated by one running and one queued task.
ThreadPoolOptions smallPool(std::string name, RejectionPolicy policy) {
  ThreadPoolOptions options;
  options.name = std::move(name);
  options.workQueue = WorkQueue::bounded(1);
  options.rejectionPolicy = std::move(policy);
  return options;
}

std::string workerName() {
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  return name;
}

}  // namespace

TEST_CASE("abortWithReport rejects like abort and first reports the pool, its stats and each worker's task and age",
          "[policy][report]") {
  Sink sink;
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(smallPool("busy", RejectionPolicy::abortWithReport(sink.sink())));
  OpenOnExit release(gate);
  pool.execute(
      [&] {
        started.arrive();
        gate.wait();
      },
      {.name = "slow-query"});
  REQUIRE(started.waitFor(1));
  REQUIRE(eventually([&] { return pool.dumpThreads().workers.at(0).taskAge >= 10ms; }));
  pool.execute([] {});  // queued
  CHECK(pool.rejectionPolicy().name() == "abortWithReport");
  CHECK_THROWS_AS(pool.execute([] {}), RejectedExecution);
  const std::vector<std::string> reports = sink.reports();
  REQUIRE(reports.size() == 1);
  const std::string& report = reports[0];
  INFO(report);
  CHECK(report.find("coexec: task rejected: the work queue is full") == 0);
  CHECK(report.find("\npool 'busy' RUNNING: size 1 (core 1, max 1, largest 1), active 1, queued 1/1") !=
        std::string::npos);
  CHECK(report.find("rejected 1") != std::string::npos);
  const std::string worker = "\n  busy-1 RUNNING task 'slow-query' for ";
  const std::size_t at = report.find(worker);
  REQUIRE(at != std::string::npos);
  const std::size_t seconds = report.find("s, local queue 0", at + worker.size());
  REQUIRE(seconds != std::string::npos);
  CHECK(std::stod(report.substr(at + worker.size(), seconds - at - worker.size())) >= 0.010);
  CHECK(report.find("not reported") == std::string::npos);
}

TEST_CASE("abortWithReport writes one report for a storm of rejections, and the next one counts the suppressed",
          "[policy][report]") {
  Sink sink;
  Gate gate;
  Counter started;
  ManualClock clock;
  ThreadPoolOptions options = smallPool("storm", RejectionPolicy::abortWithReport(sink.sink(), 1s));
  options.clock = &clock;
  ThreadPoolExecutor pool(std::move(options));
  OpenOnExit release(gate);
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  executeBlocked(pool, 1, started, gate);  // queued
  int rejected = 0;
  for (int i = 0; i < 1000; ++i) {
    try {
      pool.execute([] {});
    } catch (const RejectedExecution&) {
      ++rejected;
    }
  }
  CHECK(rejected == 1000);
  CHECK(sink.reports().size() == 1);
  clock.advance(999ms);
  CHECK_THROWS_AS(pool.execute([] {}), RejectedExecution);
  CHECK(sink.reports().size() == 1);  // still within the interval: suppressed too
  clock.advance(1ms);
  CHECK_THROWS_AS(pool.execute([] {}), RejectedExecution);
  const std::vector<std::string> reports = sink.reports();
  REQUIRE(reports.size() == 2);
  INFO(reports[1]);
  CHECK(reports[1].find("(1000 earlier rejections were not reported: at most one report per 1s)") != std::string::npos);
  CHECK(pool.stats().rejectedCount == 1002);
}

TEST_CASE("abortWithReport calls its sink without the pool's lock, a throwing sink does not stop the rejection",
          "[policy][report]") {
  Gate gate;
  Counter started;
  std::vector<std::string> seen;
  ThreadPoolExecutor* self = nullptr;
  auto sink = [&](std::string_view) {
    seen.push_back(fmt::format("{}", self->stats()));  // takes the pool's lock: would deadlock under it
    (void)self->dumpThreads();
    throw std::runtime_error("the sink failed");
  };
  ThreadPoolExecutor pool(smallPool("lockfree", RejectionPolicy::abortWithReport(sink, 0s)));
  self = &pool;
  OpenOnExit release(gate);
  executeBlocked(pool, 2, started, gate);
  REQUIRE(started.waitFor(1));
  CHECK_THROWS_AS(pool.execute([] {}), RejectedExecution);
  CHECK_THROWS_AS(pool.execute([] {}), RejectedExecution);  // interval 0: every rejection reports
  CHECK(seen.size() == 2);
}

TEST_CASE("abortWithReport and newThreadRuns refuse bad arguments", "[policy]") {
  CHECK_THROWS_AS(RejectionPolicy::abortWithReport(RejectionPolicy::ReportSink{}), std::invalid_argument);
  CHECK_THROWS_AS(RejectionPolicy::abortWithReport([](std::string_view) {}, -1ms), std::invalid_argument);
  CHECK_THROWS_WITH(RejectionPolicy::abortWithReport(RejectionPolicy::ReportSink{}),
                    "coexec::RejectionPolicy::abortWithReport: the sink is empty");
  CHECK_THROWS_WITH(RejectionPolicy::abortWithReport([](std::string_view) {}, -1ms),
                    "coexec::RejectionPolicy::abortWithReport: interval must be non-negative, got -1000000ns");
  CHECK_THROWS_AS(RejectionPolicy::newThreadRuns(0), std::invalid_argument);
  CHECK_THROWS_WITH(RejectionPolicy::newThreadRuns(0), Catch::Matchers::Contains("maxTemporaryThreads"));
  CHECK(RejectionPolicy::newThreadRuns(1).name() == "newThreadRuns");
  CHECK(RejectionPolicy::abortWithReport().name() == "abortWithReport");
}

TEST_CASE("newThreadRuns runs rejected tasks on named temporary threads up to its cap, then rejects",
          "[policy][temporary]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(smallPool("cap", RejectionPolicy::newThreadRuns(2)));
  OpenOnExit release(gate);
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  executeBlocked(pool, 1, started, gate);  // queued: the pool is saturated
  std::vector<Future<std::string>> extra;
  for (int i = 0; i < 2; ++i) {
    extra.push_back(pool.submit([&] {
      started.arrive();
      gate.wait();
      return workerName();
    }));
  }
  REQUIRE(started.waitFor(3));  // both temporary threads run their task
  CHECK_THROWS_AS(pool.submit([] { return std::string(); }), RejectedExecution);  // a third: beyond the cap
  coexec::PoolStats stats = pool.stats();
  CHECK(stats.temporaryThreadRuns == 2);
  CHECK(stats.rejectedCount == 3);
  CHECK(stats.taskCount == 2);
  CHECK(pool.dumpThreads().temporaryThreads == 2);
  CHECK(fmt::format("{}", stats).find(", temporary runs 2") != std::string::npos);
  gate.open();
  std::vector<std::string> names;
  for (auto& future : extra)
    names.push_back(future.get());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"cap-tmp-1", "cap-tmp-2"});
  // Once they have ended, the cap has room again.
  REQUIRE(eventually([&] { return pool.dumpThreads().temporaryThreads == 0; }));
  pool.close();
  CHECK(pool.stats().temporaryThreadRuns == 2);
  coexec::test::checkLedgerAddsUp(pool.stats());
}

TEST_CASE("a pool terminates only once its temporary threads have finished", "[policy][temporary][lifecycle]") {
  Gate workers;
  Gate temporary;
  Counter started;
  ThreadPoolExecutor pool(smallPool("term", RejectionPolicy::newThreadRuns(1)));
  OpenOnExit releaseWorkers(workers);
  OpenOnExit releaseTemporary(temporary);
  executeBlocked(pool, 2, started, workers);  // one runs, one waits in the queue
  REQUIRE(started.waitFor(1));
  auto outside = pool.submit([&] {
    started.arrive();
    temporary.wait();
    return 7;
  });
  REQUIRE(started.waitFor(2));
  workers.open();
  pool.shutdown();
  CHECK_FALSE(pool.awaitTermination(50ms));  // the temporary thread still runs its task
  CHECK_FALSE(pool.isTerminated());
  CHECK_THROWS_AS(pool.execute([] {}), RejectedExecution);  // after shutdown: as abort()
  temporary.open();
  CHECK(pool.awaitTermination(kLong));
  CHECK(outside.get() == 7);
}

TEST_CASE("failures on a temporary thread reach the uncaught-exception handler", "[policy][temporary]") {
  Gate gate;
  Counter started;
  Counter reported;
  std::mutex mutex;
  std::vector<std::string> reports;
  ThreadPoolOptions options = smallPool("fail", RejectionPolicy::newThreadRuns(2));
  options.uncaughtExceptionHandler = [&](std::exception_ptr, const TaskInfo& info) {
    {
      std::lock_guard lock(mutex);
      reports.push_back(fmt::format("{} {}", info.threadName, info.unobserved));
    }
    reported.arrive();
  };
  ThreadPoolExecutor pool(std::move(options));
  OpenOnExit release(gate);
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  executeBlocked(pool, 1, started, gate);
  pool.execute([] { throw std::runtime_error("execute on a temporary thread"); });
  REQUIRE(reported.waitFor(1));
  REQUIRE(eventually([&] { return pool.dumpThreads().temporaryThreads == 0; }));
  {
    auto dropped = pool.submit([]() -> int { throw std::runtime_error("nobody reads this"); });
  }
  REQUIRE(reported.waitFor(2));
  gate.open();
  pool.close();
  std::lock_guard lock(mutex);
  CHECK(reports == std::vector<std::string>{"fail-tmp-1 false", "fail-tmp-2 true"});
}

TEST_CASE("docs/production.md: the policy snippets compile", "[policy][docs]") {
  // --- docs/production.md: policies ---
  ThreadPoolOptions api = coexec::Executors::fixed(8, 500, "api");
  api.rejectionPolicy = RejectionPolicy::abortWithReport();  // to stderr, at most once a second

  ThreadPoolOptions logged = coexec::Executors::fixed(8, 500, "logged");
  logged.rejectionPolicy = RejectionPolicy::abortWithReport(
      [](std::string_view report) { fmt::print(stderr, "[overload] {}\n", report); }, std::chrono::seconds(10));

  ThreadPoolOptions ingest = coexec::Executors::fixed(4, 100, "ingest");
  ingest.rejectionPolicy = RejectionPolicy::newThreadRuns(4);  // at most 4 extra threads, then abort()
  // --- end ---
  ThreadPoolExecutor a(std::move(api));
  ThreadPoolExecutor b(std::move(logged));
  ThreadPoolExecutor c(std::move(ingest));
  CHECK(a.rejectionPolicy().name() == "abortWithReport");
  CHECK(b.rejectionPolicy().name() == "abortWithReport");
  CHECK(c.rejectionPolicy().name() == "newThreadRuns");
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("abortWithReport after shutdown throws RejectedExecution like abort, after writing its report",
          "[policy][report][shutdown][bad-input]") {
  std::vector<std::string> reports;
  ThreadPoolExecutor pool(
      smallPool("downrep", RejectionPolicy::abortWithReport([&](std::string_view r) { reports.emplace_back(r); }, 0s)));
  pool.shutdown();
  CHECK_THROWS_AS(pool.execute([] {}), RejectedExecution);
  CHECK_THROWS_WITH((void)pool.submit([] { return 1; }), Catch::Matchers::Contains("the pool is shut down"));
  REQUIRE(reports.size() == 2);
  CHECK_THAT(reports[0], Catch::Matchers::Contains("the pool is shut down") &&
                             Catch::Matchers::Contains("pool 'downrep' TERMINATED"));
  CHECK(pool.stats().rejectedCount == 2);
}
