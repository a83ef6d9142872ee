// SPDX-License-Identifier: BSL-1.0
#pragma once

// The one harness every benchmark binary shares (STYLE.md, "Benchmarks").
//
// Measuring side (bench_coexec, bench_asio, bench_tbb): a binary is a table
// of workloads; the harness parses `<workload|group|all|list|calibrate>
// [runs] [scale]`, does a warm-up run (at a tenth of the scale), then `runs`
// runs, and owns all timing: a workload only says what to time
// (Run::throughput, perOp, duration, rounds, idleCpu; RssWatch for
// memory). Each sample goes to stdout as CSV
// (`impl,workload,metric,unit,better,value`) and a per-binary summary to
// stderr. run.sh interleaves the binaries run by run. $BENCH_WORKERS_N, if
// set, replaces the 2 workers of W1.2, W2 and W4 (workers(); run.sh's
// scaling mode); bench_tpe and bench_fjp (java/JdkPools.java) follow the
// same conventions.
//
// Reporting side (bench_report, Report.h): reads every sample of a run.sh
// session and prints the median and min-max per implementation, coexec's
// ratio to each peer and the goals, as a readable table, a CSV, a markdown
// table and an SVG chart. It shares this file's statistics.
//
// Under valgrind the warm-up is skipped and callgrind's counters are zeroed
// at the start of the timed region and dumped at its end, so a callgrind
// dump holds exactly the measured work.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/core.h>

#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim, for RssWatch
#endif

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(name)
#endif

