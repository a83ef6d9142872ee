// SPDX-License-Identifier: BSL-1.0
// bench_limits: what the machine's primitives cost, the figures behind the
// scaling model in docs/performance.md ("Scaling: where it stops"). Each
// probe runs 5 times; the table gives the median with min-max.
//
//   bench_limits [markdown]   a table on stdout (markdown: a markdown table)
//
// - read-modify-write, one thread: fetch_add on a line no other thread
//   touches (the cost of a counter kept per worker, had it used an RMW).
// - read-modify-write, 2 threads on one line: both fetch_add the same
//   counter; ns per operation of either thread (the line moves between
//   cores: a shared ring index, a shared counter).
// - line round trip: two threads hand a line back and forth (each waits
//   for the other's store, then stores): two transfers of one cache line.
// - mutex, uncontended / contended by 2 threads: lock + unlock.
// - wake-up round trip: two threads wake each other through a futex-backed
//   std::binary_semaphore, each blocking between (a parked worker woken by
//   a submission, twice).
// - steady_clock::now().
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <semaphore>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double nsSince(Clock::time_point start, double ops) {
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / ops;
}

struct alignas(64) Line {
  std::atomic<long> value{0};
};

double rmwAlone() {
  constexpr long n = 20'000'000;
  Line line;
  const auto start = Clock::now();
  for (long i = 0; i < n; ++i)
    line.value.fetch_add(1, std::memory_order_relaxed);
  return nsSince(start, n);
}

/// Runs `body(threadIndex)` on two threads started together; returns when both end.
void onTwoThreads(const std::function<void(int)>& body) {
  std::atomic<int> ready{0};
  auto run = [&](int index) {
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    body(index);
  };
  std::thread other(run, 1);
  run(0);
  other.join();
}

double rmwShared() {
  constexpr long n = 5'000'000;
  Line line;
  Clock::time_point start;
  double ns = 0;
  onTwoThreads([&](int index) {
    if (index == 0) start = Clock::now();
    for (long i = 0; i < n; ++i)
      line.value.fetch_add(1, std::memory_order_relaxed);
    if (index == 0) ns = nsSince(start, n);
  });
  return ns;
}

double lineRoundTrip() {
  constexpr long n = 1'000'000;
  Line line;
  double ns = 0;
  onTwoThreads([&](int index) {
    const auto start = Clock::now();
    for (long i = 0; i < n; ++i) {
      const long mine = 2 * i + index;  // 0 stores even values, 1 odd ones
      while (line.value.load(std::memory_order_acquire) != mine) {
      }
      line.value.store(mine + 1, std::memory_order_release);
    }
    if (index == 0) ns = nsSince(start, n);
  });
  return ns;
}

double mutexAlone() {
  constexpr long n = 10'000'000;
  std::mutex m;
  long x = 0;
  const auto start = Clock::now();
  for (long i = 0; i < n; ++i) {
    std::lock_guard lock(m);
    ++x;
  }
  const double ns = nsSince(start, n);
  return x == n ? ns : -1;
}

double mutexShared() {
  constexpr long n = 2'000'000;
  std::mutex m;
  long x = 0;
  double ns = 0;
  onTwoThreads([&](int index) {
    const auto start = Clock::now();
    for (long i = 0; i < n; ++i) {
      std::lock_guard lock(m);
      ++x;
    }
    if (index == 0) ns = nsSince(start, n);
  });
  return x == 2 * n ? ns : -1;
}

double wakeRoundTrip() {
  constexpr long n = 20'000;
  std::binary_semaphore ping{0}, pong{0};
  const auto start = Clock::now();
  std::thread other([&] {
    for (long i = 0; i < n; ++i) {
      ping.acquire();
      pong.release();
    }
  });
  for (long i = 0; i < n; ++i) {
    ping.release();
    pong.acquire();
  }
  const double ns = nsSince(start, n);
  other.join();
  return ns;
}

double clockNow() {
  constexpr long n = 10'000'000;
  long sink = 0;
  const auto start = Clock::now();
  for (long i = 0; i < n; ++i)
    sink += Clock::now().time_since_epoch().count() & 1;
  const double ns = nsSince(start, n);
  return sink >= 0 ? ns : -1;
}

struct Probe {
  std::string_view name;
  double (*run)();
};

std::string fmtNs(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ns >= 100 ? "%.0f" : "%.1f", ns);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const bool markdown = argc > 1 && std::string_view(argv[1]) == "markdown";
  const Probe probes[] = {
      {"read-modify-write, one thread", rmwAlone},
      {"read-modify-write, 2 threads on one line", rmwShared},
      {"cache line round trip between 2 threads", lineRoundTrip},
      {"mutex lock + unlock, uncontended", mutexAlone},
      {"mutex lock + unlock, 2 threads contending", mutexShared},
      {"wake-up round trip (futex, 2 threads blocking in turn)", wakeRoundTrip},
      {"steady_clock::now()", clockNow},
  };
  if (markdown) {
    std::printf("| primitive | ns, median [min-max] of 5 |\n|---|--:|\n");
  }
  for (const Probe& probe : probes) {
    std::vector<double> samples;
    for (int i = 0; i < 5; ++i)
      samples.push_back(probe.run());
    std::sort(samples.begin(), samples.end());
    if (samples.front() < 0) {
      std::fprintf(stderr, "bench_limits: %.*s: lost an update\n", static_cast<int>(probe.name.size()),
                   probe.name.data());
      return 1;
    }
    const std::string cell = fmtNs(samples[2]) + " [" + fmtNs(samples.front()) + "-" + fmtNs(samples.back()) + "]";
    if (markdown) {
      std::printf("| %.*s | %s |\n", static_cast<int>(probe.name.size()), probe.name.data(), cell.c_str());
    } else {
      std::printf("%-56.*s %s ns\n", static_cast<int>(probe.name.size()), probe.name.data(), cell.c_str());
    }
  }
  return 0;
}
