// SPDX-License-Identifier: BSL-1.0
// The four admission routes of a ThreadPoolExecutor, made visible on a tight
// pool: core 1, max 2, a queue of 1, and the callerRuns policy.
//
//   task 1 -> no thread yet (below core): starts core thread demo-1
//   task 2 -> core is full: waits in the queue
//   task 3 -> queue is full, below max: starts extra thread demo-2
//   task 4 -> queue full, at max: rejected, and callerRuns runs it on main
//
// The program checks the routes it prints and exits non-zero on a mismatch.

#include <coexec/coexec.h>

#include <fmt/format.h>

#include <latch>
#include <string>

namespace {

thread_local std::string currentThread = "main";

struct Route {
  const char* expectedRoute;
  std::string expectedThread;
  std::string ranOn;
};

}  // namespace

int main() {
  using coexec::RejectionPolicy;
  using coexec::ThreadPoolExecutor;
  using coexec::ThreadPoolOptions;
  using coexec::WorkQueue;

  ThreadPoolOptions options;
  options.name = "demo";
  options.corePoolSize = 1;
  options.maximumPoolSize = 2;
  options.workQueue = WorkQueue::bounded(1);
  options.rejectionPolicy = RejectionPolicy::callerRuns();
  options.hooks.beforeExecute = [](const coexec::TaskInfo& info) { currentThread = std::string(info.threadName); };
  ThreadPoolExecutor pool(options);

  fmt::print("coexec routing demo: pool '{}', core {}, max {}, queue {}, policy {}\n\n", pool.name(),
             pool.corePoolSize(), pool.maximumPoolSize(), pool.workQueue().describe(), pool.rejectionPolicy().name());

  Route routes[4] = {
      {"started a core thread", "demo-1", {}},
      {"waited in the queue", "demo-1", {}},
      {"started an extra thread", "demo-2", {}},
      {"rejected: callerRuns ran it in the caller", "main", {}},
  };
  std::latch releaseFirst(1);
  std::latch releaseThird(1);

  auto task1 = pool.submit([&] {
    releaseFirst.wait();
    routes[0].ranOn = currentThread;
  });
  auto task2 = pool.submit([&] { routes[1].ranOn = currentThread; });
  auto task3 = pool.submit([&] {
    releaseThird.wait();
    routes[2].ranOn = currentThread;
  });
  fmt::print("after 3 submits: {}\n", pool.stats());
  auto task4 = pool.submit([&] { routes[3].ranOn = currentThread; });  // runs here, before submit returns
  fmt::print("after 4 submits: {}\n\n", pool.stats());

  // Release in an order that makes the threads deterministic: task 1 frees
  // demo-1, which then takes task 2 from the queue; then task 3 finishes.
  releaseFirst.count_down();
  task1.get();
  task2.get();
  releaseThird.count_down();
  task3.get();
  task4.get();

  int mismatches = 0;
  for (int i = 0; i < 4; ++i) {
    const Route& r = routes[i];
    const bool ok = r.ranOn == r.expectedThread;
    mismatches += ok ? 0 : 1;
    fmt::print("task {} -> {:<42} ran on {:<7} {}\n", i + 1, r.expectedRoute, r.ranOn,
               ok ? "ok" : fmt::format("MISMATCH (expected {})", r.expectedThread));
  }

  pool.shutdown();
  const bool terminated = pool.awaitTermination(std::chrono::seconds(10));
  const coexec::PoolStats stats = pool.stats();
  fmt::print("\nfinal: {}\n", stats);
  if (!terminated || stats.completedTaskCount != 3 || stats.rejectedCount != 1) {
    fmt::print("unexpected final state (terminated {}, completed {}, rejected {})\n", terminated,
               stats.completedTaskCount, stats.rejectedCount);
    return 1;
  }
  if (mismatches != 0) {
    fmt::print("{} route(s) did not go as expected\n", mismatches);
    return 1;
  }
  fmt::print("all four routes behaved as the admission contract says\n");
  return 0;
}
