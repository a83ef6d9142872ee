// The benchmark workloads on standalone Asio's asio::thread_pool (+ co_spawn
// where coroutines apply). Same workloads and parameters as CoexecPool.cpp.

#include <array>
#include <chrono>
#include <future>
#include <tuple>

#include <asio.hpp>
#include <asio/experimental/awaitable_operators.hpp>

#include "Harness.h"

namespace {

using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

// W1: one producer, N trivial tasks.
void submitThroughput(bench::Run& run, std::size_t workers) {
  bench::Countdown done;
  asio::thread_pool pool(workers);
  const std::size_t n = run.count(1'000'000);
  done.reset(n);
  run.throughput("throughput", "Mtasks/s", n, [&] {
    for (std::size_t i = 0; i < n; ++i)
      asio::post(pool, [&done] { done.hit(); });
    done.wait();
  });
}

// W2: 64 posts with a future each (use_future), then all waited for.
void fanOutFanIn(bench::Run& run) {
  asio::thread_pool pool(2);
  const bench::Work work(1us);
  run.rounds(run.count(1'000), [&] {
    std::array<std::future<void>, 64> futures;
    for (auto& f : futures)
      f = asio::post(pool, asio::use_future([&work] { work(); }));
    for (auto& f : futures)
      f.get();
  });
}

// W3: a coroutine hopping through the pool: co_await post(pool, use_awaitable).
asio::awaitable<void> hops(asio::thread_pool& pool, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    co_await asio::post(pool, asio::use_awaitable);
}

void coroutineHops(bench::Run& run) {
  asio::thread_pool pool(2);
  const std::size_t n = run.count(200'000);
  run.perOp("hop", n, [&] { asio::co_spawn(pool, hops(pool, n), asio::use_future).get(); });
}

// W3: a chain of tasks, each posting the next.
struct Chain {
  asio::thread_pool& pool;
  std::size_t left;
  bench::Countdown& done;
  void step() {
    if (--left == 0) {
      done.hit();
    } else {
      asio::post(pool, [this] { step(); });
    }
  }
};

void taskChain(bench::Run& run) {
  bench::Countdown done;
  asio::thread_pool pool(2);
  const std::size_t n = run.count(200'000);
  Chain chain{pool, n, done};
  done.reset(1);
  run.perOp("hop", n, [&] {
    asio::post(pool, [&chain] { chain.step(); });
    done.wait();
  });
}

// W4: fork/join fib: every call with n >= 2 co_spawns both children and
// awaits them with awaitable_operators &&. Each call runs on its own strand:
// on a plain thread_pool executor && crashes (use-after-free in
// parallel_group_launch when the group completes on another thread before
// the launch returns: asio 1.22, chriskohlhoff/asio#1348 and #1630); a strand
// per coroutine is asio's remedy and keeps the children parallel.
using PoolExecutor = asio::thread_pool::executor_type;

asio::awaitable<long> fib(PoolExecutor pool, int n) {
  if (n < 2) co_return n;
  auto [a, b] = co_await (asio::co_spawn(asio::make_strand(pool), fib(pool, n - 1), asio::use_awaitable) &&
                          asio::co_spawn(asio::make_strand(pool), fib(pool, n - 2), asio::use_awaitable));
  co_return a + b;
}

void forkJoin(bench::Run& run) {
  asio::thread_pool pool(2);
  const int depth = run.depth(25);
  long result = 0;
  run.duration("fib time", [&] {
    result = asio::co_spawn(asio::make_strand(pool), fib(pool.get_executor(), depth), asio::use_future).get();
  });
  if (result <= 0) throw std::runtime_error("fib returned a wrong value");
}

// W5: overload: 2 threads, at most 1024 tasks in flight, else the producer runs the task.
void overload(bench::Run& run) {
  bench::Countdown done;
  bench::Gate gate(1024);
  asio::thread_pool pool(2);
  const bench::Work work(200ns);
  const std::size_t n = run.count(1'000'000);
  std::size_t callerRan = 0;
  done.reset(n);
  auto task = [&] {
    work();
    if (bench::isProducer()) ++callerRan;
    done.hit();
  };
  run.throughput("throughput", "Mtasks/s", n, [&] {
    for (std::size_t i = 0; i < n; ++i) {
      if (gate.tryEnter()) {
        asio::post(pool, [&] {
          task();
          gate.leave();
        });
      } else {
        task();
      }
    }
    done.wait();
  });
  run.record("caller share", "%", bench::Better::none, 100.0 * static_cast<double>(callerRan) / static_cast<double>(n));
}

// Idle: CPU used by a pool of 2 with nothing to do, after a burst of work.
void idle(bench::Run& run) {
  bench::Countdown done;
  asio::thread_pool pool(2);
  done.reset(10'000);
  for (int i = 0; i < 10'000; ++i)
    asio::post(pool, [&done] { done.hit(); });
  done.wait();
  run.idleCpu();
}

const bench::Workload kWorkloads[] = {
    {"W1.1", "submit throughput, 1 worker: post of 1,000,000 atomic increments",
     [](bench::Run& r) { submitThroughput(r, 1); }},
    {"W1.2", "submit throughput, 2 workers", [](bench::Run& r) { submitThroughput(r, 2); }},
    {"W2", "fan-out/fan-in: 1,000 rounds of 64 post(use_future)s of ~1 us, all waited for", fanOutFanIn},
    {"W3.coro", "200,000 hops of co_await post(pool, use_awaitable) inside co_spawn", coroutineHops},
    {"W3.chain", "a chain of 200,000 tasks, each post()s the next", taskChain},
    {"W4", "fib(25), each call co_spawns both children, awaited with awaitable_operators &&", forkJoin},
    {"W5", "overload: 2 threads, in-flight gate of 1024 (else the producer runs it), 1,000,000 tasks of ~200 ns",
     overload},
    {"idle", "process CPU of an idle pool of 2 over 2 s, after its spin window", idle},
};

}  // namespace

int main(int argc, char** argv) { return bench::main("asio", kWorkloads, argc, argv); }
