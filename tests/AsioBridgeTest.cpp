// The Asio bridge, first half: the pool's Asio executor (post / dispatch /
// defer / co_spawn, and what a rejection does on each path) and asyncWait
// (every completion token, where the handler runs, outstanding work,
// cancellation, rejected tasks).
#include "coexec/asio.h"

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

#include <asio/experimental/awaitable_operators.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/experimental/parallel_group.hpp>
#include <catch2/catch.hpp>

#include "CoroutineTestSupport.h"
#include "TestSupport.h"

using namespace coexec;
using namespace coexec::test;
using namespace std::chrono_literals;

namespace {

/// What a function run through an executor saw: the tag of its thread.
struct Seen {
  std::promise<std::string> tag;
  void record() { tag.set_value(std::string(currentTag)); }
};

std::string tagOf(Seen& seen) {
  auto future = seen.tag.get_future();
  REQUIRE(future.wait_for(kLong) == std::future_status::ready);
  return future.get();
}

/// Fills a 1-thread pool with a bounded(1) queue: the thread blocked on
/// `gate`, the queue holding one task. The next task is rejected.
void saturate(ThreadPoolExecutor& pool, Gate& gate, Counter& started) {
  pool.execute([&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  pool.execute([] {});
}

/// True if `error` holds an E.
template <class E>
bool holds(const std::exception_ptr& error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

bool isOperationAborted(const std::exception_ptr& error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const std::system_error& e) {
    return e.code() == asio::error::operation_aborted;
  } catch (...) {
    return false;
  }
}

}  // namespace

// ---- the pool's Asio executor ----------------------------------------------------

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

TEST_CASE("asio::dispatch from a pool thread runs inline; post from there is queued", "[asio][executor]") {
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

TEST_CASE("asio::post after shutdown runs in the caller; under discard() the function is dropped unrun",
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
        bodyRanOn = std::this_thread::get_id();
        co_return 4;
      },
      [&](std::exception_ptr error, int v) {
        REQUIRE_FALSE(error);
        REQUIRE(v == 4);
        handlerTag = std::string(currentTag);
      });
  // Refused twice (the start, and the handing of the result to the
  // handler, whose executor is the pool's too): both ran here, inside
  // co_spawn.
  REQUIRE(bodyRanOn == std::this_thread::get_id());
  REQUIRE(handlerTag == "");
  REQUIRE(pool.stats().rejectedCount == 2);
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
        secondThread = std::this_thread::get_id();
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

// ---- asyncWait ------------------------------------------------------------------

TEST_CASE("asyncWait with use_awaitable resumes on the io_context thread with the value or the exception",
          "[asio][asyncWait]") {
  ThreadPoolExecutor pool(taggedPool("pool", 2, 2, WorkQueue::bounded(8)));
  asio::io_context io;
  std::optional<int> value;
  std::string error;
  std::thread::id resumedOn1, resumedOn2;
  std::string_view taskTag;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto f = pool.submit([&] {
          taskTag = currentTag;
          return 42;
        });
        value = co_await asyncWait(f, asio::use_awaitable);
        resumedOn1 = std::this_thread::get_id();
        auto failing = pool.submit([]() -> int { throw std::runtime_error("boom"); });
        try {
          (void)co_await asyncWait(failing, asio::use_awaitable);
        } catch (const std::runtime_error& e) {
          error = e.what();
        }
        resumedOn2 = std::this_thread::get_id();
      },
      asio::detached);
  io.run();
  REQUIRE(value == 42);
  REQUIRE(taskTag == "pool");
  REQUIRE(error == "boom");
  REQUIRE(resumedOn1 == std::this_thread::get_id());
  REQUIRE(resumedOn2 == std::this_thread::get_id());
}

TEST_CASE("asyncWait with experimental::deferred completes on the io_context thread", "[asio][asyncWait]") {
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  asio::io_context io;
  Gate gate;
  auto f = pool.submit([&] {
    gate.wait();
    return std::string("deferred");
  });
  auto op = asyncWait(f, asio::experimental::deferred);  // nothing starts yet
  std::string got;
  std::thread::id ranOn;
  std::move(op)(asio::bind_executor(io, [&](std::exception_ptr error, std::string v) {
    REQUIRE_FALSE(error);
    got = std::move(v);
    ranOn = std::this_thread::get_id();
  }));
  asio::post(io, [&] { gate.open(); });
  io.run();
  REQUIRE(got == "deferred");
  REQUIRE(ranOn == std::this_thread::get_id());
}

TEST_CASE("asyncWait with experimental::deferred awaited in a coroutine gives the task's exception",
          "[asio][asyncWait]") {
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  asio::io_context io;
  std::exception_ptr error;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto f = pool.submit([] { throw std::out_of_range("deferred failure"); });
        auto op = asyncWait(f, asio::experimental::deferred);
        try {
          co_await std::move(op)(asio::use_awaitable);
        } catch (...) {
          error = std::current_exception();
        }
      },
      asio::detached);
  io.run();
  REQUIRE(holds<std::out_of_range>(error));
}

