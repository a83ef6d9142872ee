// SPDX-License-Identifier: BSL-1.0
// An io_context that offloads CPU work to a bounded coexec pool and gets the
// results back on its own thread: asyncWait() from an Asio coroutine, a
// timeout with awaitable_operators' ||, and a coexec Task that hops
// io_context -> pool -> io_context. Checks its own results.

#include <coexec/asio.h>
#include <coexec/coexec.h>

#include <asio/experimental/awaitable_operators.hpp>
#include <fmt/format.h>

#include <chrono>
#include <string>
#include <thread>
#include <variant>

using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

bool check(bool ok, const char* what) {
  fmt::print("{} {}\n", ok ? "ok  " : "FAIL", what);
  return ok;
}

struct Results {
  long value = 0;
  bool valueOnIoThread = false;
  bool timedOut = false;
  bool slowTaskCancelled = false;
  bool hopOnPool = false;
  bool hopBackOnIoThread = false;
  std::string label;
};

// An Asio coroutine on the io_context: offload, then offload with a timeout.
asio::awaitable<void> handler(coexec::ThreadPoolExecutor& pool, std::thread::id ioThread, Results& out) {
  // 1. Offload and wait, in one expression: accepted on every compiler for a
  //    lambda that captures nothing, or only references, pointers and
  //    integers (docs/asio.md).
  const int n = 25;
  out.value = co_await coexec::asyncWait(pool.submit([&] { return fib(n); }), asio::use_awaitable);
  // coexec::thisThreadId(), not std::this_thread::get_id(): an optimizing
  // compiler may reuse a get_id() read across co_await (docs/coroutines.md).
  out.valueOnIoThread = coexec::thisThreadId() == ioThread;

  // A lambda whose capture owns memory: its Future is named first (on GCC 12
  // the one-expression form does not compile, and says why).
  auto label = pool.submit([name = std::string("fib(25)")] { return name + " = " + std::to_string(fib(25)); });
  out.label = co_await coexec::asyncWait(label, asio::use_awaitable);

  // 2. A timeout: the timer wins, the pool task is cancelled (it watches its
  //    token), and the || completes once the task has settled.
  auto slow = pool.submit([](coexec::CancellationToken token) {
    while (!token.isCancellationRequested())
      std::this_thread::sleep_for(1ms);
    return 0L;
  });
  asio::steady_timer timer(co_await asio::this_coro::executor, 20ms);
  auto result = co_await (coexec::asyncWait(slow, asio::use_awaitable) || timer.async_wait(asio::use_awaitable));
  out.timedOut = result.index() == 1;
  out.slowTaskCancelled = slow.isCancelled();
}

// A coexec Task on the io_context, hopping to the pool for the CPU part.
coexec::Task<long> hop(coexec::ThreadPoolExecutor& pool, asio::io_context& io, std::thread::id ioThread, Results& out) {
  co_await coexec::resumeOn(pool);
  out.hopOnPool = coexec::thisThreadId() != ioThread;
  const long v = fib(20);
  co_await coexec::resumeOn(io.get_executor());
  out.hopBackOnIoThread = coexec::thisThreadId() == ioThread;
  co_return v;
}

}  // namespace

int main() {
  coexec::ThreadPoolExecutor pool(
      {.name = "cpu", .corePoolSize = 2, .maximumPoolSize = 2, .workQueue = coexec::WorkQueue::bounded(64)});
  asio::io_context io;
  const std::thread::id ioThread = std::this_thread::get_id();  // io.run() below runs here
  Results out;
  asio::co_spawn(io, handler(pool, ioThread, out), asio::detached);
  coexec::Future<long> hopped = coexec::spawn(io.get_executor(), hop(pool, io, ioThread, out));
  io.run();  // returns when both are done: their waits hold work on io

  pool.shutdown();
  const bool terminated = pool.awaitTermination(std::chrono::seconds(10));

  bool ok = true;
  ok &= check(out.value == 75025, "asyncWait returned fib(25) = 75025");
  ok &= check(out.valueOnIoThread, "the coroutine resumed on the io_context thread");
  ok &= check(out.label == "fib(25) = 75025", "asyncWait of a named Future returned its label");
  ok &= check(out.timedOut, "the 20 ms timer won the ||");
  ok &= check(out.slowTaskCancelled, "the pool task lost to the timer was cancelled");
  ok &= check(out.hopOnPool, "the Task ran its CPU part on the pool");
  ok &= check(out.hopBackOnIoThread, "the Task came back to the io_context thread");
  ok &= check(hopped.get() == 6765, "the spawned Task returned fib(20) = 6765");
  ok &= check(terminated, "the pool shut down and terminated");
  return ok ? 0 : 1;
}
