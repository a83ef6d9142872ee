// SPDX-License-Identifier: BSL-1.0
// The pool's Asio executor (asioExecutor, AsioPoolExecutor): post /
// dispatch / defer / co_spawn run on the pool, and what a rejection does on
// each path.
#if COEXEC_TEST_BOOST_ASIO
#include "coexec/boost_asio.h"
#else
#include "coexec/asio/AsioPoolExecutor.h"
#endif
#include "coexec/ThisThread.h"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <variant>

#include "Assertions.h"

#include "AsioFlavour.h"
#include "AsioTestSupport.h"
#include "CoroutineTestSupport.h"
#include "TestSupport.h"

using namespace coexec;
using namespace coexec::test;
using namespace std::chrono_literals;

TEST_CASE("asioExecutor is an Asio standard executor that names its pool", "[asio][executor]") {
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor other(taggedPool("other", 1, 1, WorkQueue::bounded(8)));
  const AsioPoolExecutor ex = asioExecutor(pool);
  STATIC_REQUIRE(asio::execution::is_executor<AsioPoolExecutor>::value);
  REQUIRE(&ex.pool() == &pool);
  REQUIRE(ex == asioExecutor(pool));
  REQUIRE(ex != asioExecutor(other));
  REQUIRE(asio::query(ex, asio::execution::blocking) == asio::execution::blocking.possibly);
  const auto never = asio::require(ex, asio::execution::blocking.never);
  REQUIRE(asio::query(never, asio::execution::blocking) == asio::execution::blocking.never);
  REQUIRE(never != ex);
  REQUIRE(asio::query(asio::require(never, asio::execution::blocking.possibly), asio::execution::blocking) ==
          asio::execution::blocking.possibly);
  REQUIRE(asio::query(ex, asio::execution::relationship) == asio::execution::relationship.fork);
  REQUIRE(asio::query(asio::require(ex, asio::execution::relationship.continuation), asio::execution::relationship) ==
          asio::execution::relationship.continuation);
  REQUIRE(asio::query(asio::prefer(ex, asio::execution::outstanding_work.tracked), asio::execution::outstanding_work) ==
          asio::execution::outstanding_work.untracked);
  REQUIRE(&asio::query(ex, asio::execution::context) == &asio::query(asioExecutor(other), asio::execution::context));
  const asio::any_io_executor any = ex;
  REQUIRE(any.target<AsioPoolExecutor>() != nullptr);
  REQUIRE(&any.target<AsioPoolExecutor>()->pool() == &pool);
}

TEST_CASE("asio::post, dispatch and defer onto asioExecutor run on a pool thread", "[asio][executor]") {
  ThreadPoolExecutor pool(taggedPool("pool", 2, 2, WorkQueue::bounded(8)));
  Seen posted, dispatched, deferred;
  asio::post(asioExecutor(pool), [&] { posted.record(); });
  asio::dispatch(asioExecutor(pool), [&] { dispatched.record(); });
  asio::defer(asioExecutor(pool), [&] { deferred.record(); });
  REQUIRE(tagOf(posted) == "pool");
  REQUIRE(tagOf(dispatched) == "pool");
  REQUIRE(tagOf(deferred) == "pool");
  REQUIRE(eventually([&] { return pool.stats().completedTaskCount == 3; }));
}

TEST_CASE("asio::dispatch from a pool thread runs inline, post from there is queued", "[asio][executor]") {
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  std::promise<std::pair<bool, bool>> result;  // (dispatch ran inside the call, post ran inside the call)
  pool.execute([&] {
    bool dispatchedInside = false;
    bool postedInside = false;
    bool inCall = true;
    asio::dispatch(asioExecutor(pool), [&] { dispatchedInside = inCall; });
    // A one-thread pool: the posted function cannot run before this task ends.
    asio::post(asioExecutor(pool), [&postedInside, inCall] { postedInside = inCall; });
    inCall = false;
    result.set_value({dispatchedInside, postedInside});
  });
  auto future = result.get_future();
  REQUIRE(future.wait_for(kLong) == std::future_status::ready);
  const auto [dispatchedInside, postedInside] = future.get();
  REQUIRE(dispatchedInside);
  REQUIRE_FALSE(postedInside);
}

TEST_CASE("asio::post, dispatch and defer refused under abort() run the function in the caller",
          "[asio][executor][rejection]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(1)));
  StopOnExit stop(gate, pool);
  saturate(pool, gate, started);
  std::vector<std::pair<std::string_view, std::thread::id>> ranOn;
  bool inCall = false;
  int ranInCall = 0;
  auto record = [&] {
    ranOn.emplace_back(currentTag, std::this_thread::get_id());
    if (inCall) ++ranInCall;
  };
  inCall = true;
  asio::post(asioExecutor(pool), record);
  asio::dispatch(asioExecutor(pool), record);
  asio::defer(asioExecutor(pool), record);
  inCall = false;
  REQUIRE(ranInCall == 3);
  for (const auto& [tag, thread] : ranOn) {
    REQUIRE(tag.empty());  // not a pool thread: the caller's
    REQUIRE(thread == std::this_thread::get_id());
  }
  REQUIRE(pool.stats().rejectedCount == 3);
  gate.open();
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  checkLedgerAddsUp(pool.stats());
}

