#include "coexec/CurrentToken.h"

// Cancellation that flows (docs/cancellation.md): submit/execute with a
// token; currentToken(); children linked to the task that submits them (a
// callable's body or a coroutine task's chain), so that cancelling a task
// cancels its whole tree and never its parent; a coroutine suspended on a
// Future or a sleep resumed with OperationCancelled once what it awaits has
// settled; links released when a task settles; and the race between linking
// and a concurrent cancel.
//
// Ordering is by gates and counters; a pool with one thread and a probe task
// (requireSuspended) proves that a coroutine has given its thread back.

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "CoroutineTestSupport.h"
#include "coexec/CancellationToken.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/Sleep.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using coexec::CancellationRegistration;
using coexec::CancellationSource;
using coexec::CancellationToken;
using coexec::currentToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::PoolStats;
using coexec::RejectedExecution;
using coexec::RejectionPolicy;
using coexec::sleepFor;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::detail::registrationCount;
using coexec::test::checkLedgerAddsUp;
using coexec::test::Counter;
using coexec::test::eventually;
using coexec::test::executeBlocked;
using coexec::test::Gate;
using coexec::test::kLeads;
using coexec::test::kLong;
using coexec::test::leadName;
using coexec::test::OpenOnExit;
using coexec::test::race;
using coexec::test::taggedPool;
using coexec::test::throwsA;
using namespace std::chrono_literals;

