// SPDX-License-Identifier: BSL-1.0
// Cancellation that flows through trees of tasks (docs/cancellation.md): children linked to the task
// that submits them, links released when a task settles, and linking racing a concurrent cancel.
#include "coexec/CurrentToken.h"

// Children linked to the task that submits them (a callable's body or a
// coroutine task's chain), so that cancelling a task cancels its whole tree
// and never its parent; links released when a task settles; and the race
// between linking and a concurrent cancel.
//
// submit/execute with a token, a suspended coroutine and what it awaits, and
// currentToken() are in CancellationFlowTokenTest.cpp.
//
// Ordering is by gates and counters.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

#include "Assertions.h"

#include "TestSupport.h"
#include "CoroutineTestSupport.h"
#include "coexec/CancellationToken.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/Sleep.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using coexec::CancellationRegistration;
using coexec::CancellationSource;
using coexec::CancellationToken;
using coexec::currentToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::PoolStats;
using coexec::sleepFor;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::detail::registrationCount;
using coexec::test::checkLedgerAddsUp;
using coexec::test::Counter;
using coexec::test::eventually;
using coexec::test::finalStats;
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

/// Blocks the calling task until `token` is cancelled (a registration opens
/// a gate: no polling). Fails the test if that takes longer than the gate's
/// limit.
void waitUntilCancelled(const CancellationToken& token) {
  Gate cancelled;
  CancellationRegistration registration(token, [&cancelled] { cancelled.open(); });
  cancelled.wait();
}

}  // namespace

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
