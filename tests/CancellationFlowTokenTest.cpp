// SPDX-License-Identifier: BSL-1.0
// Cancellation that flows (docs/cancellation.md), one task at a time: submit/execute with a token, a
// coroutine suspended on a Future or a sleep resumed with OperationCancelled, and currentToken().
#include "coexec/CurrentToken.h"

// A token cancelled before, while queued and while running; a coroutine
// suspended on a Future or a sleep resumed with OperationCancelled once what
// it awaits has settled; currentToken() under syncWait, outside any coexec
// Task, in a pool coroutine and in a Task it awaits.
//
// Children linked to the task that submits them (trees), links released when
// a task settles, and the race between linking and a concurrent cancel are in
// CancellationFlowTreeTest.cpp.
//
// Ordering is by gates and counters; a pool with one thread and a probe task
// (requireSuspended) proves that a coroutine has given its thread back.

#include <atomic>
#include <chrono>
#include <coroutine>
#include <exception>
#include <optional>

#include "Assertions.h"

#include "TestSupport.h"
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
using coexec::test::executeBlocked;
using coexec::test::finalStats;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::OpenOnExit;
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