namespace {

/// Returns once the coroutine that arrived at `reached` has given the only
/// thread of `pool` back (suspended): a probe task then gets to run. The
/// probe counts as a task of `pool`.
void requireSuspended(ThreadPoolExecutor& pool, Counter& reached) {
  REQUIRE(pool.maximumPoolSize() == 1);
  REQUIRE(reached.waitFor(1));
  Future<void> probe = pool.submit([] {});
  REQUIRE(probe.waitFor(kLong));
}

/// Shuts `pool` down and waits until it has terminated, then returns its
/// statistics, whose ledger the caller checks.
PoolStats finalStats(ThreadPoolExecutor& pool) {
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  return pool.stats();
}

/// Blocks the calling task until `token` is cancelled (a registration opens
/// a gate: no polling). Fails the test if that takes longer than the gate's
/// limit.
void waitUntilCancelled(const CancellationToken& token) {
  Gate cancelled;
  CancellationRegistration registration(token, [&cancelled] { cancelled.open(); });
  cancelled.wait();
}

/// A coroutine type that is not coexec's: it starts at once and runs to its
/// end (for currentToken() outside any coexec Task).
struct ForeignCoroutine {
  struct promise_type {
    ForeignCoroutine get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

ForeignCoroutine tokenOfForeignCoroutine(std::optional<CancellationToken>& out) { out = co_await currentToken(); }

}  // namespace

// ---- submit / execute with a token ---------------------------------------------

TEST_CASE("a token cancelled while the task is queued: it never runs and its Future settles at once",
          "[cancelflow][token]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(taggedPool("tq", 1, 1, WorkQueue::bounded(8)));
  OpenOnExit release(gate);
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  CancellationSource source;
  std::atomic<int> ran{0};
  Future<int> future = pool.submit(
      [&ran] {
        ran.fetch_add(1);
        return 1;
      },
      source.token());
  CHECK_FALSE(future.isDone());
  CHECK(registrationCount(source.token()) == 1);
  CHECK(source.requestCancellation());
  CHECK(future.isDone());  // at once, on this thread
  CHECK(future.isCancelled());
  CHECK(throwsA<OperationCancelled>([&] { future.get(); }));
  CHECK(registrationCount(source.token()) == 0);
  gate.open();
  const PoolStats stats = finalStats(pool);
  CHECK(ran.load() == 0);
  CHECK(stats.cancelledCount == 1);
  CHECK(stats.completedTaskCount == 1);  // the blocker
  checkLedgerAddsUp(stats);
}

TEST_CASE("a token cancelled while the task runs cancels the task's own token, its Future reports OperationCancelled",
          "[cancelflow][token]") {
  Gate release;
  Counter started;
  Counter sawCancellation;
  ThreadPoolExecutor pool(taggedPool("tr", 1, 1, WorkQueue::bounded(8)));
  OpenOnExit open(release);
  CancellationSource source;
  Future<int> future = pool.submit(
      [&](CancellationToken own) {
        CancellationRegistration registration(own, [&sawCancellation] { sawCancellation.arrive(); });
        started.arrive();
        release.wait();
        return own.isCancellationRequested() ? 1 : 0;
      },
      source.token(), /*priority=*/3);
  REQUIRE(started.waitFor(1));
  source.requestCancellation();
  CHECK(sawCancellation.count() == 1);  // the task's callback ran inside requestCancellation()
  CHECK(future.isCancelled());
  CHECK_FALSE(future.isDone());  // it runs on until its callable returns
  release.open();
  CHECK(throwsA<OperationCancelled>([&] { future.get(); }));
  const PoolStats stats = finalStats(pool);
  CHECK(stats.completedTaskCount == 1);  // it returned normally; the Future reports the cancellation
  checkLedgerAddsUp(stats);
}

TEST_CASE("a token cancelled already at submit: the task never runs, counts as cancelled and is not admitted",
          "[cancelflow][token]") {
  // A saturated pool under abort(): an admitted task would be rejected. A
  // pre-cancelled one goes through no admission at all.
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(taggedPool("tp", 1, 1, WorkQueue::bounded(1), RejectionPolicy::abort()));
  OpenOnExit release(gate);
  executeBlocked(pool, 2, started, gate);  // one runs, one fills the queue
  REQUIRE(started.waitFor(1));
  CancellationSource source;
  source.requestCancellation();
  std::atomic<int> ran{0};
  const PoolStats before = pool.stats();
  Future<int> future = pool.submit(
      [&ran] {
        ran.fetch_add(1);
        return 1;
      },
      source.token());
  CHECK(future.isDone());
  CHECK(future.isCancelled());
  CHECK(throwsA<OperationCancelled>([&] { future.get(); }));
  pool.execute([&ran] { ran.fetch_add(1); }, source.token());  // no exception either
  const PoolStats after = pool.stats();
  CHECK(after.rejectedCount == before.rejectedCount);
  CHECK(after.taskCount == before.taskCount + 2);
  CHECK(after.cancelledCount == before.cancelledCount + 2);
  CHECK(after.queueSize == before.queueSize);
  CHECK(throwsA<RejectedExecution>([&] { pool.execute([] {}); }));  // the pool is saturated indeed

  pool.shutdown();  // after shutdown too: cancelled, not rejected
  Future<int> late = pool.submit([&ran] { return ran.fetch_add(1); }, source.token());
  CHECK(late.isCancelled());
  gate.open();
  REQUIRE(pool.awaitTermination(kLong));
  const PoolStats stats = pool.stats();
  CHECK(ran.load() == 0);
  CHECK(stats.rejectedCount == 1);
  CHECK(stats.cancelledCount == 3);
  checkLedgerAddsUp(stats);
}

TEST_CASE("execute with a token: cancelling it while the task is queued means the task never runs",
          "[cancelflow][token]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(taggedPool("te", 1, 1, WorkQueue::unbounded()));
  OpenOnExit release(gate);
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  CancellationSource source;
  std::atomic<int> ran{0};
  pool.execute([&ran] { ran.fetch_add(1); }, source.token(), /*priority=*/1);
  pool.execute([&ran] { ran.fetch_add(10); }, CancellationToken());  // a token that cannot be cancelled: no link
  CHECK(registrationCount(source.token()) == 1);
  source.requestCancellation();
  gate.open();
  const PoolStats stats = finalStats(pool);
  CHECK(ran.load() == 10);
  CHECK(stats.cancelledCount == 1);
  CHECK(stats.completedTaskCount == 2);
  checkLedgerAddsUp(stats);
}

TEST_CASE("a coroutine task linked to a token sleeping for an hour wakes at once with OperationCancelled",
          "[cancelflow][token][sleep]") {
  ThreadPoolExecutor pool(taggedPool("ts", 1, 1, WorkQueue::bounded(8)));
  CancellationSource source;
  Counter sleeping;
  std::atomic<bool> woke{false};
  Future<int> future = pool.submit(
      [&]() -> Task<int> {
        sleeping.arrive();
        try {
          co_await sleepFor(1h);
        } catch (const OperationCancelled&) {
          woke = true;
          throw;
        }
        co_return 1;
      },
      source.token());
  requireSuspended(pool, sleeping);
  source.requestCancellation();
  REQUIRE(future.waitFor(kLong));
  CHECK(woke.load());
  CHECK(throwsA<OperationCancelled>([&] { future.get(); }));
  const PoolStats stats = finalStats(pool);
  CHECK(stats.cancelledCount == 1);
  checkLedgerAddsUp(stats);
}

// ---- a suspended coroutine and what it awaits -------------------------------------

TEST_CASE("a coroutine cancelled while it awaits another task's Future cancels that task and goes on once it has settled",
          "[cancelflow][future]") {
  // The awaited task is not the coroutine's child (the test thread submitted
  // it): the awaiter links it to the coroutine's token.
  Gate remote;
  Counter remoteRuns;
  Counter reached;
  ThreadPoolExecutor q(taggedPool("fq", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor p(taggedPool("fp", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit release(remote);
  Future<int> outside = q.submit([&] {
    remoteRuns.arrive();
    remote.wait();
    return 5;
  });
  REQUIRE(remoteRuns.waitFor(1));
  std::atomic<bool> threw{false};
  Future<int> coroutine = p.submit([&]() -> Task<int> {
    reached.arrive();
    try {
      co_return co_await outside;
    } catch (const OperationCancelled&) {
      threw = true;
      throw;
    }
  });
  requireSuspended(p, reached);
  CHECK(coroutine.cancel());
  CHECK(outside.isCancelled());     // cancelled with its awaiter, on this thread
  CHECK_FALSE(coroutine.isDone());  // structured: not before the awaited task has settled
  remote.open();
  CHECK(throwsA<OperationCancelled>([&] { coroutine.get(); }));
  CHECK(threw.load());
  CHECK(finalStats(q).completedTaskCount == 1);  // it ignored its token and returned
  const PoolStats stats = finalStats(p);
  CHECK(stats.cancelledCount == 1);
  checkLedgerAddsUp(stats);
}

TEST_CASE("a coroutine cancelled while it awaits its own child's Future cancels the child and goes on once it has settled",
          "[cancelflow][future][tree]") {
  Gate remote;
  Counter childRuns;
  Counter reached;
  ThreadPoolExecutor q(taggedPool("cq", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor p(taggedPool("cp", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit release(remote);
  std::atomic<bool> childCancelled{false};
  Future<int> coroutine = p.submit([&]() -> Task<int> {
    Future<int> child = q.submit([&](CancellationToken token) {
      childRuns.arrive();
      remote.wait();
      childCancelled = token.isCancellationRequested();
      return 5;
    });
    reached.arrive();
    co_return co_await child;
  });
  REQUIRE(childRuns.waitFor(1));
  requireSuspended(p, reached);
  CHECK(coroutine.cancel());
  CHECK_FALSE(coroutine.isDone());
  remote.open();
  CHECK(throwsA<OperationCancelled>([&] { coroutine.get(); }));
  CHECK(childCancelled.load());
  checkLedgerAddsUp(finalStats(q));
  checkLedgerAddsUp(finalStats(p));
}

// ---- trees ---------------------------------------------------------------------

TEST_CASE("cancelling a callable task cancels the coroutine it submitted and the coroutine that one submitted",
          "[cancelflow][tree]") {
  // callable (pool a) -> coroutine (pool b) -> coroutine (pool c), each level
  // on its own pool. The root blocks until its token is cancelled; the
  // middle awaits the leaf; the leaf sleeps for an hour.
  ThreadPoolExecutor a(taggedPool("ta", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor b(taggedPool("tb", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor c(taggedPool("tc", 1, 1, WorkQueue::bounded(4)));
  Counter leafSleeping;
  std::atomic<bool> rootSaw{false};
  std::atomic<bool> middleSaw{false};
  std::atomic<bool> leafSaw{false};
  std::optional<Future<int>> middle;
  Future<int> root = a.submit([&](CancellationToken token) {
    middle = b.submit([&]() -> Task<int> {
      Future<int> leaf = c.submit([&]() -> Task<int> {
        leafSleeping.arrive();
        try {
          co_await sleepFor(1h);
        } catch (const OperationCancelled&) {
          leafSaw = true;
          throw;
        }
        co_return 3;
      });
      try {
        co_return co_await leaf;
      } catch (const OperationCancelled&) {
        middleSaw = true;
        throw;
      }
    });
    waitUntilCancelled(token);
    rootSaw = true;
    return 1;
  });
  REQUIRE(leafSleeping.waitFor(1));
  CHECK(root.cancel());
  CHECK(throwsA<OperationCancelled>([&] { root.get(); }));
  REQUIRE(middle.has_value());  // written by the root's body, which has returned
  REQUIRE(middle->waitFor(kLong));
  CHECK(throwsA<OperationCancelled>([&] { middle->get(); }));
  CHECK(rootSaw.load());
  CHECK(middleSaw.load());
  CHECK(leafSaw.load());
  for (ThreadPoolExecutor* pool : {&a, &b, &c}) {
    const PoolStats stats = finalStats(*pool);
    CHECK(stats.failedCount == 0);
    checkLedgerAddsUp(stats);
  }
  CHECK(b.stats().cancelledCount == 1);
  CHECK(c.stats().cancelledCount == 1);
}

TEST_CASE("cancelling a coroutine task cancels the coroutine it awaits and the callable that one awaits",
          "[cancelflow][tree]") {
  // coroutine -> coroutine -> callable, on one pool of three threads: the
  // children of a task of the pool go to its worker's local queue and are
  // stolen by the others.
  ThreadPoolExecutor pool(taggedPool("tt", 3, 3, WorkQueue::bounded(16)));
  Counter leafRuns;
  std::atomic<bool> rootSaw{false};
  std::atomic<bool> middleSaw{false};
  std::atomic<bool> leafSaw{false};
  Future<int> root = pool.submit([&]() -> Task<int> {
    Future<int> middle = pool.submit([&]() -> Task<int> {
      Future<int> leaf = pool.submit([&](CancellationToken token) {
        leafRuns.arrive();
        waitUntilCancelled(token);
        leafSaw = true;
        return 1;
      });
      try {
        co_return co_await leaf;
      } catch (const OperationCancelled&) {
        middleSaw = true;
        throw;
      }
    });
    try {
      co_return co_await middle;
    } catch (const OperationCancelled&) {
      rootSaw = true;
      throw;
    }
  });
  REQUIRE(leafRuns.waitFor(1));
  CHECK(root.cancel());
  REQUIRE(root.waitFor(kLong));
  CHECK(throwsA<OperationCancelled>([&] { root.get(); }));
  CHECK(rootSaw.load());
  CHECK(middleSaw.load());
  CHECK(leafSaw.load());
  const PoolStats stats = finalStats(pool);
  CHECK(stats.cancelledCount == 2);      // the coroutines ended by OperationCancelled
  CHECK(stats.completedTaskCount == 1);  // the leaf returned (its Future reports the cancellation)
  CHECK(stats.failedCount == 0);
  checkLedgerAddsUp(stats);
}

TEST_CASE("cancelling a child leaves its parent alone: the parent catches the cancellation and goes on",
          "[cancelflow][tree]") {
  Gate childGate;
  Counter childCancelled;
  ThreadPoolExecutor pool(taggedPool("cl", 2, 2, WorkQueue::bounded(16)));
  OpenOnExit release(childGate);
  Future<int> parent = pool.submit([&]() -> Task<int> {
    Future<int> first = pool.submit([&] {
      childGate.wait();
      return 1;
    });
    Future<int> second = pool.submit([] { return 2; });
    first.cancel();
    childCancelled.arrive();
    int got = 0;
    try {
      got += co_await first;
    } catch (const OperationCancelled&) {
      got += 10;
    }
    got += co_await second;
    const CancellationToken own = co_await currentToken();
    co_return own.isCancellationRequested() ? -1 : got;
  });
  REQUIRE(childCancelled.waitFor(1));
  childGate.open();
  CHECK(parent.get() == 12);
  CHECK_FALSE(parent.isCancelled());
  checkLedgerAddsUp(finalStats(pool));
}

TEST_CASE("work that a cancelled task submits afterwards never runs and counts as cancelled", "[cancelflow][tree]") {
  ThreadPoolExecutor pool(taggedPool("wa", 2, 2, WorkQueue::bounded(16)));
  Counter started;
  std::atomic<int> ran{0};
  std::optional<Future<int>> late;
  Future<void> parent = pool.submit([&](CancellationToken token) {
    started.arrive();
    waitUntilCancelled(token);
    late = pool.submit([&ran] { return ran.fetch_add(1); });  // after the cancellation: a child born cancelled
    pool.execute([&ran] { ran.fetch_add(1); });
  });
  REQUIRE(started.waitFor(1));
  CHECK(parent.cancel());
  REQUIRE(parent.waitFor(kLong));
  REQUIRE(late.has_value());
  CHECK(late->isCancelled());
  CHECK(throwsA<OperationCancelled>([&] { late->get(); }));
  const PoolStats stats = finalStats(pool);
  CHECK(ran.load() == 0);
  CHECK(stats.cancelledCount == 2);
  checkLedgerAddsUp(stats);
}

TEST_CASE("shutdownNow of a pool cancels the children its running tasks submitted to another pool",
          "[cancelflow][tree][shutdown]") {
  ThreadPoolExecutor a(taggedPool("sa", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor b(taggedPool("sb", 1, 1, WorkQueue::bounded(4)));
  Counter childRuns;
  std::optional<Future<int>> child;
  Future<int> parent = a.submit([&](CancellationToken token) {  // has a token: shutdownNow() reaches it
    child = b.submit([&](CancellationToken own) {
      childRuns.arrive();
      waitUntilCancelled(own);
      return 2;
    });
    waitUntilCancelled(token);
    return 1;
  });
  REQUIRE(childRuns.waitFor(1));
  CHECK(a.shutdownNow().empty());
  CHECK(parent.get() == 1);     // shutdownNow only cancels the parent's token: its Future has its value
  REQUIRE(child.has_value());   // written by the parent's body, which has returned
  CHECK(child->isCancelled());  // Future::cancel semantics for the child
  CHECK(throwsA<OperationCancelled>([&] { child->get(); }));
  checkLedgerAddsUp(finalStats(b));
  REQUIRE(a.awaitTermination(kLong));
}

TEST_CASE("tasks submitted from a fire-and-forget callable are not linked and run", "[cancelflow][tree]") {
  // Nothing can cancel such a task (no Future, no token): its children get
  // no link, and linking costs nothing.
  ThreadPoolExecutor pool(taggedPool("ff", 2, 2, WorkQueue::bounded(16)));
  Counter done;
  pool.execute([&] {
    for (int i = 0; i < 10; ++i)
      pool.execute([&done] { done.arrive(); });
  });
  REQUIRE(done.waitFor(10));
  const PoolStats stats = finalStats(pool);
  CHECK(stats.completedTaskCount == 11);
  checkLedgerAddsUp(stats);
}

// ---- currentToken ----------------------------------------------------------------

TEST_CASE("currentToken under syncWait is a default token that can never be cancelled", "[cancelflow][currentToken]") {
  const CancellationToken token = syncWait([]() -> Task<CancellationToken> { co_return co_await currentToken(); }());
  CHECK_FALSE(token.canBeCancelled());
  CHECK_FALSE(token.isCancellationRequested());
}

TEST_CASE("currentToken in a coroutine that is not a coexec Task is a default token", "[cancelflow][currentToken]") {
  std::optional<CancellationToken> token;
  tokenOfForeignCoroutine(token);
  REQUIRE(token.has_value());
  CHECK_FALSE(token->canBeCancelled());
}

TEST_CASE("currentToken in a pool coroutine is its task's token: the Future's cancel() cancels it",
          "[cancelflow][currentToken]") {
  ThreadPoolExecutor pool(taggedPool("ct", 1, 1, WorkQueue::bounded(8)));
  Counter reached;
  Gate proceed;
  OpenOnExit release(proceed);
  std::atomic<bool> namedSees{false};
  std::atomic<bool> sameToken{false};
  Future<void> task = pool.submit([&]() -> Task<void> {
    auto named = currentToken();  // the named form
    const CancellationToken first = co_await named;
    const CancellationToken second = co_await currentToken();  // the temporary form
    reached.arrive();
    proceed.wait();
    namedSees = first.isCancellationRequested();
    sameToken = second.isCancellationRequested() && first.canBeCancelled();
  });
  REQUIRE(reached.waitFor(1));
  CHECK(task.cancel());
  proceed.open();
  REQUIRE(task.waitFor(kLong));
  CHECK(namedSees.load());
  CHECK(sameToken.load());
}

TEST_CASE("currentToken inside a Task awaited by a pool coroutine is the parent's token", "[cancelflow][currentToken]") {
  ThreadPoolExecutor pool(taggedPool("cc", 1, 1, WorkQueue::bounded(8)));
  CancellationSource source;
  Counter reached;
  Gate proceed;
  OpenOnExit release(proceed);
  std::atomic<bool> childSees{false};
  auto child = [&]() -> Task<bool> {
    const CancellationToken token = co_await currentToken();
    reached.arrive();
    proceed.wait();
    co_return token.isCancellationRequested();
  };
  Future<void> task = pool.submit(
      [&]() -> Task<void> {
        childSees = co_await child();
      },
      source.token());
  REQUIRE(reached.waitFor(1));
  source.requestCancellation();
  proceed.open();
  REQUIRE(task.waitFor(kLong));
  CHECK(childSees.load());
}

// ---- links released --------------------------------------------------------------

TEST_CASE("many tasks linked to one long-lived token leave no registration behind once settled",
          "[cancelflow][token][leak]") {
  CancellationSource source;  // outlives every task
  constexpr int kTasks = 10'000;
  {
    ThreadPoolExecutor pool(taggedPool("lk", 2, 2, WorkQueue::unbounded()));
    std::vector<Future<int>> futures;
    futures.reserve(kTasks);
    Counter executed;
    for (int i = 0; i < kTasks; ++i) {
      switch (i % 3) {
        case 0: futures.push_back(pool.submit([i] { return i; }, source.token())); break;
        case 1: futures.push_back(pool.submit([i]() -> Task<int> { co_return i; }, source.token())); break;
        default: pool.execute([&executed] { executed.arrive(); }, source.token()); break;
      }
    }
    long sum = 0;
    for (Future<int>& f : futures)
      sum += f.get();
    CHECK(sum > 0);
    REQUIRE(executed.waitFor(kTasks / 3));
    pool.close();
    checkLedgerAddsUp(pool.stats());
  }
  CHECK(registrationCount(source.token()) == 0);
  // A late cancel runs only what is registered now: our own callback.
  int calls = 0;
  CancellationRegistration ours(source.token(), [&calls] { ++calls; });
  CHECK(registrationCount(source.token()) == 1);
  source.requestCancellation();
  CHECK(calls == 1);
}

TEST_CASE("a coroutine awaiting Futures that are not its children leaves no registration on its token",
          "[cancelflow][future][leak]") {
  ThreadPoolExecutor q(taggedPool("lq", 1, 1, WorkQueue::unbounded()));
  ThreadPoolExecutor p(taggedPool("lp", 1, 1, WorkQueue::unbounded()));
  std::vector<Future<int>> outside;
  for (int i = 0; i < 100; ++i)
    outside.push_back(q.submit([i] { return i; }));
  Future<std::size_t> left = p.submit([&]() -> Task<std::size_t> {
    int sum = 0;
    for (Future<int>& f : outside)
      sum += co_await f;
    const CancellationToken own = co_await currentToken();
    co_return sum == 4950 ? registrationCount(own) : 999;
  });
  CHECK(left.get() == 0);
}

// ---- races -----------------------------------------------------------------------

TEST_CASE("submit with a token racing a concurrent cancel: the task runs once or never, and its Future settles",
          "[cancelflow][token][race]") {
  // 10,000 iterations, every lead: the link is made before the cancel, after
  // it, or while it runs its callbacks. Each outcome is checked every time.
  ThreadPoolExecutor pool(taggedPool("rc", 2, 2, WorkQueue::unbounded()));
  constexpr std::size_t kIterations = 10'000;
  std::size_t completed = 0;
  std::size_t neverRan = 0;
  std::size_t cancelledWhileRunning = 0;
  for (std::size_t i = 0; i < kIterations; ++i) {
    const auto lead = kLeads[i % 3];
    INFO("iteration " << i << ": " << leadName(lead));
    CancellationSource source;
    std::atomic<int> ran{0};
    Future<int> future;
    race(
        lead,
        [&] {
          future = pool.submit(
              [&ran] {
                ran.fetch_add(1);
                return 7;
              },
              source.token());
        },
        [&] { source.requestCancellation(); });
    REQUIRE(future.waitFor(kLong));
    bool cancelled = false;
    int value = 0;
    try {
      value = future.get();
    } catch (const OperationCancelled&) {
      cancelled = true;
    }
    REQUIRE((cancelled || value == 7));
    // The body may still be returning: its count is final once the
    // registration it held has been released (after the Future settled).
    REQUIRE(eventually([&] { return registrationCount(source.token()) == 0; }));
    if (!cancelled) {
      REQUIRE(eventually([&] { return ran.load() == 1; }));
      ++completed;
    } else if (ran.load() == 0) {
      ++neverRan;
    } else {
      ++cancelledWhileRunning;
    }
    REQUIRE(ran.load() <= 1);
  }
  INFO("completed " << completed << ", never ran " << neverRan << ", cancelled while running "
                    << cancelledWhileRunning);
  CHECK(completed + neverRan + cancelledWhileRunning == kIterations);
  CHECK(completed > 0);
  CHECK(neverRan > 0);
  const PoolStats stats = finalStats(pool);
  CHECK(stats.taskCount == kIterations);
  checkLedgerAddsUp(stats);
}

TEST_CASE("a parent cancelled while it submits a child: the child is cancelled or runs, and never leaks",
          "[cancelflow][tree][race]") {
  ThreadPoolExecutor pool(taggedPool("rp", 2, 2, WorkQueue::unbounded()));
  constexpr std::size_t kIterations = 2'000;
  std::size_t childCancelled = 0;
  std::size_t childRan = 0;
  for (std::size_t i = 0; i < kIterations; ++i) {
    Counter started;
    Gate go;
    std::optional<Future<int>> child;
    Future<void> parent = pool.submit([&] {
      started.arrive();
      go.wait();
      child = pool.submit([] { return 1; });
    });
    REQUIRE(started.waitFor(1));
    race(kLeads[i % 3], [&] { go.open(); }, [&] { parent.cancel(); });
    REQUIRE(parent.waitFor(kLong));
    REQUIRE(child.has_value());
    REQUIRE(child->waitFor(kLong));
    int value = 0;
    try {
      value = child->get();
      ++childRan;
    } catch (const OperationCancelled&) {
      ++childCancelled;
    }
    REQUIRE((value == 1 || value == 0));
  }
  INFO("child ran " << childRan << ", child cancelled " << childCancelled);
  CHECK(childRan + childCancelled == kIterations);
  CHECK(childCancelled > 0);
  checkLedgerAddsUp(finalStats(pool));
}
