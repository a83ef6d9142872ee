// SPDX-License-Identifier: BSL-1.0
#include "coexec/CancellationToken.h"

// std::stop_token and coexec's cancellation (docs/cancellation.md,
// "std::stop_token, std::jthread and Asio"), part one (StopTokenLinkTest.cpp
// has pool.submit(f, stopToken) and currentStopToken()):
// - CancellationToken::stopToken(): stop is requested when the token is
//   cancelled, on the cancelling thread, before the registrations run;
// - CancellationToken(const std::stop_token&): a stop request cancels the
//   token; a stop_token that can never stop gives a token that can never be
//   cancelled; the state (and its std::stop_callback) goes with the last
//   copy, also when a concurrent request_stop() races the destruction, and
//   when the callback itself drops the last reference;
// - pool tasks whose callable takes a std::stop_token: cancellable exactly
//   like one taking a CancellationToken (Future::cancel(), shutdownNow(), a
//   parent's cancellation).
//
// Ordering is by gates, counters and the stop tokens themselves (a task waits
// for its stop with a condition_variable_any bounded by kLong); no sleep
// decides an outcome.

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <type_traits>
#include <vector>

#include "Assertions.h"

#include "CoroutineTestSupport.h"
#include "StopTokenTestSupport.h"
#include "TestSupport.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/InvokeAll.h"
#include "coexec/SerialExecutor.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/TaskGroup.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/FaultInjection.h"

using coexec::CancellationRegistration;
using coexec::CancellationSource;
using coexec::CancellationToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::PoolStats;
using coexec::SerialExecutor;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::detail::FaultInjection;
using coexec::detail::registrationCount;
using coexec::test::bridges;
using coexec::test::checkLedgerAddsUp;
using coexec::test::Counter;
using coexec::test::finalStats;
using coexec::test::kLong;
using coexec::test::taggedPool;
using coexec::test::throwsA;
using coexec::test::waitForStop;
using namespace std::chrono_literals;

// A CancellationToken converts from a std::stop_token, implicitly; nothing
// converts the other way (a callable taking a std::stop_token is told apart
// from one taking a CancellationToken by that).
static_assert(std::is_convertible_v<std::stop_token, CancellationToken>);
static_assert(!std::is_convertible_v<CancellationToken, std::stop_token>);

namespace {

/// A callable that takes either token: the pool gives it the CancellationToken.
struct EitherToken {
  int operator()(const CancellationToken& /*token*/) const { return 1; }
  int operator()(std::stop_token /*stop*/) const { return 2; }
};

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
