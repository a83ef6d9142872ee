// Cancellation is cooperative: a task that takes a CancellationToken sees
// Future::cancel() and shutdownNow() through it; a queued task that is
// cancelled never starts.
//
//   a task cancelled while queued   -> never runs; its Future: OperationCancelled
//   a task cancelled while running  -> its token fires; it stops and reports it
//   shutdownNow()                   -> returns the queued tasks, cancels the running one's token
//   a returned task run by the caller -> produces its value
//   a returned task dropped         -> its Future: BrokenPromise
//
// The program checks every outcome and the pool's ledger, and exits non-zero
// on a mismatch.

#include <coexec/coexec.h>

#include <fmt/format.h>

#include <latch>
#include <string_view>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, std::string_view what) {
  fmt::print("{:<58} {}\n", what, ok ? "ok" : "MISMATCH");
  failures += ok ? 0 : 1;
}

// True if `future` reports the error E.
template <class E, class R>
bool reports(coexec::Future<R>& future) {
  try {
    future.get();
  } catch (const E&) {
    return true;
  } catch (...) {
  }
  return false;
}

// A task that waits, without spinning, until its token is cancelled, then
// stops by throwing OperationCancelled.
int waitForCancellation(coexec::CancellationToken token, std::latch& started) {
  std::latch cancelled(1);
  coexec::CancellationRegistration onCancel(token, [&] { cancelled.count_down(); });
  started.count_down();
  cancelled.wait();
  token.throwIfCancellationRequested();
  return 0;
}

}  // namespace

int main() {
  coexec::ThreadPoolOptions options;
  options.name = "cancel";
  options.corePoolSize = 1;
  options.maximumPoolSize = 1;
  options.workQueue = coexec::WorkQueue::bounded(4);
  coexec::ThreadPoolExecutor pool(options);

  // A plain task: its Future carries the value.
  coexec::Future<int> answer = pool.submit([] { return 40 + 2; });
  check(answer.get() == 42, "get() returns the task's value");

  // Task `running` occupies the only thread; task `queued` waits behind it.
  std::latch runningStarted(1);
  coexec::Future<int> running =
      pool.submit([&](coexec::CancellationToken token) { return waitForCancellation(token, runningStarted); });
  runningStarted.wait();
  coexec::Future<int> queued = pool.submit([] { return 1; });

  // Cancelling a queued task: it settles at once and never runs.
  check(queued.cancel(), "cancel() of a queued task returns true");
  check(queued.isDone() && queued.isCancelled(), "the queued task is done and cancelled at once");
  check(reports<coexec::OperationCancelled>(queued), "its Future reports OperationCancelled");

  // Cancelling a running task: its token fires, and the task decides to stop.
  check(running.cancel(), "cancel() of a running task returns true");
  check(reports<coexec::OperationCancelled>(running), "the running task stopped: OperationCancelled");
  check(!running.cancel(), "cancel() of a settled task returns false");

  // shutdownNow(): the running task's token is cancelled, the queued tasks
  // come back unrun, in queue order.
  std::latch lastStarted(1);
  coexec::Future<int> last =
      pool.submit([&](coexec::CancellationToken token) { return waitForCancellation(token, lastStarted); });
  lastStarted.wait();
  coexec::Future<int> first = pool.submit([] { return 1; });
  coexec::Future<int> second = pool.submit([] { return 2; });
  std::vector<coexec::PendingTask> unrun = pool.shutdownNow();
  check(unrun.size() == 2, "shutdownNow() returns the two queued tasks");
  check(reports<coexec::OperationCancelled>(last), "the running task saw its token cancelled");

  unrun[0].run();  // the caller may still run a returned task...
  check(first.get() == 1, "a returned task run by the caller produces its value");
  unrun.clear();  // ...or drop it
  check(reports<coexec::BrokenPromise>(second), "a dropped task's Future reports BrokenPromise");

  // After shutdown, new tasks go to the rejection policy (abort: throws).
  bool rejected = false;
  try {
    pool.execute([] {});
  } catch (const coexec::RejectedExecution&) {
    rejected = true;
  }
  check(rejected, "execute() after shutdownNow() throws RejectedExecution");

  check(pool.awaitTermination(std::chrono::seconds(10)), "the pool terminates");
  const coexec::PoolStats s = pool.stats();
  fmt::print("\n{}\n\n", s);
  check(s.taskCount == s.completedTaskCount + s.failedCount + s.cancelledCount + s.discardedCount +
                           s.drainedCount + s.queueSize + s.localQueueSize,
        "the ledger adds up");
  check(s.taskCount == 6 && s.completedTaskCount == 1 && s.cancelledCount == 3 && s.drainedCount == 2 &&
            s.rejectedCount == 1,
        "6 tasks: 1 completed, 3 cancelled, 2 drained; 1 rejected");

  if (failures != 0) {
    fmt::print("{} check(s) failed\n", failures);
    return 1;
  }
  fmt::print("cancellation behaved as documented\n");
  return 0;
}
