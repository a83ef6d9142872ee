// SPDX-License-Identifier: BSL-1.0
// The benchmark workloads on oneTBB: tbb::task_arena::enqueue for
// fire-and-forget tasks, tbb::task_group for chains and fork/join. Same
// workloads and parameters as CoexecPool.cpp.
//
// An arena of N workers is task_arena(N, 0) (no slot reserved for the
// calling thread); task_group work runs in task_arena(2).execute(), where
// the calling thread takes the reserved slot: 2 threads in all, as in the
// other pools. global_control lifts TBB's default of (cores - 1) workers.
// BENCH_WORKERS_N (run.sh's scaling mode) replaces the 2 of W1.2, W2 and W4:
// task_arena(N, 0) for W1.2 and W2, task_arena(N) (N threads with the
// caller) for W4.

#include <algorithm>
#include <chrono>
#include <vector>

#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include "Harness.h"

namespace {

using namespace std::chrono_literals;

// W1: one producer, N trivial tasks.
void submitThroughput(bench::Run& run, int workers) {
  bench::Countdown done;
  tbb::task_arena arena(workers, 0);
  arena.initialize();
  const std::size_t n = run.count(1'000'000);
  done.reset(n);
  run.throughput("throughput", "Mtasks/s", n, [&] {
    for (std::size_t i = 0; i < n; ++i)
      arena.enqueue([&done] { done.hit(); });
    done.wait();
  });
}

// W2: 64 enqueued tasks, waited for together (a countdown: TBB has no futures).
void fanOutFanIn(bench::Run& run) {
  bench::Countdown done;
  tbb::task_arena arena(static_cast<int>(bench::workers(2)), 0);
  arena.initialize();
  const bench::Work work(1us);
  run.rounds(run.count(1'000), [&] {
    done.reset(64);
    for (int i = 0; i < 64; ++i) {
      arena.enqueue([&] {
        work();
        done.hit();
      });
    }
    done.wait();
  });
}

// W3 (coroutine hop's counterpart): a chain of task_group runs, each running the next.
struct GroupChain {
  tbb::task_group& group;
  std::size_t* left;
  void operator()() const {
    if (--*left > 0) group.run(*this);
  }
};

void groupHops(bench::Run& run) {
  tbb::task_arena arena(2);
  arena.initialize();
  const std::size_t n = run.count(200'000);
  run.perOp("hop", n, [&] {
    arena.execute([&] {
      tbb::task_group group;
      std::size_t left = n;
      group.run(GroupChain{group, &left});
      group.wait();
    });
  });
}

// W3: a chain of enqueued tasks, each enqueueing the next.
struct Chain {
  tbb::task_arena& arena;
  std::size_t left;
  bench::Countdown& done;
  void step() {
    if (--left == 0) {
      done.hit();
    } else {
      arena.enqueue([this] { step(); });
    }
  }
};

void taskChain(bench::Run& run) {
  bench::Countdown done;
  tbb::task_arena arena(2, 0);
  arena.initialize();
  const std::size_t n = run.count(200'000);
  Chain chain{arena, n, done};
  done.reset(1);
  run.perOp("hop", n, [&] {
    arena.enqueue([&chain] { chain.step(); });
    done.wait();
  });
}

// W4: fork/join fib: every call with n >= 2 runs both children in a task_group and waits.
long fib(int n) {
  if (n < 2) return n;
  long a = 0, b = 0;
  tbb::task_group group;
  group.run([&] { a = fib(n - 1); });
  group.run([&] { b = fib(n - 2); });
  group.wait();
  return a + b;
}

void forkJoin(bench::Run& run) {
  tbb::task_arena arena(static_cast<int>(bench::workers(2)));
  arena.initialize();
  const int depth = run.depth(25);
  long result = 0;
  run.duration("fib time", [&] { arena.execute([&] { result = fib(depth); }); });
  if (result <= 0) throw std::runtime_error("fib returned a wrong value");
}

// W5: overload: 2 workers, at most 1024 tasks in flight, else the producer runs the task.
void overload(bench::Run& run) {
  bench::Countdown done;
  bench::Gate gate(1024);
  tbb::task_arena arena(2, 0);
  arena.initialize();
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
        arena.enqueue([&] {
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

// W7: 64 trivial tasks in a task_group, their results in a vector, waited
// for: the hand-written invokeAll (task_group cancels the rest on an
// exception, as invokeAll does).
void invokeAll64(bench::Run& run) {
  tbb::task_arena arena(2);
  arena.initialize();
  const std::size_t rounds = run.count(10'000);
  long sum = 0;
  run.rounds(rounds, [&] {
    std::vector<int> results(64);
    arena.execute([&] {
      tbb::task_group group;
      for (int i = 0; i < 64; ++i)
        group.run([&results, i] { results[static_cast<std::size_t>(i)] = i; });
      group.wait();
    });
    sum += results.back();
  });
  bench::expectCount("sum of the last results", static_cast<std::size_t>(sum), 63 * rounds);
}

// Idle: CPU used by an arena of 2 with nothing to do, after a burst of work.
void idle(bench::Run& run) {
  bench::Countdown done;
  tbb::task_arena arena(2, 0);
  done.reset(10'000);
  for (int i = 0; i < 10'000; ++i)
    arena.enqueue([&done] { done.hit(); });
  done.wait();
  run.idleCpu();
}

const bench::Workload kWorkloads[] = {
    {"W1.1", "submit throughput, 1 worker: task_arena::enqueue of 1,000,000 atomic increments",
     [](bench::Run& r) { submitThroughput(r, 1); }},
    {"W1.2", "submit throughput, 2 workers",
     [](bench::Run& r) { submitThroughput(r, static_cast<int>(bench::workers(2))); }},
    {"W2", "fan-out/fan-in: 1,000 rounds of 64 enqueues of ~1 us, waited for with a countdown", fanOutFanIn},
    {"W3.coro", "a chain of 200,000 task_group runs, each running the next (no coroutines in TBB)", groupHops},
    {"W3.chain", "a chain of 200,000 enqueued tasks, each enqueueing the next", taskChain},
    {"W4", "fib(25), each call runs both children in a task_group and waits", forkJoin},
    {"W5", "overload: 2 workers, in-flight gate of 1024 (else the producer runs it), 1,000,000 tasks of ~200 ns",
     overload},
    {"W7", "10,000 rounds of 64 trivial task_group runs writing a result vector, then wait (in task_arena(2))",
     invokeAll64},
    {"idle", "process CPU of an idle arena of 2 over 2 s, after its spin window", idle},
};

}  // namespace

int main(int argc, char** argv) {
  // 2 workers and the producer; with BENCH_WORKERS_N, that many and the producer.
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism,
                              std::max<std::size_t>(3, bench::workers(2) + 1));
  return bench::main("tbb", kWorkloads, argc, argv);
}
