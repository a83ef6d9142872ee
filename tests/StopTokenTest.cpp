// SPDX-License-Identifier: BSL-1.0
#include "coexec/CancellationToken.h"

// std::stop_token and coexec's cancellation (docs/cancellation.md,
// "std::stop_token, std::jthread and Asio"):
// - CancellationToken::stopToken(): stop is requested when the token is
//   cancelled, on the cancelling thread, before the registrations run;
// - CancellationToken(const std::stop_token&): a stop request cancels the
//   token; a stop_token that can never stop gives a token that can never be
//   cancelled; the state (and its std::stop_callback) goes with the last
//   copy, also when a concurrent request_stop() races the destruction, and
//   when the callback itself drops the last reference;
// - pool tasks whose callable takes a std::stop_token: cancellable exactly
//   like one taking a CancellationToken (Future::cancel(), shutdownNow(), a
//   parent's cancellation);
// - pool.submit(f, stopToken) / execute(f, stopToken) (with a priority): the
//   task is linked to the stop token as to a CancellationToken, including a
//   std::jthread's;
// - co_await currentStopToken() in a coroutine task and under syncWait().
//
// Ordering is by gates, counters and the stop tokens themselves (a task waits
// for its stop with a condition_variable_any bounded by kLong); no sleep
// decides an outcome.

#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "CoroutineTestSupport.h"
#include "TestSupport.h"
#include "coexec/CurrentToken.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/SerialExecutor.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/TaskGroup.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/FaultInjection.h"

using coexec::CancellationRegistration;
using coexec::CancellationSource;
using coexec::CancellationToken;
using coexec::currentStopToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::PoolStats;
using coexec::SerialExecutor;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::detail::FaultInjection;
using coexec::detail::liveStopTokenBridges;
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

// A CancellationToken converts from a std::stop_token, implicitly; nothing
// converts the other way (a callable taking a std::stop_token is told apart
// from one taking a CancellationToken by that).
static_assert(std::is_convertible_v<std::stop_token, CancellationToken>);
static_assert(!std::is_convertible_v<CancellationToken, std::stop_token>);

namespace {

/// Blocks until stop is requested on `stop` (true) or kLong passes (false).
/// Event-driven: condition_variable_any wakes on the stop request.
bool waitForStop(const std::stop_token& stop) {
  std::mutex mutex;
  std::condition_variable_any cv;
  std::unique_lock lock(mutex);
  (void)cv.wait_for(lock, stop, kLong, [] { return false; });
  return stop.stop_requested();
}

/// A callable that takes either token: the pool gives it the CancellationToken.
struct EitherToken {
  int operator()(const CancellationToken& /*token*/) const { return 1; }
  int operator()(std::stop_token /*stop*/) const { return 2; }
};

/// Baseline-relative count of live StopTokenBridges (0 without fault points).
std::size_t bridges() { return liveStopTokenBridges(); }

}  // namespace

// ---- CancellationToken::stopToken() --------------------------------------------

TEST_CASE("a default token's stopToken can never stop", "[stoptoken][token]") {
  const CancellationToken token;
  const std::stop_token stop = token.stopToken();
  CHECK_FALSE(stop.stop_possible());
  CHECK_FALSE(stop.stop_requested());
}

TEST_CASE("stopToken is stop-requested on the cancelling thread, before the registrations run", "[stoptoken][token]") {
  CancellationSource source;
  const CancellationToken token = source.token();
  const std::stop_token stop = token.stopToken();
  CHECK(stop.stop_possible());
  CHECK_FALSE(stop.stop_requested());
  CHECK(stop == token.stopToken());           // one stop state per token state
  CHECK(stop == source.token().stopToken());  // and per source

  std::mutex mutex;
  std::vector<int> order;
  std::thread::id stopCallbackThread;
  bool stopCallbackSawCancellation = false;
  bool registrationSawStop = false;
  std::stop_callback onStop(stop, [&] {
    std::lock_guard lock(mutex);
    order.push_back(1);
    stopCallbackThread = std::this_thread::get_id();
    stopCallbackSawCancellation = token.isCancellationRequested();
  });
  CancellationRegistration registration(token, [&] {
    std::lock_guard lock(mutex);
    order.push_back(2);
    registrationSawStop = stop.stop_requested();
  });
  std::thread::id canceller;
  std::thread cancelling([&] {
    canceller = std::this_thread::get_id();
    CHECK(source.requestCancellation());
  });
  cancelling.join();
  CHECK(stop.stop_requested());
  CHECK(order == std::vector<int>{1, 2});
  CHECK(stopCallbackThread == canceller);
  CHECK(stopCallbackSawCancellation);
  CHECK(registrationSawStop);
}

