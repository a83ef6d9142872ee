// SPDX-License-Identifier: BSL-1.0
// Turns the samples of one bench/run.sh session into the ratio table, the
// scheduler goals, bench results.csv, docs/perf/latest.md and latest.svg;
// in run.sh's scaling mode, the scaling table (docs/perf/scaling.md).
// Usage: bench_report <samples.csv> <results.csv> <latest.md> <latest.svg>
//        bench_report scaling <scaling-samples.csv> <scaling.md>

#include <limits>
#include <string_view>

#include "Report.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "scaling") return bench::scalingMain(argc, argv);
  constexpr double inf = std::numeric_limits<double>::infinity();
  constexpr bool kept = true;
  // {workload, metric, peer, lo, hi, text[, peer workload, peer metric, kept]}: with a peer, the value is
  // coexec's median over the peer's (on the peer workload and metric when given); without, coexec's own.
  // Peers: asio (asio::thread_pool), tbb (oneTBB), tpe (java.util.concurrent.ThreadPoolExecutor),
  // fjp (java.util.concurrent.ForkJoinPool).
  const std::vector<bench::Goal> goals{
      // Performance round 2.
      {"W4", "fib time", "tbb", 0, 1.0, "W4: fib(25) time <= 1.0x TBB task_group (tbb)"},
      {"W4", "fib time", "fjp", 0, 1.5, "W4 stretch: fib(25) time <= 1.5x Java ForkJoinPool (fjp)"},
      {"W4d", "fib time", "coexec", 0, 1.1,
       "W4 with the default queue, bounded(1024): fib(25) time <= 1.1x W4's, unbounded() (coexec W4)", "W4", ""},
      {"W4s.whenAll", "fib time", "coexec", 0, 1.1, "W4 with whenAll: fib(25) time <= 1.1x the submit form (coexec W4)",
       "W4", ""},
      {"W4s.group", "fib time", "coexec", 0, 1.1, "W4 with TaskGroup: fib(25) time <= 1.1x the submit form (coexec W4)",
       "W4", ""},
      {"W4s.invokeAll", "fib time", "coexec", 0, 1.1,
       "W4 with invokeAll: fib(25) time <= 1.1x the submit form (coexec W4)", "W4", ""},
      {"W7", "rounds/s", "tbb", 1.0, inf, "W7: invokeAll of 64 rounds/s >= 1.0x TBB task_group (tbb)"},
      {"W7", "round p99", "tbb", 0, 1.0, "W7: invokeAll of 64 round p99 <= TBB task_group's (tbb)"},
      {"W2", "rounds/s", "tbb", 1.0, inf, "W2: rounds/s >= 1.0x TBB task_arena::enqueue (tbb)"},
      {"W2", "round p99", "tbb", 0, 1.0, "W2: round p99 <= TBB task_arena::enqueue's (tbb)"},
      {"W1.2", "throughput", "fjp", 0.8, inf, "W1.2: throughput with 2 workers >= 0.8x Java ForkJoinPool (fjp)"},
      {"W1.1 callgrind", "Ir/task (all)", "asio", 0, 1.0,
       "W1.1: callgrind instructions per task (all threads) <= asio::thread_pool's (asio)"},
      {"W5", "throughput", "tpe", 1.2, inf,
       "W5: overload throughput >= 1.2x Java ThreadPoolExecutor, ArrayBlockingQueue(1024) + CallerRunsPolicy (tpe)"},
      {"W5", "caller share", "", 40, 60, "W5: caller share 40-60 % (coexec's own)"},
      {"W6.fire", "fire", "asio", 1.0, inf, "W6.fire: 1,000,000 short timers fired >= 1.0x asio steady_timer (asio)"},
      {"W6.cancel", "bulk: RSS growth after", "asio", 0, 2.0,
       "W6.cancel: bulk RSS growth after <= 2x asio steady_timer's (asio)"},
      // Kept from earlier rounds.
      {"W3.coro", "hop", "fjp", 0, 0.5,
       "W3: coroutine hop (W3.coro) <= 0.5x Java ForkJoinPool's task-chain hop (fjp W3.chain: the JDK has no "
       "coroutine hop)",
       "W3.chain", "", kept},
      {"alloc", "execute 8 B callable", "", 0, 0, "zero heap allocations per execute of a small callable", "", "",
       kept},
      {"alloc", "execute 48 B callable", "", 0, 0, "zero heap allocations per execute of a 48-byte callable", "", "",
       kept},
      {"idle", "idle CPU", "", 0, 0.1, "idle CPU zero after the spin window (<= 0.1 % of a core)", "", "", kept},
      {"W8", "round trip", "asio", 0, 1.0, "W8: io_context -> pool -> io_context round trip <= asio's (asio)", "", "",
       kept},
      {"W1.2", "throughput", "coexec", 1.0, inf, "W1: faster with 2 workers than with 1 (coexec W1.1)", "W1.1", "",
       kept},
      {"W1.2", "throughput", "asio", 3.0, inf, "W1: >= 3.0x asio::thread_pool with 2 workers (asio)", "", "", kept},
      {"W2", "rounds/s", "asio", 4.0, inf, "W2: >= 4x asio rounds/s (asio)", "", "", kept},
      {"W2", "round p99", "asio", 0, 0.2, "W2: p99 <= 0.2x asio's (asio)", "", "", kept},
      {"W3.coro", "hop", "asio", 0, 0.25, "W3: coroutine hop <= 0.25x asio co_spawn/co_await post (asio)", "", "",
       kept},
      {"W4", "fib time", "asio", 0, 0.2, "W4: >= 5x faster than asio awaitable && (asio)", "", "", kept},
      {"W5", "throughput", "asio", 1.5, inf, "W5: >= 1.5x asio with the gate (asio)", "", "", kept},
      {"W6.cancel", "each: schedule+cancel", "asio", 1.0, inf,
       "W6: timer rate >= asio's, schedule+cancel one at a time (asio)", "", "", kept},
      {"W6.cancel", "bulk: schedule+cancel", "asio", 1.0, inf,
       "W6: timer rate >= asio's, 1,000,000 scheduled then cancelled (asio)", "", "", kept},
      {"W6.cancel", "each: peak RSS growth", "", -inf, 4, "W6: RSS flat: 1,000,000 schedule+cancel peak below 4 MB", "",
       "", kept},
      {"W6.cancel", "each: RSS growth after", "", -inf, 4, "W6: RSS flat: 1,000,000 schedule+cancel leave below 4 MB",
       "", "", kept},
      {"W7", "rounds/s", "asio", 1.0, inf,
       "W7: invokeAll of 64 >= asio's co_spawn + make_parallel_group rounds/s (asio)", "", "", kept},
  };
  return bench::reportMain(argc, argv, goals);
}
