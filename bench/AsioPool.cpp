// SPDX-License-Identifier: BSL-1.0
// The benchmark workloads on standalone Asio's asio::thread_pool (+ co_spawn
// where coroutines apply). Same workloads and parameters as CoexecPool.cpp.

#include <array>
#include <chrono>
#include <future>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <asio.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/experimental/parallel_group.hpp>

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
  asio::thread_pool pool(bench::workers(2));
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
  asio::thread_pool pool(bench::workers(2));
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

// W6: timers: asio::steady_timer on an io_context that `threads` threads
// run (a work guard keeps them in run() while no timer is pending), the
// peer of a pool of 2. Its reactor (epoll and a timerfd) runs inside run()
// on one of them: asio needs no timer thread.
struct IoThreads {
  explicit IoThreads(std::size_t count) {
    for (std::size_t i = 0; i < count; ++i)
      threads.emplace_back([this] { io.run(); });
  }
  ~IoThreads() {
    guard.reset();
    io.stop();  // a timer left pending by a failed run must not keep the join waiting
    for (auto& t : threads)
      t.join();
  }
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
  std::vector<std::thread> threads;
};

/// A timer's handler: marks timer `i` and counts down; an error code other
/// than `expected` counts in `wrong`.
struct TimerHandler {
  bench::Tally& ran;
  bench::Countdown& done;
  std::atomic<std::size_t>& wrong;
  asio::error_code expected;
  std::size_t i;
  void operator()(const asio::error_code& ec) const noexcept {
    // relaxed: the count is read after done.wait(), which orders it.
    if (ec != expected) wrong.fetch_add(1, std::memory_order_relaxed);
    ran.hit(i);
    done.hit();
  }
};

// W6.cancel: 1,000,000 timers of one hour, cancelled, in two shapes: each
// cancelled right after its async_wait(), then all started before the first
// is cancelled. asio runs every handler exactly once: a cancelled wait's
// handler runs on the io_context with operation_aborted, and the timing
// ends when the last has run.
void timerCancel(bench::Run& run) {
  const std::size_t n = run.count(1'000'000);
  bench::Tally ran(n);
  bench::Countdown done;
  std::atomic<std::size_t> wrong{0};
  IoThreads io(2);
  const asio::error_code aborted = asio::error::operation_aborted;
  const auto check = [&](std::string_view shape, std::size_t cancelled, const bench::Tally& tally) {
    bench::expectCount(fmt::format("{}: waits cancelled", shape), cancelled, n);
    bench::expectCount(fmt::format("{}: handlers without operation_aborted", shape), wrong.load(), 0);
    tally.expectEach(1, fmt::format("{}: handlers of cancelled waits", shape));
  };

  std::size_t cancelled = 0;
  done.reset(n);
  bench::RssWatch each;
  run.throughput("each: schedule+cancel", "Mtimers/s", n, [&] {
    for (std::size_t i = 0; i < n; ++i) {
      asio::steady_timer timer(io.io, 1h);
      timer.async_wait(TimerHandler{ran, done, wrong, aborted, i});
      cancelled += timer.cancel();
    }
    done.wait();
  });
  run.record("each: peak RSS growth", "MB", bench::Better::lower, each.peakGrowthMb());
  run.record("each: RSS growth after", "MB", bench::Better::lower, each.growthMb());
  check("each", cancelled, ran);

  bench::Tally ranBulk(n);
  cancelled = 0;
  done.reset(n);
  bench::RssWatch bulk;
  std::vector<asio::steady_timer> timers;
  timers.reserve(n);
  run.throughput("bulk: schedule+cancel", "Mtimers/s", n, [&] {
    for (std::size_t i = 0; i < n; ++i) {
      timers.emplace_back(io.io, 1h);
      timers.back().async_wait(TimerHandler{ranBulk, done, wrong, aborted, i});
    }
    for (auto& timer : timers)
      cancelled += timer.cancel();
    done.wait();
  });
  std::vector<asio::steady_timer>().swap(timers);  // the caller's timers go; what the io_context keeps stays
  run.record("bulk: peak RSS growth", "MB", bench::Better::lower, bulk.peakGrowthMb());
  run.record("bulk: RSS growth after", "MB", bench::Better::lower, bulk.growthMb());
  check("bulk", cancelled, ranBulk);
}

// W6.fire: 1,000,000 timers due 0..10 ms after their construction (in a
// fixed pseudo-random order), each with an async_wait whose handler counts.
// The timers are kept in a vector reserved beforehand (destroying a timer
// cancels its wait). Timed from the first timer to the last handler.
void timerFire(bench::Run& run) {
  const std::size_t n = run.count(1'000'000);
  bench::Tally ran(n);
  bench::Countdown done;
  std::atomic<std::size_t> wrong{0};
  IoThreads io(2);
  std::vector<asio::steady_timer> timers;
  done.reset(n);
  bench::RssWatch rss;
  timers.reserve(n);
  run.throughput("fire", "Mtimers/s", n, [&] {
    for (std::size_t i = 0; i < n; ++i) {
      timers.emplace_back(io.io, bench::spreadDelay(i));
      timers.back().async_wait(TimerHandler{ran, done, wrong, asio::error_code(), i});
    }
    done.wait();
  });
  run.record("peak RSS growth", "MB", bench::Better::lower, rss.peakGrowthMb());
  bench::expectCount("handlers with an error", wrong.load(), 0);
  ran.expectEach(1, "handlers of fired timers");
}