TEST_CASE("stopToken of a token cancelled already is stop-requested at once", "[stoptoken][token]") {
  CancellationSource source;
  source.requestCancellation();
  const std::stop_token stop = source.token().stopToken();
  CHECK(stop.stop_possible());
  CHECK(stop.stop_requested());
  bool ran = false;
  std::stop_callback runsAtOnce(stop, [&] { ran = true; });  // runs in its constructor
  CHECK(ran);
}

TEST_CASE("a stopToken outlives its CancellationToken, and with no cancellation left possible it can no longer stop",
          "[stoptoken][token]") {
  std::stop_token stop;
  {
    CancellationSource source;
    stop = source.token().stopToken();
    CHECK(stop.stop_possible());
  }
  CHECK_FALSE(stop.stop_requested());
  CHECK_FALSE(stop.stop_possible());
}

// ---- CancellationToken(const std::stop_token&) ------------------------------------

TEST_CASE("a default std::stop_token converts to a token that can never be cancelled", "[stoptoken][convert]") {
  const std::size_t before = bridges();
  const CancellationToken token = std::stop_token();
  CHECK_FALSE(token.canBeCancelled());
  CHECK_FALSE(token.isCancellationRequested());
  CHECK(bridges() == before);  // no state made
  std::optional<std::stop_token> orphan;
  {
    std::stop_source source;
    orphan = source.get_token();
  }
  const CancellationToken never = *orphan;  // its source is gone unstopped: stop_possible() is false
  CHECK_FALSE(never.canBeCancelled());
}

TEST_CASE("a stop_token stopped already converts to a cancelled token", "[stoptoken][convert]") {
  std::stop_source source;
  source.request_stop();
  const CancellationToken token = source.get_token();
  CHECK(token.canBeCancelled());
  CHECK(token.isCancellationRequested());
  CHECK(throwsA<OperationCancelled>([&] { token.throwIfCancellationRequested(); }));
  bool ran = false;
  CancellationRegistration registration(token, [&] { ran = true; });  // runs at once
  CHECK(ran);
}

TEST_CASE("a stop requested later cancels the converted token, and its registrations run on the requesting thread",
          "[stoptoken][convert]") {
  const std::size_t before = bridges();
  {
    std::stop_source source;
    const CancellationToken token = source.get_token();
    CHECK(token.canBeCancelled());
    CHECK_FALSE(token.isCancellationRequested());
    if (FaultInjection::available()) CHECK(bridges() == before + 1);
    const CancellationToken copy = token;  // copies share the state
    std::thread::id callbackThread;
    int runs = 0;
    CancellationRegistration registration(copy, [&] {
      ++runs;
      callbackThread = std::this_thread::get_id();
    });
    CHECK(registrationCount(token) == 1);
    std::thread::id requester;
    std::thread requesting([&] {
      requester = std::this_thread::get_id();
      CHECK(source.request_stop());
    });
    requesting.join();
    CHECK(token.isCancellationRequested());
    CHECK(copy.isCancellationRequested());
    CHECK(runs == 1);
    CHECK(callbackThread == requester);
    CHECK(registrationCount(token) == 0);
    // The converted token gives a stop token of its own, stopped too.
    CHECK(token.stopToken().stop_requested());
  }
  CHECK(bridges() == before);  // the state went with the last copy
}

