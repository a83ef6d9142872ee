// SPDX-License-Identifier: BSL-1.0
// The benchmark workloads on coexec::ThreadPoolExecutor (see Harness.h and
// run.sh; AsioPool.cpp and TbbPool.cpp run the same workloads on the peers).

#include <array>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <coexec/asio.h>
#include <coexec/coexec.h>

#include "CoexecTasks.h"
#include "Harness.h"

namespace {

using namespace std::chrono_literals;
using bench::hops;
using coexec::Future;
using coexec::RejectionPolicy;
using coexec::ScheduledFuture;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;

/// A pool of `threads` core threads, all started.
struct Pool {
  explicit Pool(std::size_t threads, WorkQueue queue = WorkQueue::unbounded(),
                RejectionPolicy policy = RejectionPolicy::abort(), bool recordLatency = false)
      : pool([&] {
          coexec::ThreadPoolOptions options;
          options.corePoolSize = threads;
          options.maximumPoolSize = threads;
          options.keepAliveTime = 60s;
          options.workQueue = queue;
          options.rejectionPolicy = std::move(policy);
          options.recordLatency = recordLatency;
          return options;
        }()) {
    pool.prestartAllCoreThreads();
  }
  ThreadPoolExecutor pool;
};

// W1: one producer, N trivial tasks.
void submitThroughput(bench::Run& run, std::size_t workers, bool recordLatency = false,
                      std::string_view metric = "throughput") {
  bench::Countdown done;
  Pool p(workers, WorkQueue::unbounded(), RejectionPolicy::abort(), recordLatency);
  const std::size_t n = run.count(1'000'000);
  done.reset(n);
  run.throughput(metric, "Mtasks/s", n, [&] {
    for (std::size_t i = 0; i < n; ++i)
      p.pool.execute([&done] { done.hit(); });
    done.wait();
  });
}

// W2: 64 tasks submitted, then their Futures awaited together.
Task<void> fanOut(ThreadPoolExecutor& pool, const bench::Work& work) {
  std::array<Future<void>, 64> futures;
  for (auto& f : futures)
    f = pool.submit([&work] { work(); });
  for (auto& f : futures)
    co_await f;
}

void fanOutFanIn(bench::Run& run) {
  Pool p(bench::workers(2));
  const bench::Work work(1us);
  run.rounds(run.count(1'000), [&] { coexec::syncWait(fanOut(p.pool, work)); });
}

// W11: what ThreadPoolOptions::recordLatency costs: W1.1, W1.2, W2 and
// W3.coro with recording off and then on, in the same run (W2's rounds timed
// by hand, to name its rows).
void latencyCost(bench::Run& run) {
  for (const bool on : {false, true}) {
    const std::string mode = on ? " on" : " off";
    submitThroughput(run, 1, on, "W1.1 recording" + mode + ": throughput");
    submitThroughput(run, bench::workers(2), on, "W1.2 recording" + mode + ": throughput");
    Pool p(bench::workers(2), WorkQueue::unbounded(), RejectionPolicy::abort(), on);
    const bench::Work work(1us);
    const std::size_t rounds = run.count(1'000);
    std::vector<double> latencies(rounds);
    const double seconds = run.timed([&] {
      for (auto& latency : latencies) {
        const auto start = std::chrono::steady_clock::now();
        coexec::syncWait(fanOut(p.pool, work));
        latency = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      }
    });
    run.record("W2 recording" + mode + ": rounds/s", "k/s", bench::Better::higher,
               static_cast<double>(rounds) / seconds / 1e3);
    run.record("W2 recording" + mode + ": round p99", "us", bench::Better::lower, bench::percentile(latencies, 0.99));
    if (on) bench::expectCount("W2 tasks recorded", p.pool.stats().runTime.count, rounds * 64);
    // W3.coro: one coroutine task yielding 200,000 times, each hop a segment
    // (two clock reads when on).
    Pool hopping(2, WorkQueue::unbounded(), RejectionPolicy::abort(), on);
    const std::size_t hopCount = run.count(200'000);
    run.perOp("W3.coro recording" + mode + ": hop", hopCount,
              [&] { hopping.pool.submit(hops(hopping.pool, hopCount)).get(); });
  }
}

// W3: a coroutine hopping through the pool it runs on (bench::hops).
void coroutineHops(bench::Run& run) {
  Pool p(2);
  const std::size_t n = run.count(200'000);
  run.perOp("hop", n, [&] { p.pool.submit(hops(p.pool, n)).get(); });
}

// W3: a chain of tasks, each submitting the next.
struct Chain {
  ThreadPoolExecutor& pool;
  std::size_t left;
  bench::Countdown& done;
  void step() {
    if (--left == 0) {
      done.hit();
    } else {
      pool.execute([this] { step(); });
    }
  }
};

void taskChain(bench::Run& run) {
  bench::Countdown done;
  Pool p(2);
  const std::size_t n = run.count(200'000);
  Chain chain{p.pool, n, done};
  done.reset(1);
  run.perOp("hop", n, [&] {
    p.pool.execute([&chain] { chain.step(); });
    done.wait();
  });
}

// W4 and its variants: fib(25) written as `fibForm` (W4: bench::fib; W4s.*:
// bench::fibWhenAll, fibGroup, fibInvokeAll) on a pool of 2 with `queue`
// (W4d: the default queue, bounded(1024), whose places the workers' own
// pushes and pops take and give back).
using Fib = coexec::Task<long> (*)(ThreadPoolExecutor&, int);

void forkJoin(bench::Run& run, Fib fibForm, WorkQueue queue = WorkQueue::unbounded()) {
  Pool p(bench::workers(2), queue);
  const int depth = run.depth(25);
  long result = 0;
  run.duration("fib time", [&] { result = p.pool.submit(fibForm(p.pool, depth)).get(); });
  if (result <= 0) throw std::runtime_error("fib returned a wrong value");
}

// W5: overload: bounded(1024) + callerRuns, 2 threads, tasks of ~200 ns.
void overload(bench::Run& run) {
  bench::Countdown done;
  Pool p(2, WorkQueue::bounded(1024), RejectionPolicy::callerRuns());
  const bench::Work work(200ns);
  const std::size_t n = run.count(1'000'000);
  std::size_t callerRan = 0;
  done.reset(n);
  run.throughput("throughput", "Mtasks/s", n, [&] {
    for (std::size_t i = 0; i < n; ++i) {
      p.pool.execute([&] {
        work();
        if (bench::isProducer()) ++callerRan;
        done.hit();
      });
    }
    done.wait();
  });
  run.record("caller share", "%", bench::Better::none, 100.0 * static_cast<double>(callerRan) / static_cast<double>(n));
}

// W10: backpressure. A producer of 1,000,000 tasks of ~200 ns into
// core=max=2, bounded(1024), paced two ways: a thread under the block()
// policy, and a coroutine (in syncWait on the same thread) that co_awaits
// submitWhenRoom(). Throughput, and the producing thread's own CPU over the
// run in percent of the wall time (a suspended producer, like a blocked
// one, uses none).
double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

coexec::Task<void> paced(ThreadPoolExecutor& pool, std::size_t n, const bench::Work& work, bench::Countdown& done) {
  for (std::size_t i = 0; i < n; ++i) {
    coexec::Future<void> admitted = co_await pool.submitWhenRoom([&work, &done] {
      work();
      done.hit();
    });
  }
}

void backpressure(bench::Run& run) {
  const bench::Work work(200ns);
  const std::size_t n = run.count(1'000'000);
  for (const bool coroutine : {false, true}) {
    bench::Countdown done;
    Pool p(2, WorkQueue::bounded(1024), coroutine ? RejectionPolicy::abort() : RejectionPolicy::block(60s));
    done.reset(n);
    const double cpu0 = threadCpuSeconds();
    const auto start = std::chrono::steady_clock::now();
    const std::string prefix = coroutine ? "submitWhenRoom: " : "block(): ";
    run.throughput(prefix + "throughput", "Mtasks/s", static_cast<double>(n), [&] {
      if (coroutine) {
        coexec::syncWait(paced(p.pool, n, work, done));
      } else {
        for (std::size_t i = 0; i < n; ++i) {
          p.pool.execute([&] {
            work();
            done.hit();
          });
        }
      }
      done.wait();
    });
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    run.record(prefix + "producer CPU", "% wall", bench::Better::lower, 100.0 * (threadCpuSeconds() - cpu0) / wall);
    bench::expectCount("tasks refused (rejectedCount)", p.pool.stats().rejectedCount, 0);
  }
}

// W6: timers. The pool's own checks after a workload: no timer left
// pending, and `admitted` tasks counted in taskCount (a timer's task counts
// when it becomes due, so a cancelled one never).
void expectTimersSettled(const ThreadPoolExecutor& pool, std::size_t admitted) {
  const coexec::PoolStats stats = pool.stats();
  bench::expectCount("timers still pending (scheduledCount)", stats.scheduledCount, 0);
  bench::expectCount("tasks admitted (taskCount)", stats.taskCount, admitted);
}

// W6.cancel: 1,000,000 timers of one hour, cancelled, in two shapes: each
// cancelled right after its schedule(), then all scheduled before the first
// is cancelled. Future::cancel() settles the Future and removes the timer on
// the calling thread: no pool thread takes part and the callable never runs.
void timerCancel(bench::Run& run) {
  const std::size_t n = run.count(1'000'000);
  bench::Tally ran(n);
  Pool p(2);
  const auto timer = [&](std::size_t i) { return p.pool.schedule([&ran, i] { ran.hit(i); }, 1h); };
  const auto check = [&](std::string_view shape, std::size_t cancelled) {
    bench::expectCount(fmt::format("{}: timers cancelled", shape), cancelled, n);
    ran.expectEach(0, fmt::format("{}: callables of cancelled timers", shape));
    expectTimersSettled(p.pool, 0);
  };

  std::size_t cancelled = 0;
  bench::RssWatch each;
  run.throughput("each: schedule+cancel", "Mtimers/s", n, [&] {
    for (std::size_t i = 0; i < n; ++i) {
      ScheduledFuture<void> f = timer(i);
      cancelled += f.cancel() && f.isCancelled() ? 1 : 0;
    }
  });
  run.record("each: peak RSS growth", "MB", bench::Better::lower, each.peakGrowthMb());
  run.record("each: RSS growth after", "MB", bench::Better::lower, each.growthMb());
  check("each", cancelled);

  cancelled = 0;
  bench::RssWatch bulk;
  std::vector<ScheduledFuture<void>> futures;
  futures.reserve(n);
  run.throughput("bulk: schedule+cancel", "Mtimers/s", n, [&] {
    for (std::size_t i = 0; i < n; ++i)
      futures.push_back(timer(i));
    bench::expectCount("bulk: timers pending (scheduledCount)", p.pool.stats().scheduledCount, n);
    for (auto& f : futures)
      cancelled += f.cancel() && f.isCancelled() ? 1 : 0;
  });
  std::vector<ScheduledFuture<void>>().swap(futures);  // the caller's handles go; what the pool keeps stays
  run.record("bulk: peak RSS growth", "MB", bench::Better::lower, bulk.peakGrowthMb());
  run.record("bulk: RSS growth after", "MB", bench::Better::lower, bulk.growthMb());
  check("bulk", cancelled);
}

// W6.fire: 1,000,000 timers due 0..10 ms after their schedule() (in a fixed
// pseudo-random order), each running a trivial callable; their Futures are
// dropped (a Future's destructor does not cancel). Timed from the first
// schedule() to the last run.
void timerFire(bench::Run& run) {
  const std::size_t n = run.count(1'000'000);
  bench::Tally ran(n);
  bench::Countdown done;
  Pool p(2);
  done.reset(n);
  bench::RssWatch rss;
  run.throughput("fire", "Mtimers/s", n, [&] {
    for (std::size_t i = 0; i < n; ++i) {
      (void)p.pool.schedule(
          [&ran, &done, i] {
            ran.hit(i);
            done.hit();
          },
          bench::spreadDelay(i));
    }
    done.wait();
  });
  run.record("peak RSS growth", "MB", bench::Better::lower, rss.peakGrowthMb());
  ran.expectEach(1, "callables of fired timers");
  expectTimersSettled(p.pool, n);
}

// W7: invokeAll of 64 trivial tasks, awaited in syncWait: the whole fan-out,
// fan-in and its result vector, per round.
void invokeAll64(bench::Run& run) {
  Pool p(2);
  std::vector<bench::Trivial> tasks;
  for (int i = 0; i < 64; ++i)
    tasks.push_back(bench::Trivial{i});
  const std::size_t rounds = run.count(10'000);
  long sum = 0;
  run.rounds(rounds, [&] { sum += coexec::syncWait(bench::invokeAllRound(p.pool, tasks)).back(); });
  bench::expectCount("sum of the last results", static_cast<std::size_t>(sum), 63 * rounds);
}

// W9: keyed lanes (coexec only): 1,000,000 trivial tasks over 64 keys
// through a KeyedExecutor of 64 lanes on a pool of 2, next to the same tasks
// execute()d on the pool directly, in the same run. A lane hands one task at
// a time to the pool, so this measures the lanes' own cost (a lock, a queue
// node and a hand-off per task) against plain submission.
void keyedThroughput(bench::Run& run) {
  bench::Countdown done;
  Pool p(2);
  const std::size_t n = run.count(1'000'000);
  done.reset(n);
  run.throughput("plain execute", "Mtasks/s", n, [&] {
    for (std::size_t i = 0; i < n; ++i)
      p.pool.execute([&done] { done.hit(); });
    done.wait();
  });
  coexec::KeyedExecutor keyed(p.pool, 64);
  done.reset(n);
  run.throughput("keyed over 64 keys", "Mtasks/s", n, [&] {
    for (std::size_t i = 0; i < n; ++i)
      keyed.execute(i % 64, [&done] { done.hit(); });
    done.wait();
  });
}

// W8: a coroutine on an io_context (run by this thread) sends trivial work
// to a pool of 2 and comes back, one round trip at a time:
// auto f = pool.submit(trivial); co_await coexec::asyncWait(f, use_awaitable).
// Mean and p99 per round trip.
void ioRoundTrip(bench::Run& run) {
  Pool p(2);
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
            auto f = p.pool.submit(bench::Trivial{static_cast<int>(i % 2)});
            sum += co_await coexec::asyncWait(f, asio::use_awaitable);
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
  Pool p(2);
  done.reset(10'000);
  for (int i = 0; i < 10'000; ++i)
    p.pool.execute([&done] { done.hit(); });
  done.wait();
  run.idleCpu();
}

const bench::Workload kWorkloads[] = {
    {"W1.1", "submit throughput, 1 worker: execute of 1,000,000 atomic increments",
     [](bench::Run& r) { submitThroughput(r, 1); }},
    {"W1.2", "submit throughput, 2 workers", [](bench::Run& r) { submitThroughput(r, bench::workers(2)); }},
    {"W2", "fan-out/fan-in: 1,000 rounds of 64 submit()s of ~1 us, co_awaited in syncWait", fanOutFanIn},
    {"W3.coro", "200,000 hops of co_await resumeOn(pool) from a coroutine on the pool", coroutineHops},
    {"W3.chain", "a chain of 200,000 tasks, each execute()s the next", taskChain},
    {"W4", "fib(25), each call submit()s both children (Task) and co_awaits their Futures",
     [](bench::Run& r) { forkJoin(r, bench::fib); }},
    {"W4d", "W4 on a pool with the default queue, bounded(1024) (W4's pool is unbounded())",
     [](bench::Run& r) { forkJoin(r, bench::fib, WorkQueue::bounded(1024)); }},
    {"W4s.whenAll", "W4 written with whenAll: each call submit()s both children and co_awaits whenAll(a, b)",
     [](bench::Run& r) { forkJoin(r, bench::fibWhenAll); }},
    {"W4s.group", "W4 written with TaskGroup: each call spawn()s both children in a group and co_awaits join()",
     [](bench::Run& r) { forkJoin(r, bench::fibGroup); }},
    {"W4s.invokeAll", "W4 written with invokeAll: each call co_awaits pool.invokeAll of two callables making the Tasks",
     [](bench::Run& r) { forkJoin(r, bench::fibInvokeAll); }},
    {"W5", "overload: core=max=2, bounded(1024), callerRuns, 1,000,000 tasks of ~200 ns", overload},
    {"W6.cancel",
     "1,000,000 schedule(f, 1h) on a pool of 2, cancel()led: each right after its schedule (each:), then all "
     "scheduled before any is cancelled (bulk:); cancel() removes the timer on the calling thread, f never runs; RSS "
     "from /proc/self/status, growth over the run (peak) and left after it with the pool alive and the Futures gone",
     timerCancel},
    {"W6.fire",
     "1,000,000 schedule(f, d) on a pool of 2 (plus its timer thread), d spread over 0..10 ms, Futures dropped, "
     "f counts; timed from the first schedule to the last run",
     timerFire},
    {"W7", "10,000 rounds of co_await pool.invokeAll(64 trivial tasks) -> std::vector<int>, in syncWait", invokeAll64},
    {"W8",
     "100,000 round trips io_context -> pool of 2 -> io_context from an Asio coroutine on the io_context: auto f = "
     "pool.submit(trivial); co_await coexec::asyncWait(f, use_awaitable)",
     ioRoundTrip},
    {"W9",
     "keyed lanes (coexec only): 1,000,000 trivial tasks, execute()d on a pool of 2, then through a "
     "KeyedExecutor(pool, 64) over 64 keys",
     keyedThroughput},
    {"W10",
     "backpressure (coexec only): 1,000,000 tasks of ~200 ns into core=max=2, bounded(1024), from a thread under "
     "block(60s), then from a coroutine that co_awaits submitWhenRoom(); producer CPU: the producing thread's",
     backpressure},
    {"W11",
     "latency recording (coexec only): W1.1, W1.2, W2 and W3.coro with ThreadPoolOptions::recordLatency off, then "
     "on, in one run",
     latencyCost},
    {"idle", "process CPU of an idle pool of 2 over 2 s, after its spin window", idle},
};

}  // namespace

int main(int argc, char** argv) { return bench::main("coexec", kWorkloads, argc, argv); }