TEST_CASE("asyncWait with use_future bound to the io_context delivers on the io_context thread", "[asio][asyncWait]") {
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread ioThread([&] { io.run(); });
  auto f = pool.submit([] { return 7; });
  std::future<std::pair<int, std::thread::id>> result =
      asyncWait(f, asio::bind_executor(io, asio::use_future([](std::exception_ptr error, int v) {
                                         if (error) std::rethrow_exception(error);
                                         return std::pair(v, std::this_thread::get_id());
                                       })));
  auto failing = pool.submit([]() -> int { throw std::invalid_argument("future failure"); });
  std::future<int> failed = asyncWait(failing, asio::use_future);
  REQUIRE(result.wait_for(kLong) == std::future_status::ready);
  const auto [v, thread] = result.get();
  REQUIRE(v == 7);
  REQUIRE(thread == ioThread.get_id());
  REQUIRE(failed.wait_for(kLong) == std::future_status::ready);
  REQUIRE_THROWS_AS(failed.get(), std::invalid_argument);
  work.reset();
  ioThread.join();
}

TEST_CASE("asyncWait with a callback bound to the io_context runs it there, never inside asyncWait",
          "[asio][asyncWait]") {
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  asio::io_context io;
  auto f = pool.submit([] { return 5; });
  f.wait();  // settled before the wait starts
  int got = 0;
  std::thread::id ranOn;
  asyncWait(f, asio::bind_executor(io, [&](std::exception_ptr error, int v) {
              REQUIRE_FALSE(error);
              got = v;
              ranOn = std::this_thread::get_id();
            }));
  REQUIRE(got == 0);  // not inline
  REQUIRE(io.run() == 1);
  REQUIRE(got == 5);
  REQUIRE(ranOn == std::this_thread::get_id());
  REQUIRE_THROWS_AS(f.get(), std::logic_error);  // the operation consumed the result
}

TEST_CASE("asyncWait holds outstanding work: io_context::run() waits for the task", "[asio][asyncWait]") {
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  asio::io_context io;
  Gate gate;
  auto f = pool.submit([&] {
    gate.wait();
    return 1;
  });
  bool called = false;
  asyncWait(f, asio::bind_executor(io, [&](std::exception_ptr, int) { called = true; }));
  // The only other work: opening the gate. Without the operation's work,
  // run() would return right after it, before the task finishes.
  asio::post(io, [&] { gate.open(); });
  io.run();
  REQUIRE(called);
}

TEST_CASE("asyncWait taking the Future over leaves it empty; an empty Future throws std::logic_error",
          "[asio][asyncWait]") {
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  asio::io_context io;
  auto f = pool.submit([] { return 3; });
  int got = 0;
  asyncWait(std::move(f), asio::bind_executor(io, [&](std::exception_ptr, int v) { got = v; }));
  REQUIRE_FALSE(f.valid());  // NOLINT(bugprone-use-after-move): the point of the test
  io.run();
  REQUIRE(got == 3);
  Future<int> empty;
  REQUIRE_THROWS_AS(asyncWait(empty, asio::bind_executor(io, [](std::exception_ptr, int) {})), std::logic_error);
  Future<void> emptyVoid;
  REQUIRE_THROWS_AS(asyncWait(emptyVoid, asio::detached), std::logic_error);
}

TEST_CASE("asyncWait on a Future<void>", "[asio][asyncWait]") {
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  asio::io_context io;
  bool ran = false;
  std::exception_ptr ok = std::make_exception_ptr(1);
  std::exception_ptr failed;
  auto f = pool.submit([&] { ran = true; });
  auto g = pool.submit([] { throw std::runtime_error("void failure"); });
  asyncWait(f, asio::bind_executor(io, [&](std::exception_ptr error) { ok = error; }));
  asyncWait(g, asio::bind_executor(io, [&](std::exception_ptr error) { failed = error; }));
  io.run();
  REQUIRE(ran);
  REQUIRE_FALSE(ok);
  REQUIRE(holds<std::runtime_error>(failed));
}

TEST_CASE("asyncWait of a task the pool discarded completes with RejectedExecution", "[asio][asyncWait][rejection]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(1), RejectionPolicy::discard()));
  StopOnExit stop(gate, pool);
  saturate(pool, gate, started);
  asio::io_context io;
  auto f = pool.submit([] { return 1; });  // discarded: its Future settles with RejectedExecution
  std::exception_ptr error;
  asyncWait(f, asio::bind_executor(io, [&](std::exception_ptr e, int) { error = e; }));
  io.run();
  REQUIRE(holds<RejectedExecution>(error));
}

