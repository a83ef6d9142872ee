// SPDX-License-Identifier: BSL-1.0
// asyncWait: every completion token, where the handler runs, outstanding
// work, cancellation (||, parallel_group, a raw slot, raced against the
// settlement), rejected tasks, and the graceful-shutdown order.
#if COEXEC_TEST_BOOST_ASIO
#include "coexec/boost_asio.h"
#else
#include "coexec/asio/AsyncWait.h"
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
        resumedOn1 = coexec::thisThreadId();
        auto failing = pool.submit([]() -> int { throw std::runtime_error("boom"); });
        try {
          (void)co_await asyncWait(failing, asio::use_awaitable);
        } catch (const std::runtime_error& e) {
          error = e.what();
        }
        resumedOn2 = coexec::thisThreadId();
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

TEST_CASE("asyncWait taking the Future over leaves it empty, an empty Future throws std::logic_error",
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
  Counter started;
  Future<int> f;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        f = pool.submit([&](CancellationToken token) {
          started.arrive();
          sawCancellation = eventually([&] { return token.isCancellationRequested(); });
          return 1;
        });
        // Running before the timer starts (else, on a loaded machine, the
        // timer could cancel it while queued, and it would never run).
        REQUIRE(started.waitFor(1));
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
          asio::bind_executor(io, [&](std::array<std::size_t, 2> order, std::exception_ptr e, int, AsioErrorCode) {
            first = order[0];
            waitError = e;
          }));
  io.run();
  REQUIRE(first == 1);
  REQUIRE(isOperationAborted(waitError));
  REQUIRE(f.isCancelled());
}

TEST_CASE("a cancellation signal cancels a queued task at once, one after settlement changes nothing",
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

TEST_CASE("graceful shutdown: io.run() returns once the accepted requests' pool work is done, then the pool terminates",
          "[asio][asyncWait][shutdown]") {
  ThreadPoolExecutor pool(taggedPool("pool", 2, 2, WorkQueue::bounded(64)));
  asio::io_context io;
  Gate gate;  // holds the pool work until every request is in flight
  int answered = 0;
  constexpr int kRequests = 8;
  for (int i = 0; i < kRequests; ++i) {
    asio::co_spawn(
        io,
        [&, i]() -> asio::awaitable<void> {
          auto f = pool.submit([&gate, i] {
            gate.wait();
            return i;
          });
          if (co_await asyncWait(f, asio::use_awaitable) == i) ++answered;
        },
        asio::detached);
  }
  // No request is accepted after this point; the ones in flight finish.
  asio::post(io, [&] { gate.open(); });
  io.run();  // returns only when every request, with its pool work, is done
  REQUIRE(answered == kRequests);
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  REQUIRE(pool.stats().completedTaskCount == kRequests);
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("asyncWait of an empty Future throws std::logic_error from asyncWait itself, with any token",
          "[asio][asyncWait][bad-input]") {
  asio::io_context io;
  Future<int> empty;
  REQUIRE_THROWS_WITH(asyncWait(empty, asio::bind_executor(io, [](std::exception_ptr, int) {})),
                      "coexec::asyncWait: the Future is empty (default-constructed or moved from)");
  REQUIRE_THROWS_AS((void)asyncWait(empty, asio::experimental::deferred), std::logic_error);
  REQUIRE_THROWS_AS(asyncWait(Future<int>(), asio::detached), std::logic_error);
  REQUIRE(io.run() == 0);  // nothing was started
}

TEST_CASE("asyncWait of a Future whose result was consumed completes with the std::logic_error",
          "[asio][asyncWait][bad-input]") {
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  asio::io_context io;
  auto f = pool.submit([] { return 5; });
  REQUIRE(f.get() == 5);
  std::exception_ptr error;
  int value = -1;
  asyncWait(f, asio::bind_executor(io, [&](std::exception_ptr e, int v) {
              error = e;
              value = v;
            }));
  REQUIRE(io.run() == 1);
  REQUIRE(holds<std::logic_error>(error));
  REQUIRE_THROWS_WITH(std::rethrow_exception(error), Catch::Matchers::Contains("the result was already consumed"));
  REQUIRE(value == 0);  // default-constructed, as for any failure
}
