// SPDX-License-Identifier: BSL-1.0
// A coroutine task that suspends on a ThreadPoolExecutor: where it resumes (affinity), its
// continuation admitted on a full or shut-down pool, stats(), cancellation, callerRuns.
#include "coexec/ThreadPoolExecutor.h"

// Executor affinity (resume on the pool the coroutine ran on, inline when the
// completing thread belongs to it); continuations admitted when the queue is
// full and after shutdown(); stats() of a suspended coroutine; cancel() and
// shutdownNow() of a suspended coroutine task; a coroutine run by callerRuns.
//
// Submitting coroutine tasks is in CoroutinePoolSubmitTest.cpp; the captures
// of a coroutine lambda in CoroutinePoolLifetimeTest.cpp.

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "CoroutinePoolTestSupport.h"
#include "CoroutineTestSupport.h"
#include "coexec/CancellationToken.h"
#include "coexec/ResumeOn.h"
#include "coexec/Task.h"
#include "coexec/ThisThread.h"

using namespace std::chrono_literals;

using coexec::CancellationRegistration;
using coexec::CancellationToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::PendingTask;
using coexec::PoolStats;
using coexec::RejectedExecution;
using coexec::RejectionPolicy;
using coexec::resumeOn;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::checkLedgerAddsUp;
using coexec::test::Counter;
using coexec::test::currentTag;
using coexec::test::eventually;
using coexec::test::executeBlocked;
using coexec::test::finalStats;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::OpenOnExit;
using coexec::test::requireSuspended;
using coexec::test::taggedPool;
using coexec::test::throwsA;

namespace {

/// A shut-down pool that keeps every task submitted to it: its rejection
/// policy stores the PendingTask, for the test to run on a thread it chooses.
class Keeper {
 public:
  Keeper() : pool_(options(*this)) { pool_.shutdown(); }
  Keeper(const Keeper&) = delete;
  Keeper& operator=(const Keeper&) = delete;

  ThreadPoolExecutor& pool() { return pool_; }
  /// The task the last submission left.
  PendingTask take() {
    std::lock_guard lock(mutex_);
    REQUIRE_FALSE(tasks_.empty());
    PendingTask task = std::move(tasks_.back());
    tasks_.pop_back();
    return task;
  }

 private:
  static ThreadPoolOptions options(Keeper& self) {
    ThreadPoolOptions o;
    o.name = "keeper";
    // On the submitting thread, which may be a pool thread: under the mutex.
    o.rejectionPolicy = [&self](PendingTask& task, ThreadPoolExecutor&) {
      std::lock_guard lock(self.mutex_);
      self.tasks_.push_back(std::move(task));
    };
    return o;
  }

  std::mutex mutex_;
  std::vector<PendingTask> tasks_;  // guarded by mutex_
  ThreadPoolExecutor pool_;         // last: its policy uses the members above
};

}  // namespace

// ---- affinity ---------------------------------------------------------------------

