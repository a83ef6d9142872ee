// SPDX-License-Identifier: BSL-1.0
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
// Cancellation flows (docs/cancellation.md):
//
//   pool.submit(f, token)           -> cancelling `token` cancels the task as cancel() does
//   work submitted from a task      -> its child: cancelling the task cancels the whole tree
//   co_await withTimeout(task, d)   -> at the deadline the task is cancelled; TimeoutError
//                                      once it has settled
//
// The program checks every outcome and the pool's ledger, and exits non-zero
// on a mismatch.

#include <coexec/coexec.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
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

// Backends that saw their token cancelled (written on pool threads).
std::atomic<int> backendsCancelled{0};

// A backend call that takes `latency`. It honours cancellation for free: a
// sleep ends at once with OperationCancelled when the task's token is
// cancelled. `started` and `ended` let main() see it happen.
coexec::Task<int> backend(int value, std::chrono::milliseconds latency, std::latch& started, std::latch& ended) {
  const coexec::CancellationToken token = co_await coexec::currentToken();  // this task's own token
  started.count_down();
  try {
    co_await coexec::sleepFor(latency);
  } catch (const coexec::OperationCancelled&) {
    if (token.isCancellationRequested()) backendsCancelled.fetch_add(1);
    ended.count_down();
    throw;
  }
  ended.count_down();
  co_return value;
}

// A request fans out to two backends and awaits them. Submitted from inside
// the request's task, the backends are its children: cancelling the request
// cancels them too.
coexec::Task<int> request(coexec::ThreadPoolExecutor& pool, std::chrono::milliseconds latency, std::latch& started,
                          std::latch& ended) {
  coexec::Future<int> a = pool.submit(backend(1, latency, started, ended));
  coexec::Future<int> b = pool.submit(backend(2, latency, started, ended));
  const int first = co_await a;
  co_return first + co_await b;
}

// The same request with a budget: at the deadline it is cancelled (and so
// are its backends), and TimeoutError comes once it has settled.
coexec::Task<int> requestWithin(coexec::ThreadPoolExecutor& pool, std::chrono::milliseconds latency,
                                std::chrono::milliseconds budget, std::latch& started, std::latch& ended) {
  auto timed = coexec::withTimeout(request(pool, latency, started, ended), budget);
  try {
    co_return co_await timed;
  } catch (const coexec::TimeoutError&) {
    co_return -1;
  }
}

void cancellationThatFlows() {
  coexec::ThreadPoolExecutor pool(coexec::ThreadPoolOptions{.name = "flow", .corePoolSize = 2, .maximumPoolSize = 2});
  {
    // The caller's token (say, the client went away) cancels the request,
    // which cancels both backends, asleep for an hour.
    coexec::CancellationSource client;
    std::latch started(2);
    std::latch ended(2);
    coexec::Future<int> answer = pool.submit(request(pool, std::chrono::hours(1), started, ended), client.token());
    started.wait();
    client.requestCancellation();
    check(reports<coexec::OperationCancelled>(answer), "cancelling the caller's token cancels the request");
    ended.wait();  // both backends ended by cancellation, within moments, not an hour
  }
  {
    std::latch started(2);
    std::latch ended(2);
    coexec::Future<int> answer =
        pool.submit(requestWithin(pool, std::chrono::hours(1), std::chrono::milliseconds(20), started, ended));
    check(answer.get() == -1, "withTimeout: TimeoutError once the request has settled");
    ended.wait();
  }
  {
    std::latch started(2);
    std::latch ended(2);
    coexec::Future<int> answer =
        pool.submit(requestWithin(pool, std::chrono::milliseconds(1), std::chrono::hours(1), started, ended));
    check(answer.get() == 3, "withTimeout: the value when the work finishes in time");
    ended.wait();
  }
  check(backendsCancelled.load() == 4, "the four backends of the two cancelled requests saw their tokens cancelled");
  pool.close();
  const coexec::PoolStats s = pool.stats();
  check(s.taskCount == s.completedTaskCount + s.failedCount + s.cancelledCount + s.discardedCount +
                           s.drainedCount + s.queueSize + s.localQueueSize,
        "the ledger of the second pool adds up");
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

  cancellationThatFlows();

  if (failures != 0) {
    fmt::print("{} check(s) failed\n", failures);
    return 1;
  }
  fmt::print("cancellation behaved as documented\n");
  return 0;
}
