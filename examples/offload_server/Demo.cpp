// SPDX-License-Identifier: BSL-1.0
#include "Demo.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <coexec/coexec.h>

#include "HttpServer.h"
#include "LoadGenerator.h"
#include "Primes.h"

// The demo: calibrate one /work job to ~1.5 ms, then drive the in-process
// server open-loop at half its capacity, at three times it, and at half again,
// once with a bounded pool queue (abort(): a full queue answers 503 at once)
// and once with an unbounded one; print both side by side.

namespace offload {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kTargetJobMs = 1.5;
constexpr std::chrono::milliseconds kPhaseLength{3000};
constexpr std::chrono::milliseconds kProgressInterval{100};
constexpr std::chrono::seconds kDrainLimit{40};

struct Calibration {
  std::uint64_t n = 0;
  double jobMs = 0;
};

// The run time of one job; checks its result against `expected` (0: unknown).
double timeJobMs(std::uint64_t n, std::uint64_t expected = 0) {
  const Clock::time_point start = Clock::now();
  const std::uint64_t primes = countPrimesBelow(n);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (expected != 0 && primes != expected) {
    throw std::logic_error(fmt::format("countPrimesBelow({}) returned {}, not {}", n, primes, expected));
  }
  return ms;
}

// The n for which one job takes about kTargetJobMs on this machine, and the
// measured median cost of that job.
Calibration calibrate() {
  std::vector<double> samples;
  for (int i = 0; i < 5; ++i)
    samples.push_back(timeJobMs(1'000'000, 78'498));
  const double perMillion = std::max(0.01, quantile(samples, 0.5));
  Calibration calibration;
  calibration.n =
      std::clamp<std::uint64_t>(static_cast<std::uint64_t>(kTargetJobMs / perMillion * 1e6), 1000, kMaxPrimeLimit);
  samples.clear();
  for (int i = 0; i < 9; ++i)
    samples.push_back(timeJobMs(calibration.n));
  calibration.jobMs = quantile(samples, 0.5);
  return calibration;
}

// Each connection of the load generator and of the server is a descriptor.
std::size_t raiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  getrlimit(RLIMIT_NOFILE, &limit);
  return static_cast<std::size_t>(limit.rlim_cur);
}

struct Configuration {
  std::string name;
  coexec::WorkQueue queue;
};

struct Outcome {
  std::vector<PhaseResult> phases;
  std::size_t largestQueue = 0;
  coexec::PoolStats pool;
  double drainSeconds = 0;
};

Outcome runConfiguration(const Configuration& configuration, std::size_t threads, std::uint64_t n,
                         const std::vector<LoadPhase>& phases, std::size_t maxConnections) {
  coexec::ThreadPoolExecutor pool({.name = "demo",
                                   .corePoolSize = threads,
                                   .maximumPoolSize = threads,
                                   .workQueue = configuration.queue,
                                   .rejectionPolicy = coexec::RejectionPolicy::abort()});
  pool.prestartAllCoreThreads();
  HttpServer server(pool, ServerOptions{});
  server.start();

  Outcome outcome;
  const bool live = isatty(STDOUT_FILENO) != 0;
  std::size_t reportedPhase = 0;  // not a terminal: the phases whose end line is printed
  LoadProgress lastProgress;
  const auto line = [&](std::string_view phase, const LoadProgress& progress, const coexec::PoolStats& stats) {
    return fmt::format("  {:<20} {:<14} sent {:>6}  ok {:>6}  503 {:>6}  waiting {:>5}  p99 {:>8.1f} ms  queue {:>5}",
                       configuration.name, phase, progress.sent, progress.ok, progress.rejected, progress.outstanding,
                       progress.recentP99Ms, stats.queueSize);
  };
  const auto onProgress = [&](const LoadProgress& progress) {
    const coexec::PoolStats stats = pool.stats();
    outcome.largestQueue = std::max(outcome.largestQueue, stats.queueSize + stats.localQueueSize);
    lastProgress = progress;
    if (live) {
      fmt::print("\r\033[K{}",
                 line(progress.phase < phases.size() ? phases[progress.phase].name : "draining", progress, stats));
      std::fflush(stdout);
    } else {
      // Not a terminal: one line as each phase ends.
      for (; reportedPhase < progress.phase; ++reportedPhase)
        fmt::print("{}\n", line(phases[reportedPhase].name + " ended", progress, stats));
    }
  };
  LoadGenerator generator(server.port(), fmt::format("/work?n={}", n), maxConnections);
  std::chrono::duration<double> drain{0};
  outcome.phases = generator.run(phases, kProgressInterval, onProgress, kDrainLimit, drain);
  outcome.drainSeconds = drain.count();
  if (live) fmt::print("\r\033[K");
  // Not a terminal: the end lines of the phases that ended after the last
  // report (a backlog that drains at once leaves no report while draining),
  // with the run's final counts.
  if (!live && reportedPhase < phases.size()) {
    LoadProgress end = lastProgress;
    end.sent = end.ok = end.rejected = end.failed = 0;
    for (const PhaseResult& result : outcome.phases) {
      end.sent += result.sent;
      end.ok += result.ok;
      end.rejected += result.rejected;
      end.failed += result.failed;
    }
    end.outstanding = end.sent - end.ok - end.rejected - end.failed;
    const coexec::PoolStats stats = pool.stats();
    for (; reportedPhase < phases.size(); ++reportedPhase)
      fmt::print("{}\n", line(phases[reportedPhase].name + " ended", end, stats));
  }
  fmt::print("  {:<20} done\n", configuration.name);

  server.stop();
  server.wait();
  pool.shutdown();
  pool.awaitTermination(std::chrono::seconds(60));
  outcome.pool = pool.stats();
  return outcome;
}

std::string latencies(PhaseResult& phase) {
  if (phase.okLatencyMs.empty()) return "-";
  const double p50 = quantile(phase.okLatencyMs, 0.50);
  const double p99 = quantile(phase.okLatencyMs, 0.99);
  const double max = phase.okLatencyMs.back();
  const auto format = [](double ms) { return ms < 100 ? fmt::format("{:.1f}", ms) : fmt::format("{:.0f}", ms); };
  return fmt::format("{} / {} / {}", format(p50), format(p99), format(max));
}

void row(std::string_view label, const std::string& left, const std::string& right) {
  fmt::print("  {:<30}{:>24}{:>24}\n", label, left, right);
}

}  // namespace

int runDemo() {
  const std::size_t files = raiseFileLimit();
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  // One core is left to the io thread and the load generator.
  const std::size_t threads = cores > 1 ? cores - 1 : 1;
  const std::size_t queueCapacity = 8 * threads;
  // Two descriptors per connection (both ends are in this process).
  const std::size_t maxConnections = std::min<std::size_t>(8000, files > 400 ? (files - 200) / 2 : 100);

  fmt::print("offload_server demo: an HTTP server on Asio offloading /work to a coexec pool\n");
  const Calibration calibration = calibrate();
  const double capacity = static_cast<double>(threads) * 1000.0 / calibration.jobMs;
  const double steady = std::max(1.0, std::round(capacity * 0.5));
  const double overload = std::max(1.0, std::round(capacity * 3));
  const std::vector<LoadPhase> phases = {
      {"steady", steady, kPhaseLength}, {"overload", overload, kPhaseLength}, {"after", steady, kPhaseLength}};
  fmt::print("calibration: one job /work?n={} takes {:.2f} ms here; pool of {} thread{} -> capacity ~{:.0f} req/s\n",
             calibration.n, calibration.jobMs, threads, threads == 1 ? "" : "s", capacity);
  fmt::print("load (open loop, keep-alive, latency from when each request was due): ");
  fmt::print("steady {:.0f}/s, overload {:.0f}/s, after {:.0f}/s, {} s each\n\n", steady, overload, steady,
             kPhaseLength.count() / 1000);

  const std::vector<Configuration> configurations = {
      {fmt::format("bounded queue ({})", queueCapacity), coexec::WorkQueue::bounded(queueCapacity)},
      {"unbounded queue", coexec::WorkQueue::unbounded()}};
  std::vector<Outcome> outcomes;
  for (const Configuration& configuration : configurations) {
    outcomes.push_back(runConfiguration(configuration, threads, calibration.n, phases, maxConnections));
  }

  fmt::print("\n  {:<30}{:>24}{:>24}\n", "", configurations[0].name, configurations[1].name);
  bool failures = false;
  for (std::size_t i = 0; i < phases.size(); ++i) {
    PhaseResult& left = outcomes[0].phases[i];
    PhaseResult& right = outcomes[1].phases[i];
    fmt::print("{} {:.0f} req/s for {} s\n", phases[i].name, phases[i].rate, phases[i].duration.count() / 1000);
    const double seconds = static_cast<double>(phases[i].duration.count()) / 1000.0;
    row("served (200) per second", fmt::format("{:.0f}", static_cast<double>(left.okDuringPhase) / seconds),
        fmt::format("{:.0f}", static_cast<double>(right.okDuringPhase) / seconds));
    row("latency p50 / p99 / max ms", latencies(left), latencies(right));
    row("503 Service Unavailable", fmt::format("{}", left.rejected), fmt::format("{}", right.rejected));
    const std::uint64_t leftLost = left.sent - left.ok - left.rejected;
    const std::uint64_t rightLost = right.sent - right.ok - right.rejected;
    if (leftLost + rightLost > 0) {
      failures = true;
      row("failed or unanswered", fmt::format("{}", leftLost), fmt::format("{}", rightLost));
    }
  }
  fmt::print("whole run\n");
  row("largest queue seen", fmt::format("{}", outcomes[0].largestQueue), fmt::format("{}", outcomes[1].largestQueue));
  row("pool completed / rejected",
      fmt::format("{} / {}", outcomes[0].pool.completedTaskCount, outcomes[0].pool.rejectedCount),
      fmt::format("{} / {}", outcomes[1].pool.completedTaskCount, outcomes[1].pool.rejectedCount));
  row("last answer after load ended", fmt::format("{:.1f} s", outcomes[0].drainSeconds),
      fmt::format("{:.1f} s", outcomes[1].drainSeconds));
  fmt::print(
      "\nBounded: a full queue refuses at once (503 + Retry-After), so an accepted request waits behind at most {} "
      "jobs and p99 stays near one job's cost times that.\n"
      "Unbounded: every request is queued; under overload the backlog, and with it latency, grows each second and "
      "keeps growing after the overload until the backlog drains.\n",
      queueCapacity);
  if (failures) fmt::print("note: some requests failed or went unanswered (see the table)\n");
  const bool ran = std::all_of(outcomes.begin(), outcomes.end(), [](const Outcome& outcome) {
    return std::any_of(outcome.phases.begin(), outcome.phases.end(),
                       [](const PhaseResult& phase) { return phase.ok > 0; });
  });
  return ran ? 0 : 1;
}

}  // namespace offload
