// SPDX-License-Identifier: BSL-1.0
#if COEXEC_TEST_BOOST_ASIO
#include "coexec/boost_asio.h"
#else
#include "coexec/asio.h"
#endif

// asyncWait of a Future temporary of a trivially destructible lambda, with
// every completion token and every capture kind that GCC 12 compiles
// correctly inside a co_await expression (see AwaitableFormsTest for the
// rest of the matrix and tests/compile-fail/AsyncWaitTemporary.cpp for the
// refused forms), and coexec::spawn of a Task temporary awaited at once. Run
// on every compiler and in every build.

#include <cstddef>
#include <exception>
#include <future>
#include <string_view>
#include <thread>
#include <utility>

#include "Assertions.h"

#include "AsioFlavour.h"
#include "AwaitableFormsTestSupport.h"
#include "CoroutineTestSupport.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using coexec::test::bridge::asyncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::test::taggedPool;

namespace {

// co_await asyncWait(pool.submit(f), use_awaitable) and the deferred form,
// in an asio::awaitable.
#define COEXEC_USE_AWAITABLE_FORM(form, kind, f)                       \
  asio::awaitable<int> form##_##kind(ThreadPoolExecutor& pool) {       \
    COEXEC_FORM_LOCALS;                                                \
    co_return co_await asyncWait(pool.submit(f), asio::use_awaitable); \
  }
#define COEXEC_DEFERRED_FORM(form, kind, f)                                                          \
  asio::awaitable<int> form##_##kind(ThreadPoolExecutor& pool) {                                     \
    COEXEC_FORM_LOCALS;                                                                              \
    co_return co_await asyncWait(pool.submit(f), asio::experimental::deferred)(asio::use_awaitable); \
  }
COEXEC_CAPTURE_KINDS(COEXEC_USE_AWAITABLE_FORM, useAwaitable)
COEXEC_CAPTURE_KINDS(COEXEC_DEFERRED_FORM, deferred)

// asyncWait(pool.submit(f), use_future) and with a callback: not awaited, so
// GCC 12's bug cannot reach them, but the same rule applies (asyncWait cannot
// tell), so they are accepted for the same callables. The function returns
// before the task runs: what the callables refer to is the caller's.
struct Captured {
  int local = 20;
};
#define COEXEC_CALLER_LOCALS COEXEC_FORM_CAPTURES(int& local = captured.local)
#define COEXEC_FUTURE_FORM(form, kind, f)                                        \
  std::future<int> form##_##kind(ThreadPoolExecutor& pool, Captured& captured) { \
    COEXEC_CALLER_LOCALS;                                                        \
    return asyncWait(pool.submit(f), asio::use_future);                          \
  }
COEXEC_CAPTURE_KINDS(COEXEC_FUTURE_FORM, useFuture)
#define COEXEC_CALLBACK_FORM(form, kind, f)                                                          \
  void form##_##kind(ThreadPoolExecutor& pool, Captured& captured, asio::io_context& io, int& out) { \
    COEXEC_CALLER_LOCALS;                                                                            \
    asyncWait(pool.submit(f), asio::bind_executor(io, [&out](std::exception_ptr error, int value) {  \
                if (!error) out = value;                                                             \
              }));                                                                                   \
  }
COEXEC_CAPTURE_KINDS(COEXEC_CALLBACK_FORM, callback)

// Runs one awaitable form of one capture kind on `io`; the result lands in
// `results[slot]`.
#define COEXEC_SPAWN_AWAITABLE(form, kind, f)                                                          \
  asio::co_spawn(io, form##_##kind(pool), [&results, slot = slot++](std::exception_ptr e, int value) { \
    CHECK(!e);                                                                                         \
    results[slot] = value;                                                                             \
  });

Task<int> answer() { co_return 42; }

Task<int> awaitSpawnOfTaskTemporary(asio::io_context& io) {
  co_return co_await coexec::test::bridge::spawn(io.get_executor(), answer());
}

}  // namespace

TEST_CASE(
    "co_await asyncWait(pool.submit(f), token) of a trivially destructible lambda temporary runs it, with "
    "use_awaitable and deferred and every capture kind",
    "[gcc-bug][forms][asio]") {
  ThreadPoolExecutor pool(taggedPool("forms", 2, 2, WorkQueue::bounded(64)));
  asio::io_context io;
  int results[10] = {};
  int slot = 0;
  COEXEC_CAPTURE_KINDS(COEXEC_SPAWN_AWAITABLE, useAwaitable)
  COEXEC_CAPTURE_KINDS(COEXEC_SPAWN_AWAITABLE, deferred)
  io.run();
  REQUIRE(slot == 10);
  for (int result : results)
    CHECK(result == 42);
  CHECK(coexec::test::finalStats(pool).completedTaskCount == 10);
}

TEST_CASE(
    "asyncWait(pool.submit(f), token) of a trivially destructible lambda temporary runs it, with use_future "
    "and a callback and every capture kind",
    "[gcc-bug][forms][asio]") {
  ThreadPoolExecutor pool(taggedPool("forms", 2, 2, WorkQueue::bounded(64)));
  asio::io_context io;
  Captured captured;
  std::future<int> futures[] = {useFuture_captureless(pool, captured), useFuture_reference(pool, captured),
                                useFuture_pointer(pool, captured), useFuture_integer(pool, captured),
                                useFuture_stringView(pool, captured)};
  int results[5] = {};
  callback_captureless(pool, captured, io, results[0]);
  callback_reference(pool, captured, io, results[1]);
  callback_pointer(pool, captured, io, results[2]);
  callback_integer(pool, captured, io, results[3]);
  callback_stringView(pool, captured, io, results[4]);
  io.run();
  for (std::future<int>& future : futures)
    CHECK(future.get() == 42);
  for (int result : results)
    CHECK(result == 42);
  CHECK(coexec::test::finalStats(pool).completedTaskCount == 10);
}

TEST_CASE("co_await coexec::spawn(executor, task()) of a Task temporary runs it on the io_context", "[forms][asio]") {
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread ioThread([&] { io.run(); });
  CHECK(coexec::syncWait(awaitSpawnOfTaskTemporary(io)) == 42);
  work.reset();
  ioThread.join();
}