TEST_CASE("the converted token's state goes with its last copy while the stop_source lives on",
          "[stoptoken][convert]") {
  const std::size_t before = bridges();
  std::stop_source longLived;
  for (int i = 0; i < 100; ++i) {
    const CancellationToken token = longLived.get_token();
    CancellationRegistration registration(token, [] {});
  }
  CHECK(bridges() == before);
  // Requesting stop now reaches nothing that is gone (ASan/TSan would see it).
  CHECK(longLived.request_stop());
}

TEST_CASE("a registration callback may drop the last reference to the converted token inside the stop request",
          "[stoptoken][convert]") {
  const std::size_t before = bridges();
  std::stop_source source;
  std::optional<CancellationRegistration> registration;
  int runs = 0;
  {
    const CancellationToken token = source.get_token();
    registration.emplace(token, [&] {
      ++runs;
      registration.reset();  // the last reference: the state goes inside its own stop callback
    });
  }
  CHECK(bridges() == before + (FaultInjection::available() ? 1 : 0));
  CHECK(source.request_stop());
  CHECK(runs == 1);
  CHECK_FALSE(registration.has_value());
  CHECK(bridges() == before);
}

TEST_CASE("request_stop racing the destruction of the converted token: the callback runs at most once, nothing leaks",
          "[stoptoken][convert][race]") {
  using coexec::test::kLeads;
  using coexec::test::Lead;
  const std::size_t before = bridges();
  const std::size_t rounds = coexec::test::stressSize(4002, 4);
  struct Round {
    std::optional<std::stop_source> source;
    std::optional<CancellationToken> token;
    std::optional<CancellationRegistration> registration;
    std::atomic<int> runs{0};
    Lead lead = Lead::none;
  } round;
  // Three phases a round: set up | the leading side acts | the other side
  // acts (with Lead::none both act in the last phase, racing) | checked.
  std::barrier sync(2);
  std::thread requester([&] {
    for (std::size_t i = 0; i < rounds; ++i) {
      sync.arrive_and_wait();
      if (round.lead == Lead::there) round.source->request_stop();
      sync.arrive_and_wait();
      if (round.lead != Lead::there) round.source->request_stop();
      sync.arrive_and_wait();
    }
  });
  const auto destroy = [&round](std::size_t i) {
    // The registration (and with the token, the state and its
    // std::stop_callback) goes while request_stop() may be running it.
    if (i % 2 == 0) {
      round.registration.reset();
      round.token.reset();
    } else {
      round.token.reset();
      round.registration.reset();
    }
  };
  std::size_t racedRan = 0;
  std::size_t racedDestroyedFirst = 0;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < rounds; ++i) {
    round.lead = kLeads[i % 3];
    round.runs.store(0);
    round.source.emplace();
    round.token.emplace(round.source->get_token());
    round.registration.emplace(*round.token, [&round] { round.runs.fetch_add(1); });
    sync.arrive_and_wait();
    if (round.lead == Lead::here) destroy(i);
    sync.arrive_and_wait();
    if (round.lead != Lead::here) destroy(i);
    sync.arrive_and_wait();
    const int runs = round.runs.load();
    switch (round.lead) {
      case Lead::here: wrong += runs == 0 ? 0 : 1; break;   // destroyed first: never runs
      case Lead::there: wrong += runs == 1 ? 0 : 1; break;  // requested first: runs once
      case Lead::none: (runs == 1 ? racedRan : racedDestroyedFirst) += 1; wrong += runs <= 1 ? 0 : 1; break;
    }
    round.source.reset();
  }
  requester.join();
  INFO("raced rounds: the callback ran in " << racedRan << ", the token went first in " << racedDestroyedFirst);
  CHECK(wrong == 0);
  CHECK(racedRan + racedDestroyedFirst == rounds / 3);
  CHECK(bridges() == before);
}

// ---- pool tasks taking a std::stop_token ---------------------------------------------