TEST_CASE("asyncWait || a timer: the timer wins, the pool task is cancelled and has settled",
          "[asio][asyncWait][cancellation]") {
  using namespace asio::experimental::awaitable_operators;
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  asio::io_context io;
  std::atomic<bool> sawCancellation{false};
  std::optional<std::size_t> winner;
  bool settledWhenResumed = false;
  Future<int> f;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        f = pool.submit([&](CancellationToken token) {
          sawCancellation = eventually([&] { return token.isCancellationRequested(); });
          return 1;
        });
        asio::steady_timer timer(io, 5ms);
        auto result = co_await (asyncWait(f, asio::use_awaitable) || timer.async_wait(asio::use_awaitable));
        winner = result.index();
        settledWhenResumed = f.isDone();
      },
      asio::detached);
  io.run();
  REQUIRE(winner == 1);
  REQUIRE(sawCancellation);
  REQUIRE(settledWhenResumed);  // structured: the task had settled before the operation completed
  REQUIRE(f.isCancelled());
}

TEST_CASE("asyncWait cancelled through make_parallel_group completes with operation_aborted",
          "[asio][asyncWait][cancellation]") {
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  asio::io_context io;
  std::exception_ptr waitError;
  std::size_t first = 99;
  Future<int> f = pool.submit([](CancellationToken token) {
    (void)eventually([&] { return token.isCancellationRequested(); });
    return 1;
  });
  asio::steady_timer timer(io, 5ms);
  asio::experimental::make_parallel_group(asyncWait(f, asio::experimental::deferred),
                                          timer.async_wait(asio::experimental::deferred))
      .async_wait(
          asio::experimental::wait_for_one(),
          asio::bind_executor(io, [&](std::array<std::size_t, 2> order, std::exception_ptr e, int, std::error_code) {
            first = order[0];
            waitError = e;
          }));
  io.run();
  REQUIRE(first == 1);
  REQUIRE(isOperationAborted(waitError));
  REQUIRE(f.isCancelled());
}

TEST_CASE("a cancellation signal cancels a queued task at once; one after settlement changes nothing",
          "[asio][asyncWait][cancellation]") {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  StopOnExit stop(gate, pool);
  pool.execute([&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  asio::io_context io;
  bool queuedRan = false;
  auto queued = pool.submit([&] {
    queuedRan = true;
    return 1;
  });
  asio::cancellation_signal signal;
  std::exception_ptr error;
  bool called = false;
  asyncWait(queued, asio::bind_cancellation_slot(signal.slot(), asio::bind_executor(io, [&](std::exception_ptr e, int) {
                                                   called = true;
                                                   error = e;
                                                 })));
  asio::post(io, [&] { signal.emit(asio::cancellation_type::terminal); });
  io.run();
  REQUIRE(called);
  REQUIRE(isOperationAborted(error));
  REQUIRE(queued.isCancelled());

  // Settled first: the signal (emitted before the posted completion runs) is ignored.
  io.restart();
  auto done = pool.submit([] { return 2; });
  gate.open();
  done.wait();
  int value = 0;
  error = nullptr;
  asio::cancellation_signal late;
  asyncWait(done, asio::bind_cancellation_slot(late.slot(), asio::bind_executor(io, [&](std::exception_ptr e, int v) {
                                                 error = e;
                                                 value = v;
                                               })));
  late.emit(asio::cancellation_type::terminal);
  io.run();
  REQUIRE_FALSE(error);
  REQUIRE(value == 2);
  REQUIRE_FALSE(queuedRan);
}

TEST_CASE("a cancellation signal racing the task's settlement completes once, with one outcome or the other",
          "[asio][asyncWait][cancellation][race]") {
  // Unbounded: a task cancelled while queued keeps its slot until the worker skips it.
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::unbounded()));
  int aborted = 0;
  int valued = 0;
  for (int i = 0; i < 20'000 && (aborted == 0 || valued == 0); ++i) {
    asio::io_context io;
    asio::cancellation_signal signal;
    auto f = pool.submit([i] { return i; });
    int calls = 0;
    bool settledAtCompletion = false;
    std::exception_ptr error;
    int value = -1;
    asyncWait(f, asio::bind_cancellation_slot(signal.slot(), asio::bind_executor(io, [&](std::exception_ptr e, int v) {
                                                ++calls;
                                                settledAtCompletion = f.isDone();
                                                error = e;
                                                value = v;
                                              })));
    // Sweep the window: emit sooner or later after the submission.
    std::atomic<int> spin{0};
    while (spin.fetch_add(1, std::memory_order_relaxed) < i % 64 * 8) {
    }
    signal.emit(asio::cancellation_type::terminal);
    io.run();
    REQUIRE(calls == 1);
    REQUIRE(settledAtCompletion);
    if (error) {
      REQUIRE(isOperationAborted(error));
      ++aborted;
    } else {
      REQUIRE(value == i);
      ++valued;
    }
  }
  INFO("aborted " << aborted << ", completed with the value " << valued);
  REQUIRE(aborted > 0);
  REQUIRE(valued > 0);
}