namespace bench {

using Clock = std::chrono::steady_clock;

// ---- CPU work of a given length ---------------------------------------------

/// A dependent multiply-add chain the compiler cannot fold: `iterations`
/// steps of CPU work, no memory traffic, no clock reads.
inline void burn(std::uint64_t iterations) noexcept {
  std::uint64_t x = iterations;
  for (std::uint64_t i = 0; i < iterations; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    asm volatile("" : "+r"(x));
  }
}

/// Measures burn() iterations per microsecond on this thread (best of 7).
inline double calibrateSpin() {
  constexpr std::uint64_t kIterations = 1 << 20;
  double best = std::numeric_limits<double>::max();
  for (int i = 0; i < 7; ++i) {
    auto t0 = Clock::now();
    burn(kIterations);
    best = std::min(best, std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return kIterations / best;
}

/// burn() iterations per microsecond: $BENCH_SPIN_PER_US (run.sh calibrates
/// once and hands the same value to every binary, so that every
/// implementation does the same work), else calibrated in this process.
inline double spinPerUs() {
  static const double value = [] {
    const char* env = std::getenv("BENCH_SPIN_PER_US");
    return env != nullptr && std::atof(env) > 0 ? std::atof(env) : calibrateSpin();
  }();
  return value;
}

/// The workers of W1.2, W2 and W4: $BENCH_WORKERS_N if it is a count of at
/// least 1 (run.sh's scaling mode sets it), else `fallback` (2).
inline std::size_t workers(std::size_t fallback) {
  const char* env = std::getenv("BENCH_WORKERS_N");
  const int n = env != nullptr ? std::atoi(env) : 0;
  return n >= 1 ? static_cast<std::size_t>(n) : fallback;
}

/// A task body of about `duration` of CPU work.
class Work {
 public:
  explicit Work(std::chrono::nanoseconds duration)
      : iterations_(static_cast<std::uint64_t>(spinPerUs() * static_cast<double>(duration.count()) / 1e3)) {}
  void operator()() const noexcept { burn(iterations_); }

 private:
  std::uint64_t iterations_;
};

// ---- completion helpers shared by every implementation ----------------------

/// Counts finished tasks down to zero; wait() blocks (futex, no spinning)
/// until the last hit(). Memory ordering: wait() returns seeing everything
/// each task wrote before its hit() (the acq_rel decrements form one release
/// sequence that the last one acquires and republishes through done_).
/// Declare it before the pool, so that the pool's threads are joined before
/// it goes away.
///
/// Thread safety: hit() from any thread; reset() and wait() from the
/// producer, reset() only while no task of the previous count is running.
class Countdown {
 public:
  /// Never blocks.
  void reset(std::size_t count) noexcept {
    // Relaxed is enough: tasks see the new count through the pool's own
    // hand-off, which happens after this.
    left_.store(count, std::memory_order_relaxed);
    done_.store(false, std::memory_order_relaxed);
  }
  /// Never blocks; the last hit() wakes the waiter.
  void hit() noexcept {
    if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      done_.store(true, std::memory_order_release);
      done_.notify_all();
    }
  }
  /// Blocks until the count reaches zero.
  void wait() const noexcept { done_.wait(false, std::memory_order_acquire); }

 private:
  alignas(64) std::atomic<std::size_t> left_{0};
  alignas(64) std::atomic<bool> done_{false};
};

/// The in-flight gate the peers get in W5, in place of coexec's
/// bounded(1024) queue with callerRuns(): at most `limit` tasks in flight,
/// else the (single) producer runs the task itself.
///
/// Thread safety: tryEnter() from the one producer, leave() from any thread.
/// Memory ordering: relaxed throughout: the gate is only a count, no data
/// passes through it (the pool and Countdown publish the tasks' effects).
class Gate {
 public:
  explicit Gate(std::size_t limit) noexcept : limit_(limit) {}
  /// Producer only. True: the task may be handed to the pool (call leave()
  /// when it finishes); false: run it in the producer.
  bool tryEnter() noexcept {
    if (inFlight_.load(std::memory_order_relaxed) >= limit_) return false;
    inFlight_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  void leave() noexcept { inFlight_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  std::size_t limit_;
  alignas(64) std::atomic<std::size_t> inFlight_{0};
};

/// How often each of `n` callbacks ran, to check that every one ran exactly
/// as often as it should (W6: a timer's handler exactly once; a cancelled
/// coexec task never).
///
/// Thread safety: hit() from any thread; expectEach() once the callbacks are
/// done. Memory ordering: relaxed counts; expectEach() sees them all when the
/// caller has synchronised with every hit() since (a Countdown::wait() on a
/// count hit after each of them).
class Tally {
 public:
  explicit Tally(std::size_t n) : hits_(n) {}
  /// Never blocks.
  void hit(std::size_t i) noexcept { hits_[i].fetch_add(1, std::memory_order_relaxed); }
  /// \throws std::runtime_error naming the first callback that did not run
  /// `expected` times, and how many did not.
  void expectEach(unsigned expected, std::string_view what) const {
    std::size_t wrong = 0, first = 0;
    unsigned firstCount = 0;
    for (std::size_t i = 0; i < hits_.size(); ++i) {
      const unsigned count = hits_[i].load(std::memory_order_relaxed);
      if (count == expected) continue;
      if (wrong++ == 0) {
        first = i;
        firstCount = count;
      }
    }
    if (wrong > 0) {
      throw std::runtime_error(fmt::format("{}: {} of {} ran other than {} time(s); #{} ran {} time(s)", what, wrong,
                                           hits_.size(), expected, first, firstCount));
    }
  }

 private:
  std::vector<std::atomic<std::uint8_t>> hits_;
};

/// Throws std::runtime_error if `actual != expected`: the counts a workload
/// checks (timers scheduled, cancelled, fired) must add up, or the binary
/// fails.
inline void expectCount(std::string_view what, std::size_t actual, std::size_t expected) {
  if (actual != expected) throw std::runtime_error(fmt::format("{}: {}, expected {}", what, actual, expected));
}

/// W6.fire: the delay of timer `i`, spread over 0..10 ms in a fixed
/// pseudo-random order (the same in every binary), so that timers are not
/// scheduled in deadline order.
inline std::chrono::microseconds spreadDelay(std::size_t i) noexcept {
  return std::chrono::microseconds((i * 2654435761ULL) % 10'001);
}

/// The resident set of this process across a piece of work, from
/// /proc/self/status (Linux). Creating one returns the allocator's free
/// memory to the system (glibc's malloc_trim: so that a run does not reuse
/// what an earlier run or the warm-up left with the allocator), resets the
/// process's peak resident set (VmHWM, through /proc/self/clear_refs) and
/// reads the current one; peakGrowthMb() is the peak since then minus that,
/// growthMb() the resident set now minus that. Both include what the
/// allocator holds but has not returned to the system.
///
/// Thread safety: one thread uses it; it measures the whole process.
class RssWatch {
 public:
  /// \throws std::runtime_error if the peak cannot be reset or read.
  RssWatch() {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
    std::ofstream clear("/proc/self/clear_refs");
    if (!(clear << "5" << std::flush)) throw std::runtime_error("cannot reset the peak RSS (/proc/self/clear_refs)");
    clear.close();
    before_ = statusKb("VmRSS:");
  }
  [[nodiscard]] double peakGrowthMb() const { return static_cast<double>(statusKb("VmHWM:") - before_) / 1024; }
  [[nodiscard]] double growthMb() const { return static_cast<double>(statusKb("VmRSS:") - before_) / 1024; }

 private:
  static long statusKb(std::string_view field) {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
      if (line.starts_with(field)) return std::atol(line.c_str() + field.size());
    throw std::runtime_error(fmt::format("no {} in /proc/self/status", field));
  }

  long before_ = 0;
};

/// True on the thread that runs the workload (the producer): a task that
/// sees it was run by the caller.
inline bool& isProducer() noexcept {
  thread_local bool value = false;
  return value;
}

// ---- statistics ---------------------------------------------------------------

enum class Better { higher, lower, none };

inline std::string_view toString(Better better) {
  return better == Better::higher ? "higher" : better == Better::lower ? "lower" : "none";
}
inline Better parseBetter(std::string_view text) {
  return text == "higher" ? Better::higher : text == "lower" ? Better::lower : Better::none;
}

struct Stat {
  double median = 0, min = 0, max = 0;
  std::size_t count = 0;
};

/// Nearest-rank percentile, p in [0, 1]. `values` must not be empty.
inline double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

inline Stat summarize(std::vector<double> values) {
  Stat s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  s.median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  s.min = values.front();
  s.max = values.back();
  s.count = n;
  return s;
}

/// A number in 3-4 significant digits.
inline std::string num(double v) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  return a >= 1000   ? fmt::format("{:.0f}", v)
         : a >= 100  ? fmt::format("{:.1f}", v)
         : a >= 10   ? fmt::format("{:.2f}", v)
         : a >= 0.01 ? fmt::format("{:.3f}", v)
                     : fmt::format("{:.2g}", v);
}

inline std::string cell(const Stat& s) {
  if (s.count == 0) return "-";
  if (s.count == 1) return num(s.median);
  return fmt::format("{} [{}-{}]", num(s.median), num(s.min), num(s.max));
}

// ---- one run of one workload --------------------------------------------------

struct Sample {
  std::string impl, workload, metric, unit;
  Better better;
  double value;
};

/// What a workload body gets: the scale, and the timers. Each timer runs its
/// body once, on the calling thread, and records the metric it names; the
/// body blocks until its work is done (the timer measures wall time).
///
/// Thread safety: one thread (the producer) uses a Run.
class Run {
 public:
  Run(std::string_view workload, double scale) : workload_(workload), scale_(scale) {}

  [[nodiscard]] double scale() const noexcept { return scale_; }
  /// `base` scaled, at least 1.
  [[nodiscard]] std::size_t count(std::size_t base) const noexcept {
    return std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(static_cast<double>(base) * scale_)));
  }
  /// A recursion depth whose work (~phi^depth) scales like `count`.
  [[nodiscard]] int depth(int base) const noexcept {
    return std::max(2, base + static_cast<int>(std::lround(std::log(scale_) / std::log(1.618))));
  }

  /// Times `body` and returns seconds. Under valgrind, this region alone is
  /// what callgrind dumps.
  template <class F>
  double timed(F&& body) {
    CALLGRIND_ZERO_STATS;
    const auto start = Clock::now();
    body();
    const auto stop = Clock::now();
    CALLGRIND_DUMP_STATS_AT("measured");
    return std::chrono::duration<double>(stop - start).count();
  }
  /// `ops` operations in `body`: records millions of ops per second.
  template <class F>
  void throughput(std::string_view metric, std::string_view unit, double ops, F&& body) {
    record(metric, unit, Better::higher, ops / timed(body) / 1e6);
  }
  /// `ops` sequential operations in `body`: records nanoseconds per op.
  template <class F>
  void perOp(std::string_view metric, double ops, F&& body) {
    record(metric, "ns", Better::lower, timed(body) * 1e9 / ops);
  }
  /// Records how long `body` takes, in milliseconds.
  template <class F>
  void duration(std::string_view metric, F&& body) {
    record(metric, "ms", Better::lower, timed(body) * 1e3);
  }
  /// Runs `round` `rounds` times: records rounds per second and the p50 and
  /// p99 round latency.
  template <class F>
  void rounds(std::size_t rounds, F&& round) {
    std::vector<double> latencies(rounds);
    const double seconds = timed([&] {
      for (auto& latency : latencies) {
        const auto start = Clock::now();
        round();
        latency = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
      }
    });
    record("rounds/s", "k/s", Better::higher, static_cast<double>(rounds) / seconds / 1e3);
    record("round p50", "us", Better::lower, percentile(latencies, 0.50));
    record("round p99", "us", Better::lower, percentile(latencies, 0.99));
  }
  /// Lets the process settle for `settle` (a pool's spin window), then
  /// sleeps `2 s x scale` and records the process CPU time it used meanwhile,
  /// in percent of one core.
  void idleCpu(std::chrono::milliseconds settle = std::chrono::milliseconds(200)) {
    std::this_thread::sleep_for(settle);
    const auto window = std::chrono::duration<double>(2.0 * scale_);
    const double cpu0 = processCpuSeconds();
    std::this_thread::sleep_for(window);
    record("idle CPU", "% core", Better::lower, 100.0 * (processCpuSeconds() - cpu0) / window.count());
  }

  void record(std::string_view metric, std::string_view unit, Better better, double value) {
    samples_.push_back(Sample{{}, std::string(workload_), std::string(metric), std::string(unit), better, value});
  }
  [[nodiscard]] const std::vector<Sample>& samples() const noexcept { return samples_; }

 private:
  static double processCpuSeconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
  }

  std::string_view workload_;
  double scale_;
  std::vector<Sample> samples_;
};

struct Workload {
  std::string_view name;
  std::string_view description;
  std::function<void(Run&)> body;
};

/// True if `name` is `which` or in the group `which` names: "W6" selects
/// "W6.cancel" and "W6.fire".
inline bool inGroup(std::string_view name, std::string_view which) {
  return name == which || (name.size() > which.size() && name.starts_with(which) && name[which.size()] == '.');
}

/// The main() of a measuring binary: `<workload|group|all|list|calibrate>
/// [runs=5] [scale=1]` (a group: the workloads named `group.*`). Samples go
/// to stdout as CSV, a summary to stderr.
inline int main(std::string_view impl, std::span<const Workload> workloads, int argc, char** argv) {
  const std::string_view which = argc > 1 ? argv[1] : "list";
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  const double scale = argc > 3 ? std::atof(argv[3]) : 1.0;
  if (which == "calibrate") {
    fmt::print("{:.3f}\n", calibrateSpin());
    return 0;
  }
  if (which == "list") {
    for (const auto& w : workloads)
      fmt::print("{:<9} {}\n", w.name, w.description);
    return 0;
  }
  if (runs < 1 || !(scale > 0)) {
    fmt::print(stderr, "usage: {} <workload|group|all|list|calibrate> [runs=5] [scale=1]\n", argv[0]);
    return 2;
  }
  const bool warmUp = RUNNING_ON_VALGRIND == 0 && std::getenv("BENCH_NO_WARMUP") == nullptr;
  isProducer() = true;
  bool found = false;
  for (const auto& w : workloads) {
    if (which != "all" && !inGroup(w.name, which)) continue;
    found = true;
    try {
      if (warmUp) {
        Run warm(w.name, scale / 10);
        w.body(warm);
      }
      std::map<std::string, std::vector<double>> byMetric;
      std::vector<std::string> order;
      for (int r = 0; r < runs; ++r) {
        Run run(w.name, scale);
        w.body(run);
        for (const auto& s : run.samples()) {
          fmt::print("{},{},{},{},{},{:.6g}\n", impl, s.workload, s.metric, s.unit, toString(s.better), s.value);
          if (byMetric[s.metric + " (" + s.unit + ")"].empty()) order.push_back(s.metric + " (" + s.unit + ")");
          byMetric[s.metric + " (" + s.unit + ")"].push_back(s.value);
        }
      }
      std::fflush(stdout);
      for (const auto& m : order)
        fmt::print(stderr, "{:<7} {:<9} {:<34} {}\n", impl, w.name, m, cell(summarize(byMetric[m])));
    } catch (const std::exception& e) {
      fmt::print(stderr, "{} {}: failed: {}\n", impl, w.name, e.what());
      return 1;
    }
  }
  if (!found) {
    fmt::print(stderr, "{}: no workload named '{}' (try 'list')\n", impl, which);
    return 2;
  }
  return 0;
}

}  // namespace bench