TEST_CASE("a task taking a std::stop_token runs with a stop token that can stop", "[stoptoken][pool]") {
  ThreadPoolExecutor pool(taggedPool("st", 1, 1, WorkQueue::bounded(8)));
  Future<bool> possible = pool.submit([](std::stop_token stop) { return stop.stop_possible() && !stop.stop_requested(); });
  CHECK(possible.get());
  Future<int> either = pool.submit(EitherToken{});
  CHECK(either.get() == 1);  // invocable both ways: the CancellationToken wins
  auto coroutine = pool.submit([](std::stop_token stop) -> Task<bool> { co_return stop.stop_possible(); });
  CHECK(coroutine.get());
  const PoolStats stats = finalStats(pool);
  CHECK(stats.completedTaskCount == 3);
  checkLedgerAddsUp(stats);
}

TEST_CASE("Future::cancel() of a running task taking a std::stop_token requests its stop, and its stop_callback runs",
          "[stoptoken][pool]") {
  Counter started;
  Counter callbackRan;
  std::atomic<bool> sawStop{false};
  std::thread::id callbackThread;
  ThreadPoolExecutor pool(taggedPool("sc", 1, 1, WorkQueue::bounded(8)));
  Future<int> future = pool.submit([&](std::stop_token stop) {
    std::stop_callback onStop(stop, [&] {
      callbackThread = std::this_thread::get_id();
      callbackRan.arrive();
    });
    started.arrive();
    if (!waitForStop(stop)) return -1;
    sawStop = true;
    throw OperationCancelled();
  });
  REQUIRE(started.waitFor(1));
  CHECK(future.cancel());
  CHECK(callbackRan.count() == 1);  // inside cancel(), on this thread
  CHECK(callbackThread == std::this_thread::get_id());
  CHECK(throwsA<OperationCancelled>([&] { future.get(); }));
  const PoolStats stats = finalStats(pool);
  CHECK(sawStop.load());
  CHECK(stats.taskCount == 1);
  CHECK(stats.cancelledCount == 1);
  checkLedgerAddsUp(stats);
}

TEST_CASE("shutdownNow() requests the stop of a running task taking a std::stop_token", "[stoptoken][pool]") {
  Counter started;
  ThreadPoolExecutor pool(taggedPool("sn", 1, 1, WorkQueue::bounded(8)));
  Future<int> future = pool.submit([&](std::stop_token stop) {
    started.arrive();
    return waitForStop(stop) ? 7 : -1;
  });
  REQUIRE(started.waitFor(1));
  CHECK(pool.shutdownNow().empty());
  CHECK(future.get() == 7);  // the Future reports what the task did
  REQUIRE(pool.awaitTermination(kLong));
  const PoolStats stats = pool.stats();
  CHECK(stats.completedTaskCount == 1);
  checkLedgerAddsUp(stats);
}

TEST_CASE("a periodic task, a lane task and invokeAll elements may take a std::stop_token", "[stoptoken][pool]") {
  ThreadPoolExecutor pool(taggedPool("sp", 2, 2, WorkQueue::bounded(64)));
  Counter ran;
  std::atomic<bool> periodicPossible{false};
  coexec::PeriodicHandle handle = pool.scheduleWithFixedDelay(
      [&](std::stop_token stop) {
        periodicPossible = stop.stop_possible();
        ran.arrive();
      },
      0ms, 1h);
  REQUIRE(ran.waitFor(1));
  CHECK(periodicPossible.load());
  CHECK(handle.cancel());

  SerialExecutor lane(pool);
  Future<bool> laneTask = lane.submit([](std::stop_token stop) { return stop.stop_possible(); });
  CHECK(laneTask.get());
  std::stop_source stopped;
  stopped.request_stop();
  Future<bool> laneCancelled = lane.submit([](std::stop_token) { return true; }, stopped.get_token());
  CHECK(throwsA<OperationCancelled>([&] { laneCancelled.get(); }));

  auto element = [](std::stop_token stop) { return stop.stop_possible() ? 1 : 0; };
  std::vector<decltype(element)> elements(3, element);
  auto all = [](ThreadPoolExecutor& p, std::vector<decltype(element)>& tasks) -> Task<std::vector<int>> {
    co_return co_await p.invokeAll(tasks);
  };
  CHECK(syncWait(all(pool, elements)) == std::vector<int>{1, 1, 1});
}

