// SPDX-License-Identifier: BSL-1.0
// What each rejection policy does with a task a saturated pool cannot admit:
// one thread (busy), a queue of one (full), and a third task.
//
//   abort()          -> submit() throws RejectedExecution, with a snapshot of the pool
//   discard()        -> the task is dropped; its Future reports RejectedExecution
//   discardOldest()  -> the queued task is evicted (its Future: RejectedExecution), the new one queued
//   a callable       -> decides: here it parks the task, and the caller runs it later
//   callerRuns()     -> after shutdown the task does not run; its Future: RejectedExecution
//
// The program checks every outcome and exits non-zero on a mismatch.

#include <coexec/coexec.h>

#include <fmt/format.h>

#include <chrono>
#include <latch>
#include <string_view>
#include <utility>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, std::string_view what) {
  fmt::print("{:<70} {}\n", what, ok ? "ok" : "MISMATCH");
  failures += ok ? 0 : 1;
}

// True if `future` reports RejectedExecution.
template <class R>
bool reportsRejected(coexec::Future<R>& future) {
  try {
    future.get();
  } catch (const coexec::RejectedExecution&) {
    return true;
  } catch (...) {
  }
  return false;
}

// A one-thread pool with a queue of one, filled: task 1 runs (held at the
// gate), task 2 waits in the queue. The next submission is rejected.
struct SaturatedPool {
  explicit SaturatedPool(coexec::RejectionPolicy policy)
      : pool(1, 1, std::chrono::seconds(60), coexec::WorkQueue::bounded(1), std::move(policy)) {
    running = pool.submit([this] {
      gate.wait();
      return 1;
    });
    queued = pool.submit([] { return 2; });
  }
  // Opens the gate; the pool's destructor then waits for its tasks.
  ~SaturatedPool() { open(); }
  void open() {
    if (!opened) gate.count_down();
    opened = true;
  }

  std::latch gate{1};
  bool opened = false;
  coexec::ThreadPoolExecutor pool;
  coexec::Future<int> running;
  coexec::Future<int> queued;
};

}  // namespace

int main() {
  {
    SaturatedPool s(coexec::RejectionPolicy::abort());
    try {
      [[maybe_unused]] auto third = s.pool.submit([] { return 3; });
      check(false, "abort(): submit() throws RejectedExecution");
    } catch (const coexec::RejectedExecution& e) {
      fmt::print("{}\n", e.what());
      check(e.snapshot().queueSize == 1 && e.snapshot().rejectedCount == 1,
            "abort(): submit() throws RejectedExecution");
    }
  }
  {
    SaturatedPool s(coexec::RejectionPolicy::discard());
    coexec::Future<int> third = s.pool.submit([] { return 3; });
    check(reportsRejected(third), "discard(): the new task's Future reports RejectedExecution");
    check(s.pool.stats().rejectedCount == 1, "discard(): it counts in rejectedCount");
  }
  {
    SaturatedPool s(coexec::RejectionPolicy::discardOldest());
    coexec::Future<int> third = s.pool.submit([] { return 3; });
    check(reportsRejected(s.queued), "discardOldest(): the evicted task's Future reports RejectedExecution");
    s.open();
    check(third.get() == 3, "discardOldest(): the new task runs");
    check(s.pool.stats().discardedCount == 1, "discardOldest(): the victim counts in discardedCount");
  }
  {
    // Any callable void(PendingTask&, ThreadPoolExecutor&) is a policy.
    std::vector<coexec::PendingTask> overflow;
    SaturatedPool s(
        [&overflow](coexec::PendingTask& task, coexec::ThreadPoolExecutor&) { overflow.push_back(std::move(task)); });
    coexec::Future<int> third = s.pool.submit([] { return 3; });
    check(overflow.size() == 1 && !third.isDone(), "a callable policy: the handler kept the task");
    overflow.front().run();  // later, on this thread
    check(third.get() == 3, "a callable policy: the kept task ran when the caller chose");
  }
  {
    SaturatedPool s(coexec::RejectionPolicy::callerRuns());
    s.pool.shutdown();
    coexec::Future<int> third = s.pool.submit([] { return 3; });
    check(reportsRejected(third), "callerRuns() after shutdown: the Future reports RejectedExecution");
    bool thrown = false;
    try {
      s.pool.execute([] {});
    } catch (const coexec::RejectedExecution&) {
      thrown = true;
    }
    check(thrown, "callerRuns() after shutdown: execute() throws RejectedExecution");
  }

  if (failures != 0) {
    fmt::print("{} check(s) failed\n", failures);
    return 1;
  }
  fmt::print("every rejection policy behaved as documented\n");
  return 0;
}
