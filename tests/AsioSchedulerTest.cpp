// SPDX-License-Identifier: BSL-1.0
// coexec Tasks on an Asio executor (AsioScheduler.h): spawn()
// and its Future, resumeOn() hops between an io_context and a pool, and
// sleeps on the io_context's timers.
#if COEXEC_TEST_BOOST_ASIO
#include "coexec/boost_asio.h"
#else
#include "coexec/asio/AsioScheduler.h"
#endif

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "Assertions.h"

#include "AsioFlavour.h"
#include "CoroutineTestSupport.h"
#include "TestSupport.h"
#include "coexec/Sleep.h"
#include "coexec/SyncWait.h"
#include "coexec/ThisThread.h"
#include "engine/TimerService.h"

using namespace coexec;
using namespace coexec::test;
using namespace std::chrono_literals;

namespace {

/// An io_context run by a thread of its own until the guard ends.
class IoThread {
 public:
  IoThread() : work_(asio::make_work_guard(io)), thread_([this] { io.run(); }) {}
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;
  ~IoThread() {
    work_.reset();
    thread_.join();
  }
  [[nodiscard]] std::thread::id id() const { return thread_.get_id(); }

  asio::io_context io;

 private:
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("spawn(io executor, task) runs the task on the io_context thread and settles its Future", "[asio][spawn]") {
  asio::io_context io;
  std::thread::id ranOn;
  auto task = [&]() -> Task<int> {
    ranOn = coexec::thisThreadId();
    co_return 42;
  };
  Future<int> f = spawn(io.get_executor(), task());
  REQUIRE_FALSE(f.isDone());  // posted, not run inside spawn()
  io.run();
  REQUIRE(f.isDone());
  REQUIRE(f.get() == 42);
  REQUIRE(ranOn == std::this_thread::get_id());
}

TEST_CASE("spawn's Future rethrows the task's exception", "[asio][spawn]") {
  asio::io_context io;
  auto task = []() -> Task<void> {
    throw std::runtime_error("spawned failure");
    co_return;
  };
  Future<void> f = spawn(io.get_executor(), task());
  io.run();
  REQUIRE_THROWS_MATCHES(f.get(), std::runtime_error, Catch::Message("spawned failure"));
}

TEST_CASE("spawn refuses an empty Task with std::invalid_argument", "[asio][spawn]") {
  asio::io_context io;
  REQUIRE_THROWS_AS(spawn(io.get_executor(), Task<int>()), std::invalid_argument);
}

TEST_CASE("cancelling spawn's Future before the task starts: the task never runs", "[asio][spawn][cancellation]") {
  asio::io_context io;
  bool ran = false;
  auto task = [&]() -> Task<void> {
    ran = true;
    co_return;
  };
  Future<void> f = spawn(io.get_executor(), task());
  REQUIRE(f.cancel());
  io.run();
  REQUIRE_FALSE(ran);
  REQUIRE(f.isCancelled());
  REQUIRE_THROWS_AS(f.get(), OperationCancelled);
}

TEST_CASE("a sleep in a task on the io_context waits on its timers, cancel() wakes it at once",
          "[asio][spawn][sleep][cancellation]") {
  asio::io_context io;
  bool cancelledOut = false;
  std::thread::id wokeOn;
  auto task = [&]() -> Task<void> {
    try {
      co_await sleepFor(1h);
    } catch (const OperationCancelled&) {
      cancelledOut = true;
      wokeOn = coexec::thisThreadId();
      throw;
    }
  };
  Future<void> f = spawn(io.get_executor(), task());
  std::size_t coexecTimers = 99;
  // Runs after the task has started and gone to sleep (both on this one thread).
  asio::post(io, [&] {
    coexecTimers = coexec::detail::steadyTimerService().pendingCount();
    REQUIRE(f.cancel());
  });
  const auto start = std::chrono::steady_clock::now();
  io.run();  // returns once the woken task has finished
  REQUIRE(std::chrono::steady_clock::now() - start < kLong);
  REQUIRE(coexecTimers == 0);  // the sleep was not on coexec's timer thread
  REQUIRE(cancelledOut);
  REQUIRE(wokeOn == std::this_thread::get_id());
  REQUIRE_THROWS_AS(f.get(), OperationCancelled);
}

TEST_CASE("sleepFor in a task on the io_context resumes on its thread after the delay", "[asio][spawn][sleep]") {
  asio::io_context io;
  std::thread::id wokeOn;
  std::chrono::steady_clock::duration slept{};
  auto task = [&]() -> Task<void> {
    const auto before = std::chrono::steady_clock::now();
    co_await sleepFor(20ms);
    slept = std::chrono::steady_clock::now() - before;
    wokeOn = coexec::thisThreadId();
  };
  Future<void> f = spawn(io.get_executor(), task());
  io.run();  // the sleep holds work: run() returns after it
  f.get();
  REQUIRE(slept >= 20ms);
  REQUIRE(wokeOn == std::this_thread::get_id());
}

TEST_CASE("a cancel racing a short sleep on the io_context resumes the task once", "[asio][spawn][sleep][race]") {
  int woke = 0;
  int cancelled = 0;
  for (int i = 0; i < 200 && (woke == 0 || cancelled == 0); ++i) {
    IoThread ioThread;
    auto task = [&]() -> Task<void> { co_await sleepFor(std::chrono::microseconds(i % 20 * 10)); };
    Future<void> f = spawn(ioThread.io.get_executor(), task());
    f.cancel();
    REQUIRE(f.waitFor(kLong));
    try {
      f.get();
      ++woke;
    } catch (const OperationCancelled&) {
      ++cancelled;
    }
  }
  REQUIRE(cancelled > 0);
  // A sleep that ends before the cancel is not always seen in 200 rounds;
  // each round resumed exactly once either way (or the Future would hang).
}

TEST_CASE("a task hops io_context -> pool -> io_context with resumeOn, and awaits pool work from io",
          "[asio][spawn][resumeOn]") {
  ThreadPoolExecutor pool(taggedPool("pool", 2, 2, WorkQueue::bounded(8)));
  asio::io_context io;
  std::thread::id start, afterFuture, afterHopBack;
  std::string_view onPool = "unset", startTag = "unset";
  auto task = [&]() -> Task<int> {
    start = coexec::thisThreadId();
    startTag = currentTag;
    auto f = pool.submit([] { return 20; });
    const int a = co_await f;  // resumes here, on the io_context
    afterFuture = coexec::thisThreadId();
    co_await resumeOn(pool);
    onPool = currentTag;
    co_await resumeOn(io.get_executor());
    afterHopBack = coexec::thisThreadId();
    co_return a + 1;
  };
  Future<int> f = spawn(io.get_executor(), task());
  io.run();  // work is held while the task is away on the pool
  REQUIRE(f.get() == 21);
  const auto self = std::this_thread::get_id();
  REQUIRE(start == self);
  REQUIRE(startTag.empty());
  REQUIRE(afterFuture == self);
  REQUIRE(onPool == "pool");
  REQUIRE(afterHopBack == self);
}

TEST_CASE("a pool task hops to the io_context with resumeOn and back", "[asio][resumeOn]") {
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  IoThread ioThread;
  std::thread::id onIo;
  std::string_view before = "unset", after = "unset";
  auto task = [&]() -> Task<void> {
    before = currentTag;
    co_await resumeOn(ioThread.io.get_executor());
    onIo = coexec::thisThreadId();
    co_await resumeOn(asioExecutor(pool));  // the pool's own hop
    after = currentTag;
  };
  Future<void> f = pool.submit(task());
  REQUIRE(f.waitFor(kLong));
  f.get();
  REQUIRE(before == "pool");
  REQUIRE(onIo == ioThread.id());
  REQUIRE(after == "pool");
}

TEST_CASE("cancelling a spawned task cancels the pool work it awaits", "[asio][spawn][cancellation]") {
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  asio::io_context io;
  Counter started;
  bool sawCancellation = false;
  auto task = [&]() -> Task<int> {
    auto f = pool.submit([&](CancellationToken token) {
      started.arrive();
      sawCancellation = eventually([&] { return token.isCancellationRequested(); });
      return 1;
    });
    co_return co_await f;
  };
  Future<int> f = spawn(io.get_executor(), task());
  std::thread canceller([&] {
    REQUIRE(started.waitFor(1));
    f.cancel();
  });
  io.run();
  canceller.join();
  REQUIRE(sawCancellation);
  REQUIRE_THROWS_AS(f.get(), OperationCancelled);
}

TEST_CASE("spawn onto asioExecutor(pool) is the pool's submit", "[asio][spawn]") {
  ThreadPoolExecutor pool(taggedPool("pool", 1, 1, WorkQueue::bounded(8)));
  auto task = []() -> Task<std::string> { co_return std::string(currentTag); };
  Future<std::string> f = spawn(asioExecutor(pool), task());
  REQUIRE(f.get(kLong) == "pool");
  REQUIRE(pool.stats().taskCount == 1);
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("spawn refuses an empty or started Task with a message naming spawn, and nothing is posted",
          "[asio][spawn][bad-input]") {
  asio::io_context io;
  REQUIRE_THROWS_WITH(spawn(io.get_executor(), Task<int>()),
                      "coexec::spawn: the Task is empty (default-constructed or moved from), so there is no coroutine "
                      "to start.");
  Task<int> started = []() -> Task<int> { co_return 1; }();
  REQUIRE(syncWait([&]() -> Task<int> { co_return co_await started; }()) == 1);
  REQUIRE_THROWS_AS(spawn(io.get_executor(), std::move(started)), std::logic_error);
  Task<int> again = []() -> Task<int> { co_return 1; }();
  (void)syncWait([&]() -> Task<int> { co_return co_await again; }());
  REQUIRE_THROWS_WITH(spawn(io.get_executor(), std::move(again)),
                      Catch::Matchers::StartsWith("coexec::spawn: the Task was already started"));
  REQUIRE(io.run() == 0);  // nothing was posted, no work held
}

TEST_CASE("spawn onto asioExecutor(pool) after shutdown throws RejectedExecution, as submit does",
          "[asio][spawn][shutdown][bad-input]") {
  ThreadPoolExecutor pool(taggedPool("down", 1, 1, WorkQueue::bounded(8)));
  pool.shutdown();
  std::atomic<bool> ran{false};
  auto task = [&ran]() -> Task<int> {
    ran = true;
    co_return 1;
  };
  REQUIRE_THROWS_AS(spawn(asioExecutor(pool), task()), RejectedExecution);
  REQUIRE_THROWS_WITH(spawn(asioExecutor(pool), task()), Catch::Matchers::Contains("the pool is shut down"));
  REQUIRE_FALSE(ran.load());
  REQUIRE(pool.stats().rejectedCount == 2);
}