namespace {

Task<int> cancelGroupChild(ThreadPoolExecutor& pool, Counter& started, std::atomic<bool>& sawStop) {
  coexec::TaskGroup group(pool);
  Future<int> child = group.spawn([&](std::stop_token own) {
    started.arrive();
    sawStop = waitForStop(own);
    return 1;
  });
  if (!started.waitFor(1)) co_return -1;  // (syncWait's thread: blocking here holds no pool thread)
  group.cancel();
  co_await group.join();  // returns normally: a cancelled child is not a failure
  co_return throwsA<OperationCancelled>([&] { child.get(); }) ? 0 : 2;
}

}  // namespace

TEST_CASE("TaskGroup::cancel() requests the stop of a child taking a std::stop_token", "[stoptoken][pool]") {
  ThreadPoolExecutor pool(taggedPool("tg", 2, 2, WorkQueue::bounded(8)));
  Counter started;
  std::atomic<bool> sawStop{false};
  CHECK(syncWait(cancelGroupChild(pool, started, sawStop)) == 0);
  CHECK(sawStop.load());
  checkLedgerAddsUp(finalStats(pool));
}

// ---- pool.submit(f, stopToken) ------------------------------------------------------------

TEST_CASE("a stop requested while the task is queued: it never runs and its Future settles at once",
          "[stoptoken][link]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(taggedPool("lq", 1, 1, WorkQueue::bounded(8)));
  OpenOnExit release(gate);
  executeBlocked(pool, 1, started, gate);  // holds the only thread: the task stays queued
  REQUIRE(started.waitFor(1));
  std::stop_source source;
  std::atomic<int> ran{0};
  Future<int> future = pool.submit(
      [&ran] {
        ran.fetch_add(1);
        return 1;
      },
      source.get_token());
  CHECK_FALSE(future.isDone());
  CHECK(source.request_stop());
  CHECK(future.isDone());  // at once, on this thread
  CHECK(future.isCancelled());
  CHECK(throwsA<OperationCancelled>([&] { future.get(); }));
  gate.open();
  const PoolStats stats = finalStats(pool);
  CHECK(ran.load() == 0);
  CHECK(stats.taskCount == 2);
  CHECK(stats.cancelledCount == 1);
  CHECK(stats.completedTaskCount == 1);  // the blocker
  CHECK(stats.rejectedCount == 0);
  checkLedgerAddsUp(stats);
}

TEST_CASE("a stop_token stopped already: the task never runs, counts as cancelled, is not admitted, also after shutdown",
          "[stoptoken][link]") {
  std::stop_source source;
  source.request_stop();
  std::atomic<int> ran{0};
  auto work = [&ran] {
    ran.fetch_add(1);
    return 1;
  };
  ThreadPoolExecutor pool(taggedPool("ls", 1, 1, WorkQueue::bounded(8)));
  Future<int> plain = pool.submit(work, source.get_token());
  Future<int> prioritised = pool.submit(work, source.get_token(), 5);
  pool.execute(work, source.get_token());
  pool.execute(work, source.get_token(), 5);
  CHECK(plain.isCancelled());
  CHECK(prioritised.isCancelled());
  CHECK(throwsA<OperationCancelled>([&] { plain.get(); }));
  CHECK(throwsA<OperationCancelled>([&] { prioritised.get(); }));
  pool.shutdown();
  Future<int> afterShutdown = pool.submit(work, source.get_token());  // no RejectedExecution under abort()
  pool.execute(work, source.get_token());
  CHECK(throwsA<OperationCancelled>([&] { afterShutdown.get(); }));
  REQUIRE(pool.awaitTermination(kLong));
  const PoolStats stats = pool.stats();
  CHECK(ran.load() == 0);
  CHECK(stats.taskCount == 6);
  CHECK(stats.cancelledCount == 6);
  CHECK(stats.rejectedCount == 0);
  CHECK(stats.completedTaskCount == 0);
  CHECK(stats.largestPoolSize == 0);  // nothing was admitted: no thread ever started
  checkLedgerAddsUp(stats);
}