TEST_CASE("asio::post after shutdown runs in the caller, under discard() the function is dropped unrun",
          "[asio][executor][rejection]") {
  ThreadPoolExecutor aborting(taggedPool("aborting", 1, 1, WorkQueue::bounded(1)));
  ThreadPoolExecutor discarding(taggedPool("discarding", 1, 1, WorkQueue::bounded(1), RejectionPolicy::discard()));
  aborting.shutdown();
  discarding.shutdown();
  std::thread::id ranOn;
  asio::post(asioExecutor(aborting), [&] { ranOn = std::this_thread::get_id(); });
  REQUIRE(ranOn == std::this_thread::get_id());
  auto alive = std::make_shared<int>(0);
  bool ran = false;
  asio::post(asioExecutor(discarding), [&ran, alive] { ran = true; });
  REQUIRE(alive.use_count() == 1);  // the dropped function is gone
  REQUIRE(aborting.awaitTermination(kLong));
  REQUIRE(discarding.awaitTermination(kLong));
  REQUIRE_FALSE(ran);
  REQUIRE(aborting.stats().rejectedCount == 1);
  REQUIRE(discarding.stats().rejectedCount == 1);
}

TEST_CASE("an Asio coroutine dropped by discard() is destroyed, its handler never called",
          "[asio][executor][rejection]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(1), RejectionPolicy::discard()));
  StopOnExit stop(gate, pool);
  saturate(pool, gate, started);
  auto alive = std::make_shared<int>(0);
  bool bodyRan = false;
  bool handlerCalled = false;
  asio::co_spawn(
      asioExecutor(pool),
      [&bodyRan, alive]() -> asio::awaitable<void> {
        bodyRan = true;
        co_return;
      },
      [&](std::exception_ptr) { handlerCalled = true; });
  REQUIRE(alive.use_count() == 1);  // the coroutine's function was destroyed with its stack
  gate.open();
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  REQUIRE_FALSE(bodyRan);
  REQUIRE_FALSE(handlerCalled);
}

TEST_CASE("asio::co_spawn onto asioExecutor runs the coroutine on a pool thread", "[asio][executor][co_spawn]") {
  ThreadPoolExecutor pool(taggedPool("pool", 2, 2, WorkQueue::bounded(8)));
  std::future<std::string> tag = asio::co_spawn(
      asioExecutor(pool),
      []() -> asio::awaitable<std::string> {
        std::string first(currentTag);
        // Another hop through the executor, after an asynchronous operation.
        co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
        co_return first + "/" + std::string(currentTag);
      },
      asio::use_future);
  REQUIRE(tag.wait_for(kLong) == std::future_status::ready);
  REQUIRE(tag.get() == "pool/pool");
}

TEST_CASE("asio::co_spawn onto a saturated pool under abort() starts the coroutine in its caller",
          "[asio][executor][co_spawn][rejection]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(1)));
  StopOnExit stop(gate, pool);
  saturate(pool, gate, started);
  std::thread::id bodyRanOn;
  std::optional<std::string> handlerTag;
  asio::co_spawn(
      asioExecutor(pool),
      [&]() -> asio::awaitable<int> {
        bodyRanOn = coexec::thisThreadId();
        co_return 4;
      },
      [&](std::exception_ptr error, int v) {
        REQUIRE_FALSE(error);
        REQUIRE(v == 4);
        handlerTag = std::string(currentTag);
      });
  // Refused at the start and at the handing of the result to the handler,
  // whose executor is the pool's too; Asio 1.26 (Boost 1.81's) posts the
  // finished coroutine once more before that, where Asio 1.22 does not,
  // refused as well. Every one ran here, inside co_spawn.
  REQUIRE(bodyRanOn == std::this_thread::get_id());
  REQUIRE(handlerTag == "");
  REQUIRE(pool.stats().rejectedCount == (kAsioVersion >= 102600 ? 3U : 2U));
  gate.open();
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
}

TEST_CASE("a refused hop back onto the pool inside co_spawn goes on in the io_context thread",
          "[asio][executor][co_spawn][rejection]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(taggedPool("pool", 2, 2, WorkQueue::bounded(1)));
  StopOnExit stop(gate, pool);
  asio::io_context io;
  std::promise<std::string> firstTag;
  std::string secondTag = "unset";
  std::thread::id secondThread;
  Counter spawned;
  asio::co_spawn(
      asioExecutor(pool),
      [&]() -> asio::awaitable<void> {
        firstTag.set_value(std::string(currentTag));
        asio::steady_timer timer(io, 0ms);
        // Wait on the io_context while the pool is filled up: the hop back
        // is new work for the pool, and it is refused.
        co_await timer.async_wait(asio::use_awaitable);
        secondTag = currentTag;
        secondThread = coexec::thisThreadId();
      },
      asio::detached);
  auto tag = firstTag.get_future();
  REQUIRE(tag.wait_for(kLong) == std::future_status::ready);
  REQUIRE(tag.get() == "pool");
  // The coroutine's first run ends once its timer wait is armed (the wait is
  // then io work, which io.run() below completes).
  REQUIRE(eventually([&] { return pool.stats().activeCount == 0; }));
  pool.execute([&] {
    started.arrive();
    gate.wait();
  });
  pool.execute([&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(2));
  pool.execute([] {});  // the queue is full
  io.run();
  REQUIRE(secondTag.empty());
  REQUIRE(secondThread == std::this_thread::get_id());
  // The hop back, and Asio's handing of the coroutine's end to its handler
  // (the pool's executor too): refused, and run on the io_context thread.
  REQUIRE(pool.stats().rejectedCount == 2);
}
