// The benchmark workloads on coexec::ThreadPoolExecutor (see Harness.h and
// run.sh; AsioPool.cpp and TbbPool.cpp run the same workloads on the peers).

#include <array>
#include <chrono>

#include <coexec/coexec.h>

#include "CoexecTasks.h"
#include "Harness.h"

namespace {

using namespace std::chrono_literals;
using bench::fib;
using bench::hops;
using coexec::Future;
using coexec::RejectionPolicy;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;

/// A pool of `threads` core threads, all started.
struct Pool {
  explicit Pool(std::size_t threads, WorkQueue queue = WorkQueue::unbounded(),
                RejectionPolicy policy = RejectionPolicy::abort())
      : pool(threads, threads, 60s, queue, std::move(policy)) {
    pool.prestartAllCoreThreads();
  }
  ThreadPoolExecutor pool;
};

// W1: one producer, N trivial tasks.
void submitThroughput(bench::Run& run, std::size_t workers) {
  bench::Countdown done;
  Pool p(workers);
  const std::size_t n = run.count(1'000'000);
  done.reset(n);
  run.throughput("throughput", "Mtasks/s", n, [&] {
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
  Pool p(2);
  const bench::Work work(1us);
  run.rounds(run.count(1'000), [&] { coexec::syncWait(fanOut(p.pool, work)); });
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

// W4: fork/join fib (bench::fib).
void forkJoin(bench::Run& run) {
  Pool p(2);
  const int depth = run.depth(25);
  long result = 0;
  run.duration("fib time", [&] { result = p.pool.submit(fib(p.pool, depth)).get(); });
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
    {"W1.2", "submit throughput, 2 workers", [](bench::Run& r) { submitThroughput(r, 2); }},
    {"W2", "fan-out/fan-in: 1,000 rounds of 64 submit()s of ~1 us, co_awaited in syncWait", fanOutFanIn},
    {"W3.coro", "200,000 hops of co_await resumeOn(pool) from a coroutine on the pool", coroutineHops},
    {"W3.chain", "a chain of 200,000 tasks, each execute()s the next", taskChain},
    {"W4", "fib(25), each call submit()s both children (Task) and co_awaits their Futures", forkJoin},
    {"W5", "overload: core=max=2, bounded(1024), callerRuns, 1,000,000 tasks of ~200 ns", overload},
    {"idle", "process CPU of an idle pool of 2 over 2 s, after its spin window", idle},
};

}  // namespace

int main(int argc, char** argv) { return bench::main("coexec", kWorkloads, argc, argv); }