TEST_CASE("a stop requested while the task runs cancels the task's own token and std::stop_token",
          "[stoptoken][link]") {
  Counter started;
  Counter sawCancellation;
  std::thread::id callbackThread;
  ThreadPoolExecutor pool(taggedPool("lr", 2, 2, WorkQueue::bounded(8)));
  std::stop_source source;
  Future<int> withToken = pool.submit(
      [&](CancellationToken own) {
        CancellationRegistration registration(own, [&] {
          callbackThread = std::this_thread::get_id();
          sawCancellation.arrive();
        });
        started.arrive();
        return waitForStop(own.stopToken()) ? 1 : 0;
      },
      source.get_token());
  Future<int> withStop = pool.submit([&](std::stop_token own) {
    started.arrive();
    return waitForStop(own) ? 2 : 0;
  }, source.get_token(), /*priority=*/3);
  REQUIRE(started.waitFor(2));
  std::thread::id requester;
  std::thread requesting([&] {
    requester = std::this_thread::get_id();
    source.request_stop();
  });
  requesting.join();
  CHECK(sawCancellation.count() == 1);  // inside request_stop()
  CHECK(callbackThread == requester);
  // Linked and cancelled: the Futures report OperationCancelled whatever the tasks returned.
  CHECK(throwsA<OperationCancelled>([&] { withToken.get(); }));
  CHECK(throwsA<OperationCancelled>([&] { withStop.get(); }));
  const PoolStats stats = finalStats(pool);
  CHECK(stats.taskCount == 2);
  checkLedgerAddsUp(stats);
}

TEST_CASE("execute(f, stopToken): a stop request reaches the running task", "[stoptoken][link]") {
  Counter started;
  Counter stopped;
  ThreadPoolExecutor pool(taggedPool("le", 1, 1, WorkQueue::bounded(8)));
  std::stop_source source;
  pool.execute(
      [&](std::stop_token own) {
        started.arrive();
        if (waitForStop(own)) stopped.arrive();
      },
      source.get_token());
  REQUIRE(started.waitFor(1));
  source.request_stop();
  REQUIRE(stopped.waitFor(1));
  const PoolStats stats = finalStats(pool);
  CHECK(stats.taskCount == 1);
  checkLedgerAddsUp(stats);
}

TEST_CASE("a std::jthread's stop token handed to the pool: request_stop() and the destructor cancel the task",
          "[stoptoken][link][jthread]") {
  ThreadPoolExecutor pool(taggedPool("lj", 2, 2, WorkQueue::bounded(8)));
  const auto waitUntilStopped = [](std::stop_token own) { (void)waitForStop(own); };
  Counter started;
  auto task = [&](std::stop_token own) {
    started.arrive();
    return waitForStop(own) ? 1 : 0;
  };

  SECTION("request_stop()") {
    std::jthread worker(waitUntilStopped);
    Future<int> future = pool.submit(task, worker.get_stop_token());
    REQUIRE(started.waitFor(1));
    CHECK_FALSE(future.isDone());
    CHECK(worker.request_stop());
    CHECK(throwsA<OperationCancelled>([&] { future.get(); }));
  }
  SECTION("the destructor") {
    std::optional<Future<int>> future;
    {
      std::jthread worker(waitUntilStopped);
      future = pool.submit(task, worker.get_stop_token());
      REQUIRE(started.waitFor(1));
    }  // requests stop, then joins
    CHECK(throwsA<OperationCancelled>([&] { future->get(); }));
  }
  const PoolStats stats = finalStats(pool);
  CHECK(stats.taskCount == 1);
  checkLedgerAddsUp(stats);
}