// W7: the hand-written invokeAll: 64 co_spawns of a trivial coroutine,
// joined with make_parallel_group (wait_for_one_error: the first exception
// cancels the rest, as invokeAll does), their results in a vector. asio 1.22
// has the variadic group only, so the 64 operations are a pack. The parent
// and each child run on a strand, asio's remedy for the parallel_group crash
// W4 describes.
asio::awaitable<int> trivial(int i) { co_return i; }

template <std::size_t... I>
asio::awaitable<std::vector<int>> invokeAllRound(PoolExecutor pool, std::index_sequence<I...>) {
  auto done =
      co_await asio::experimental::make_parallel_group(
          asio::co_spawn(asio::make_strand(pool), trivial(static_cast<int>(I)), asio::experimental::deferred)...)
          .async_wait(asio::experimental::wait_for_one_error(), asio::use_awaitable);
  // done: (completion order, then an exception_ptr and a value per task)
  const std::exception_ptr errors[] = {std::get<1 + 2 * I>(done)...};
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  co_return std::vector<int>{std::get<2 + 2 * I>(done)...};
}

void invokeAll64(bench::Run& run) {
  asio::thread_pool pool(2);
  const std::size_t rounds = run.count(10'000);
  long sum = 0;
  run.rounds(rounds, [&] {
    sum += asio::co_spawn(asio::make_strand(pool), invokeAllRound(pool.get_executor(), std::make_index_sequence<64>{}),
                          asio::use_future)
               .get()
               .back();
  });
  bench::expectCount("sum of the last results", static_cast<std::size_t>(sum), 63 * rounds);
}

// W8: a coroutine on an io_context (run by this thread) sends trivial work
// to a pool of 2 and comes back, one round trip at a time:
// co_await co_spawn(pool, trivial, use_awaitable). Mean and p99 per round trip.
void ioRoundTrip(bench::Run& run) {
  asio::thread_pool pool(2);
  asio::io_context io;
  const std::size_t n = run.count(100'000);
  std::vector<double> latencies(n);
  long sum = 0;
  run.perOp("round trip", static_cast<double>(n), [&] {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          for (std::size_t i = 0; i < n; ++i) {
            const auto start = bench::Clock::now();
            sum += co_await asio::co_spawn(pool, trivial(static_cast<int>(i % 2)), asio::use_awaitable);
            latencies[i] = std::chrono::duration<double, std::nano>(bench::Clock::now() - start).count();
          }
        },
        asio::detached);
    io.run();
  });
  run.record("round trip p99", "ns", bench::Better::lower, bench::percentile(latencies, 0.99));
  bench::expectCount("sum of the results", static_cast<std::size_t>(sum), n / 2);
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
    {"W1.2", "submit throughput, 2 workers", [](bench::Run& r) { submitThroughput(r, bench::workers(2)); }},
    {"W2", "fan-out/fan-in: 1,000 rounds of 64 post(use_future)s of ~1 us, all waited for", fanOutFanIn},
    {"W3.coro", "200,000 hops of co_await post(pool, use_awaitable) inside co_spawn", coroutineHops},
    {"W3.chain", "a chain of 200,000 tasks, each post()s the next", taskChain},
    {"W4", "fib(25), each call co_spawns both children, awaited with awaitable_operators &&", forkJoin},
    {"W5", "overload: 2 threads, in-flight gate of 1024 (else the producer runs it), 1,000,000 tasks of ~200 ns",
     overload},
    {"W6.cancel",
     "1,000,000 steady_timer(io_context, 1h) + async_wait, cancel()led, io_context run by 2 threads: each right "
     "after its async_wait (each:, one timer object a time), then all started before any is cancelled (bulk:, the "
     "timers in a vector); timed until every aborted handler ran; RSS as coexec's",
     timerCancel},
    {"W6.fire",
     "1,000,000 steady_timer + async_wait, expiry spread over 0..10 ms, io_context run by 2 threads, the timers kept "
     "in a vector reserved beforehand, handler counts; timed from the first timer to the last handler",
     timerFire},
    {"W7",
     "10,000 rounds of 64 co_spawn(strand, trivial coroutine) joined by experimental::make_parallel_group "
     "(wait_for_one_error) into a vector, the round co_spawned on a strand and waited with use_future",
     invokeAll64},
    {"W8",
     "100,000 round trips io_context -> pool of 2 -> io_context from a coroutine on the io_context: co_await "
     "co_spawn(thread_pool, trivial coroutine, use_awaitable)",
     ioRoundTrip},
    {"idle", "process CPU of an idle pool of 2 over 2 s, after its spin window", idle},
};

}  // namespace

int main(int argc, char** argv) { return bench::main("asio", kWorkloads, argc, argv); }