TEST_CASE("a coroutine on pool P awaiting a Future that completes on pool Q resumes on a thread of P",
          "[coroutine][affinity]") {
  Gate gate;
  ThreadPoolExecutor p(taggedPool("P", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor q(taggedPool("Q", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit release(gate);
  std::atomic<bool> completedOnQ{false};
  Counter reached;
  Future<std::string> path = p.submit([&q, &gate, &completedOnQ, &reached]() -> Task<std::string> {
    std::string before(currentTag);
    Future<int> fromQ = q.submit([&gate, &completedOnQ] {
      gate.wait();
      completedOnQ = currentTag == "Q";
      return 1;
    });
    reached.arrive();
    const int one = co_await fromQ;
    co_return before + "->" + std::string(currentTag) + (one == 1 ? "" : " (wrong value)");
  });
  requireSuspended(p, reached);  // so the completion on Q must post the resumption to P
  gate.open();
  CHECK(path.get() == "P->P");
  CHECK(completedOnQ.load());
}

TEST_CASE("a coroutine awaiting work that completes on a thread of its own pool resumes there inline",
          "[coroutine][affinity]") {
  // The awaited work is a PendingTask (kept by a shut-down pool) that a task of
  // the coroutine's own pool runs. Inline means the coroutine continues inside
  // that run() call, on its thread, before the task that called run() goes
  // on; a resumption posted to the pool would run after that task.
  Keeper keeper;
  ThreadPoolExecutor pool(taggedPool("in", 1, 1, WorkQueue::bounded(4)));
  Counter reached;
  std::atomic<bool> insideRun{false};
  struct Seen {
    std::thread::id resumedOn;
    bool duringRun = false;
    int value = 0;
  };
  Future<Seen> seen = pool.submit([&keeper, &reached, &insideRun]() -> Task<Seen> {
    Future<int> work = keeper.pool().submit([] { return 1; });
    reached.arrive();
    const int one = co_await work;
    co_return Seen{coexec::thisThreadId(), insideRun.load(), one};
  });
  requireSuspended(pool, reached);
  PendingTask work = keeper.take();
  Future<std::thread::id> runner = pool.submit([&work, &insideRun] {
    insideRun = true;
    work.run();
    insideRun = false;
    return std::this_thread::get_id();
  });
  const std::thread::id runnerThread = runner.get();
  const Seen s = seen.get();
  CHECK(s.value == 1);
  CHECK(s.resumedOn == runnerThread);
  CHECK(s.duringRun);
}

// ---- continuations are admitted work ----------------------------------------------

TEST_CASE("a continuation is admitted while the pool's queue is full", "[coroutine][admission]") {
  Gate remote;
  Gate blocker;
  ThreadPoolExecutor q(taggedPool("rq", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor p(taggedPool("fp", 1, 1, WorkQueue::bounded(1)));
  OpenOnExit releaseRemote(remote);
  OpenOnExit releaseBlocker(blocker);
  Counter reached;
  Future<std::string> coroutine = p.submit([&q, &remote, &reached]() -> Task<std::string> {
    Future<int> later = q.submit([&remote] {
      remote.wait();
      return 5;
    });
    reached.arrive();
    const int five = co_await later;
    co_return std::string(currentTag) + " " + std::to_string(five);
  });
  REQUIRE(reached.waitFor(1));
  // Saturate P: its only thread blocked (which it can be only once the
  // coroutine has suspended and given it back), its queue full.
  Counter started;
  p.execute([&] {
    started.arrive();
    blocker.wait();
  });
  REQUIRE(started.waitFor(1));
  p.execute([] {});
  REQUIRE_FALSE(p.tryExecute([] {}));  // a new task would be rejected now
  remote.open();                       // the continuation arrives at the saturated pool
  REQUIRE(eventually([&q] { return q.stats().completedTaskCount == 1; }));
  blocker.open();
  CHECK(coroutine.get() == "fp 5");
  const PoolStats stats = finalStats(p);
  CHECK(stats.rejectedCount == 0);
  CHECK(stats.completedTaskCount == 3);
}

TEST_CASE("a coroutine suspended when the pool shuts down completes, and awaitTermination waits for it",
          "[coroutine][shutdown]") {
  Gate remote;
  ThreadPoolExecutor q(taggedPool("rq", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor p(taggedPool("sd", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit releaseRemote(remote);
  Counter reached;
  Future<std::string> coroutine = p.submit([&q, &remote, &reached]() -> Task<std::string> {
    Future<int> later = q.submit([&remote] {
      remote.wait();
      return 5;
    });
    reached.arrive();
    const int five = co_await later;
    co_return std::string(currentTag) + " " + std::to_string(five);
  });
  requireSuspended(p, reached);
  p.shutdown();
  CHECK(p.isShutdown());
  CHECK_FALSE(p.awaitTermination(0ns));  // a suspended coroutine keeps the pool from terminating
  CHECK_FALSE(p.isTerminated());
  CHECK(throwsA<RejectedExecution>([&p] { p.execute([] {}); }));  // new work is refused
  remote.open();
  REQUIRE(p.awaitTermination(kLong));
  CHECK(coroutine.isDone());
  CHECK(coroutine.get() == "sd 5");
  const PoolStats stats = p.stats();
  CHECK(stats.taskCount == 2);  // the coroutine and requireSuspended's probe
  CHECK(stats.completedTaskCount == 2);
  CHECK(stats.rejectedCount == 1);  // the execute above, not the continuation
}

// ---- stats ----------------------------------------------------------------------------

TEST_CASE("stats counts a coroutine task once, and a suspended coroutine is not active", "[coroutine][stats]") {
  Gate remote;
  ThreadPoolExecutor q(taggedPool("rq", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor p(taggedPool("st", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit releaseRemote(remote);
  Counter reached;
  Future<int> coroutine = p.submit([&p, &q, &remote, &reached]() -> Task<int> {
    co_await resumeOn(p);  // yields: resumptions, not new tasks
    co_await resumeOn(p);
    Future<int> later = q.submit([&remote] {
      remote.wait();
      return 5;
    });
    reached.arrive();
    const int five = co_await later;
    co_await resumeOn(p);
    co_return five;
  });
  requireSuspended(p, reached);
  // The probe's Future settles before its thread has counted it and left it:
  // wait for that bookkeeping. The coroutine stays suspended meanwhile
  // (`remote` is closed), so it must not count as active.
  CHECK(eventually([&p] {
    const PoolStats s = p.stats();
    return s.completedTaskCount == 1 && s.activeCount == 0;
  }));
  const PoolStats suspended = p.stats();
  CHECK(suspended.taskCount == 2);  // the coroutine and requireSuspended's probe
  CHECK(suspended.activeCount == 0);
  CHECK(suspended.completedTaskCount == 1);  // the probe
  CHECK(suspended.poolSize == 1);
  remote.open();
  CHECK(coroutine.get() == 5);
  const PoolStats done = finalStats(p);
  CHECK(done.taskCount == 2);
  CHECK(done.completedTaskCount == 2);
  CHECK(done.failedCount == 0);
  checkLedgerAddsUp(done);
}

// ---- cancellation and rejection -------------------------------------------------------

TEST_CASE("cancel of a suspended coroutine task cancels its token", "[coroutine][cancel]") {
  Gate remote;
  ThreadPoolExecutor q(taggedPool("rq", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor p(taggedPool("cn", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit releaseRemote(remote);
  Counter reached;
  Future<int> coroutine = p.submit([&q, &remote, &reached](CancellationToken token) -> Task<int> {
    Future<int> later = q.submit([&remote] {
      remote.wait();
      return 5;
    });
    reached.arrive();
    const int five = co_await later;
    token.throwIfCancellationRequested();
    co_return five;
  });
  requireSuspended(p, reached);
  CHECK(coroutine.cancel());
  remote.open();
  CHECK_THROWS_AS(coroutine.get(), OperationCancelled);
  CHECK(finalStats(p).cancelledCount == 1);
}

TEST_CASE("shutdownNow cancels the token of a suspended coroutine task and what it awaits, then waits for it to settle",
          "[coroutine][shutdown][cancel]") {
  Gate remote;
  Counter reached;
  Counter childRuns;
  Counter cancelled;
  ThreadPoolExecutor q(taggedPool("rq", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor p(taggedPool("sn", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit releaseRemote(remote);
  Future<bool> sawCancellation = p.submit([&q, &remote, &reached, &childRuns,
                                           &cancelled](CancellationToken token) -> Task<bool> {
    // Runs on the thread that cancels the token.
    CancellationRegistration registration(token, [&cancelled] { cancelled.arrive(); });
    // Submitted from the coroutine: its child, cancelled with it.
    Future<int> later = q.submit([&remote, &childRuns] {
      childRuns.arrive();
      remote.wait();
      return 5;
    });
    reached.arrive();
    try {
      (void)co_await later;
    } catch (const OperationCancelled&) {
      co_return token.isCancellationRequested() && later.isCancelled();
    }
    co_return false;
  });
  requireSuspended(p, reached);
  REQUIRE(childRuns.waitFor(1));   // running, not queued (a queued child would settle at once)
  CHECK(p.shutdownNow().empty());  // nothing was queued: the coroutine is in flight, not returned
  // Cancelled while it is still suspended: `remote` has not opened.
  REQUIRE(cancelled.waitFor(1));
  // Structured: the child runs on (it ignores its token) and the coroutine
  // waits for it; the pool does not terminate meanwhile.
  CHECK_FALSE(p.awaitTermination(0ns));
  CHECK_FALSE(sawCancellation.isDone());
  remote.open();
  CHECK(sawCancellation.get());  // its co_await threw OperationCancelled once the child had settled
  REQUIRE(p.awaitTermination(kLong));
  const PoolStats stats = p.stats();
  CHECK(stats.completedTaskCount == 2);  // the coroutine (it returned a value) and requireSuspended's probe
  checkLedgerAddsUp(stats);
  REQUIRE(q.awaitTermination(0ns) == false);
  q.shutdown();
  REQUIRE(q.awaitTermination(kLong));
  CHECK(q.stats().completedTaskCount == 1);  // the child returned normally; its Future reports the cancellation
}

TEST_CASE("callerRuns runs a rejected coroutine task in the caller until it first suspends", "[coroutine][rejection]") {
  Gate gate;
  ThreadPoolExecutor pool(taggedPool("cr", 1, 1, WorkQueue::bounded(1), RejectionPolicy::callerRuns()));
  OpenOnExit release(gate);
  Counter started;
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  pool.execute([] {});
  const std::thread::id caller = std::this_thread::get_id();
  Future<bool> ranHere = pool.submit([caller]() -> Task<bool> { co_return coexec::thisThreadId() == caller; });
  CHECK(ranHere.isDone());
  CHECK(ranHere.get());
  CHECK(pool.stats().rejectedCount == 1);
}