TEST_CASE("children of a task linked to a stop token are cancelled when the stop is requested",
          "[stoptoken][link][children]") {
  Counter started;
  std::atomic<int> childRuns{0};
  std::atomic<bool> parentSawStop{false};
  std::optional<Future<int>> queuedChild;
  std::optional<Future<int>> runningChild;
  Counter childStarted;
  ThreadPoolExecutor pool(taggedPool("lc", 2, 2, WorkQueue::bounded(16)));
  ThreadPoolExecutor other(taggedPool("lo", 1, 1, WorkQueue::bounded(16)));
  Gate otherBusy;
  Counter otherStarted;
  OpenOnExit releaseOther(otherBusy);
  executeBlocked(other, 1, otherStarted, otherBusy);  // its child there stays queued
  REQUIRE(otherStarted.waitFor(1));
  std::stop_source source;
  Future<int> parent = pool.submit(
      [&](std::stop_token own) {
        queuedChild = other.submit([&childRuns] { return childRuns.fetch_add(1); });
        runningChild = pool.submit([&](std::stop_token childOwn) {
          childStarted.arrive();
          return waitForStop(childOwn) ? 2 : 0;
        });
        if (!childStarted.waitFor(1)) return -1;  // (no Catch2 on a pool thread; the test checks the parent's end)
        started.arrive();
        parentSawStop = waitForStop(own);
        return 1;
      },
      source.get_token());
  REQUIRE(started.waitFor(1));
  CHECK_FALSE(queuedChild->isDone());
  source.request_stop();
  CHECK(queuedChild->isDone());  // settled at once, on this thread
  CHECK(queuedChild->isCancelled());
  CHECK(throwsA<OperationCancelled>([&] { queuedChild->get(); }));
  CHECK(throwsA<OperationCancelled>([&] { runningChild->get(); }));
  CHECK(throwsA<OperationCancelled>([&] { parent.get(); }));
  CHECK(parentSawStop.load());
  otherBusy.open();
  const PoolStats otherStats = finalStats(other);
  CHECK(childRuns.load() == 0);
  CHECK(otherStats.cancelledCount == 1);
  checkLedgerAddsUp(otherStats);
  const PoolStats stats = finalStats(pool);
  CHECK(stats.taskCount == 2);
  checkLedgerAddsUp(stats);
}

TEST_CASE("a long-lived stop_source handed to 1000 tasks keeps nothing of them once they have settled",
          "[stoptoken][link][leak]") {
  const std::size_t before = bridges();
  std::stop_source longLived;
  const CancellationToken converted = longLived.get_token();
  ThreadPoolExecutor pool(taggedPool("ll", 2, 2, WorkQueue::bounded(2048)));
  std::vector<Future<int>> futures;
  futures.reserve(2000);
  for (int i = 0; i < 1000; ++i) {
    futures.push_back(pool.submit([i](std::stop_token own) { return own.stop_requested() ? -1 : i; }, converted));
    futures.push_back(pool.submit([i] { return i; }, longLived.get_token()));  // a bridge of its own each
  }
  long sum = 0;
  for (Future<int>& future : futures) sum += future.get();
  CHECK(sum == 2 * (999L * 1000 / 2));
  const PoolStats stats = finalStats(pool);  // every link is released by the time the pool has terminated
  CHECK(stats.completedTaskCount == 2000);
  checkLedgerAddsUp(stats);
  CHECK(registrationCount(converted) == 0);
  if (FaultInjection::available()) CHECK(bridges() == before + 1);  // `converted` alone
}

// ---- currentStopToken() ----------------------------------------------------------------------

namespace {

struct StopProbe {
  std::mutex mutex;
  std::optional<std::stop_token> stop;
  bool stopRequestedAfterResume = false;
};

Task<int> awaitBlocked(Future<int>& blocked, StopProbe& probe, Counter& reached) {
  {
    auto named = currentStopToken();  // the named form
    std::stop_token stop = co_await named;
    std::lock_guard lock(probe.mutex);
    probe.stop = std::move(stop);
  }
  reached.arrive();
  try {
    co_return co_await blocked;
  } catch (const OperationCancelled&) {
    // (No co_await inside a handler: below.)
  }
  const std::stop_token stop = co_await currentStopToken();  // the temporary form
  {
    std::lock_guard lock(probe.mutex);
    probe.stopRequestedAfterResume = stop.stop_requested();
  }
  throw OperationCancelled();
}

Task<bool> stopPossibleHere() {
  const std::stop_token stop = co_await currentStopToken();
  co_return stop.stop_possible();
}

}  // namespace

