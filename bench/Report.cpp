// Turns the samples of one bench/run.sh session into the ratio table, the
// scheduler goals, bench results.csv, docs/perf/latest.md and latest.svg.
// Usage: bench_report <samples.csv> <results.csv> <latest.md> <latest.svg>

#include <limits>

#include "Report.h"

int main(int argc, char** argv) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  // {workload, metric, against, lo, hi, text}: against = peer (ratio to it),
  // another workload (ratio to coexec there) or "" (coexec's own value).
  const std::vector<bench::Goal> goals{
      {"W1.2", "throughput", "asio", 3.0, inf, "W1: >= 3.0x asio::thread_pool with 2 workers"},
      {"W1.2", "throughput", "W1.1", 1.0, inf, "W1: faster with 2 workers than with 1"},
      {"W2", "rounds/s", "asio", 4.0, inf, "W2: >= 4x asio rounds/s"},
      {"W2", "round p99", "asio", 0, 0.2, "W2: p99 <= 0.2x asio's"},
      {"W2", "rounds/s", "tbb", 0.8, inf, "W2: >= 0.8x TBB task_arena::enqueue rounds/s"},
      {"W3.coro", "hop", "asio", 0, 0.25, "W3: coroutine hop <= 0.25x asio co_spawn/co_await post"},
      {"W3.coro", "hop", "tbb", 0, 1.0, "W3: coroutine hop <= TBB task_group"},
      {"W4", "fib time", "tbb", 0, 1.5, "W4: <= 1.5x TBB task_group time"},
      {"W4", "fib time", "asio", 0, 0.2, "W4: >= 5x faster than asio awaitable &&"},
      {"W5", "throughput", "asio", 1.5, inf, "W5: >= 1.5x asio with the gate"},
      {"W5", "caller share", "", 40, 60, "W5: caller share about half, as the JDK's (40-60 %)"},
      {"alloc", "execute 8 B callable", "", 0, 0, "zero heap allocations per execute of a small callable"},
      {"alloc", "execute 48 B callable", "", 0, 0, "zero heap allocations per execute of a 48-byte callable"},
      {"idle", "idle CPU", "", 0, 0.1, "idle CPU zero after the spin window (<= 0.1 % of a core)"},
      {"W6.cancel", "each: schedule+cancel", "asio", 1.0, inf,
       "W6: timer rate >= asio's, schedule+cancel one at a time"},
      {"W6.cancel", "bulk: schedule+cancel", "asio", 1.0, inf,
       "W6: timer rate >= asio's, 1,000,000 scheduled then cancelled"},
      {"W6.fire", "fire", "asio", 1.0, inf, "W6: timer rate >= asio's, 1,000,000 short timers fired"},
      {"W6.cancel", "each: peak RSS growth", "", -inf, 4, "W6: RSS flat: 1,000,000 schedule+cancel peak below 4 MB"},
      {"W6.cancel", "each: RSS growth after", "", -inf, 4, "W6: RSS flat: 1,000,000 schedule+cancel leave below 4 MB"},
      {"W7", "rounds/s", "asio", 1.0, inf, "W7: invokeAll of 64 >= asio's co_spawn + make_parallel_group rounds/s"},
      {"W7", "rounds/s", "tbb", 0.75, inf, "W7: invokeAll of 64 >= 0.75x TBB task_group rounds/s"},
      {"W8", "round trip", "asio", 0, 1.0, "W8: io_context -> pool -> io_context round trip <= asio's"},
  };
  return bench::reportMain(argc, argv, goals);
}