TEST_CASE("co_await currentStopToken() follows the coroutine task's token", "[stoptoken][coroutine]") {
  Gate gate;
  Counter blockedStarted;
  Counter reached;
  StopProbe probe;
  ThreadPoolExecutor pool(taggedPool("cs", 2, 2, WorkQueue::bounded(8)));
  OpenOnExit release(gate);
  Future<int> blocked = pool.submit([&] {
    blockedStarted.arrive();
    gate.wait();
    return 5;
  });
  REQUIRE(blockedStarted.waitFor(1));
  Future<int> coroutine = pool.submit(awaitBlocked(blocked, probe, reached));
  REQUIRE(reached.waitFor(1));
  // The other thread is held by `blocked`: a probe task runs only once the
  // coroutine has given its thread back (it is suspended on `blocked`).
  Future<void> suspendedProbe = pool.submit([] {});
  REQUIRE(suspendedProbe.waitFor(kLong));
  std::stop_token stop;
  {
    std::lock_guard lock(probe.mutex);
    REQUIRE(probe.stop.has_value());
    stop = *probe.stop;
  }
  CHECK(stop.stop_possible());
  CHECK_FALSE(stop.stop_requested());
  CHECK(coroutine.cancel());
  CHECK(stop.stop_requested());  // at once, inside cancel()
  gate.open();                   // the awaited task settles; the coroutine goes on
  CHECK(throwsA<OperationCancelled>([&] { coroutine.get(); }));
  {
    std::lock_guard lock(probe.mutex);
    CHECK(probe.stopRequestedAfterResume);
  }
  const PoolStats stats = finalStats(pool);
  checkLedgerAddsUp(stats);
}

TEST_CASE("co_await currentStopToken() outside any pool task gives a token that can never stop",
          "[stoptoken][coroutine]") {
  CHECK_FALSE(syncWait(stopPossibleHere()));
  ThreadPoolExecutor pool(taggedPool("cp", 1, 1, WorkQueue::bounded(8)));
  Future<bool> onPool = pool.submit(stopPossibleHere());
  CHECK(onPool.get());
}

// ---- the example of docs/cancellation.md -------------------------------------------------------

namespace {

// The example of docs/cancellation.md, "std::stop_token, std::jthread and
// Asio" (there with a real workload): a jthread that feeds a pool hands it
// its own stop token, so stopping the jthread cancels the work it started.
// `crunch` reports each step it takes to *crunchSteps and stops at the stop
// request.
Counter* crunchSteps = nullptr;

int crunch(std::stop_token stop) {
  const auto giveUp = std::chrono::steady_clock::now() + kLong;  // bounds the wait only
  while (!stop.stop_requested()) {
    crunchSteps->arrive();
    if (std::chrono::steady_clock::now() > giveUp) return -1;
  }
  throw OperationCancelled();
}

}  // namespace

TEST_CASE("the docs example: a jthread's stop token cancels the pool work it started", "[stoptoken][docs]") {
  ThreadPoolExecutor pool(taggedPool("dx", 2, 2, WorkQueue::bounded(8)));
  Counter steps;
  crunchSteps = &steps;
  std::optional<coexec::Future<int>> result;
  {
    std::jthread feeder([&](std::stop_token stop) {
      result = pool.submit(crunch, stop);  // linked: the jthread's stop cancels the task
      (void)waitForStop(stop);             // ... feed more work, until stopped
    });
    REQUIRE(steps.waitFor(1));  // the work runs
  }  // ~jthread: request_stop() cancels the task (crunch sees it), then join()
  CHECK(throwsA<OperationCancelled>([&] { result->get(); }));
  const PoolStats stats = finalStats(pool);
  CHECK(stats.cancelledCount == 1);
  checkLedgerAddsUp(stats);
  crunchSteps = nullptr;
}
