// SPDX-License-Identifier: BSL-1.0
#include "coexec/LatencyHistogram.h"

// Per-task latency (ThreadPoolOptions::recordLatency): the histogram's
// layout and error bound, and a pool's queue-wait and run-time records on a
// ManualClock, where every expected percentile is exact.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "Assertions.h"
#include <fmt/format.h>

#include "TestSupport.h"
#include "coexec/Executors.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using namespace std::chrono_literals;

using coexec::LatencyHistogram;
using coexec::LatencySummary;
using coexec::ManualClock;
using coexec::PoolStats;
using coexec::RejectedExecution;
using coexec::RejectionPolicy;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::Counter;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::StopOnExit;
using std::chrono::nanoseconds;

namespace {

/// What LatencyHistogram reports for a percentile whose sample is `value`
/// in a histogram whose largest sample is `max`: its bucket's upper edge,
/// capped at max.
nanoseconds reported(nanoseconds value, nanoseconds max) {
  return std::min(LatencyHistogram::bucketUpperBound(LatencyHistogram::bucketIndex(value)), max);
}

/// A one-thread pool on `clock` that records latency.
ThreadPoolOptions recordingOn(ManualClock& clock) {
  ThreadPoolOptions options;
  options.name = "lat";
  options.corePoolSize = 1;
  options.maximumPoolSize = 1;
  options.clock = &clock;
  options.recordLatency = true;
  return options;
}

}  // namespace

// ---- the histogram ----------------------------------------------------------------

TEST_CASE("LatencyHistogram's buckets tile the durations without gaps, each within the error bound",
          "[latency][histogram]") {
  REQUIRE(LatencyHistogram::kBucketCount == 1280);
  REQUIRE(LatencyHistogram::bucketLowerBound(0) == 0ns);
  for (std::size_t i = 0; i + 1 < LatencyHistogram::kBucketCount; ++i) {
    const nanoseconds lower = LatencyHistogram::bucketLowerBound(i);
    const nanoseconds upper = LatencyHistogram::bucketUpperBound(i);
    INFO("bucket " << i << " [" << lower.count() << ", " << upper.count() << "]");
    REQUIRE(upper >= lower);
    REQUIRE(LatencyHistogram::bucketLowerBound(i + 1) == upper + 1ns);
    REQUIRE(LatencyHistogram::bucketIndex(lower) == i);
    REQUIRE(LatencyHistogram::bucketIndex(upper) == i);
    if (i < LatencyHistogram::kExactBelow) {
      REQUIRE(lower == upper);  // exact below 64 ns
    } else {
      // The width relative to the smallest value the bucket holds.
      REQUIRE(double((upper - lower + 1ns).count()) / double(lower.count()) <= LatencyHistogram::kRelativeError);
    }
  }
  REQUIRE(LatencyHistogram::bucketUpperBound(LatencyHistogram::kBucketCount - 1) == nanoseconds::max());
  REQUIRE(LatencyHistogram::bucketIndex(nanoseconds::max()) == LatencyHistogram::kBucketCount - 1);
  REQUIRE(LatencyHistogram::bucketIndex(-5ns) == 0);
}

TEST_CASE("A reported percentile is never below the true one and at most 1/32 above it", "[latency][histogram]") {
  std::mt19937_64 random(20261205);
  std::lognormal_distribution<double> durations(10.0, 3.0);  // ns: from a few to billions
  LatencyHistogram histogram;
  std::vector<std::int64_t> samples;
  for (int i = 0; i < 20'000; ++i) {
    const auto ns = static_cast<std::int64_t>(std::min(durations(random), 1e13));
    samples.push_back(ns);
    histogram.record(nanoseconds(ns));
  }
  std::sort(samples.begin(), samples.end());
  REQUIRE(histogram.count() == samples.size());
  REQUIRE(histogram.max() == nanoseconds(samples.back()));
  std::int64_t sum = 0;
  for (const std::int64_t s : samples)
    sum += s;
  REQUIRE(histogram.sum() == nanoseconds(sum));
  for (const double q : {0.0, 0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    const auto rank = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(q * double(samples.size()))));
    const std::int64_t truth = samples[rank - 1];
    const nanoseconds got = histogram.percentile(q);
    INFO("q " << q << ": true " << truth << " ns, reported " << got.count() << " ns");
    REQUIRE(got.count() >= truth);
    REQUIRE(double(got.count()) <= double(truth) * (1.0 + LatencyHistogram::kRelativeError) + 1.0);
  }
}

TEST_CASE("LatencyHistogram: empty, merge, countAtOrBelow, bad quantiles", "[latency][histogram]") {
  LatencyHistogram empty;
  REQUIRE(empty.count() == 0);
  REQUIRE(empty.percentile(0.99) == 0ns);
  REQUIRE(empty.max() == 0ns);
  REQUIRE(empty.countAt(3) == 0);
  REQUIRE_THROWS_AS(empty.percentile(1.5), std::invalid_argument);
  REQUIRE_THROWS_AS(empty.percentile(-0.1), std::invalid_argument);

  LatencyHistogram a;
  LatencyHistogram b;
  for (int i = 1; i <= 10; ++i)
    a.record(nanoseconds(i));  // 1..10 ns: exact buckets
  b.record(1ms);
  b.merge(a);
  b.merge(empty);
  REQUIRE(b.count() == 11);
  REQUIRE(b.sum() == 1ms + 55ns);
  REQUIRE(b.max() == 1ms);
  REQUIRE(b.percentile(0.5) == 6ns);  // the 6th of 1..10, 1ms
  REQUIRE(b.percentile(1.0) == 1ms);
  REQUIRE(b.countAt(LatencyHistogram::bucketIndex(1ms)) == 1);
  REQUIRE(b.countAtOrBelow(10ns) == 10);
  REQUIRE(b.countAtOrBelow(5ns) == 5);
  REQUIRE(b.countAtOrBelow(LatencyHistogram::bucketUpperBound(LatencyHistogram::bucketIndex(1ms))) == 11);

  const LatencySummary summary = LatencySummary::of(b);
  REQUIRE(summary.count == 11);
  REQUIRE(summary.p50 == 6ns);
  REQUIRE(summary.p90 == 10ns);  // rank ceil(9.9) = 10
  REQUIRE(summary.p99 == 1ms);   // rank 11: capped at max
  REQUIRE(summary.max == 1ms);
  REQUIRE(summary.histogram.count() == 11);
}

// ---- a pool's records on a ManualClock ---------------------------------------------

TEST_CASE("Queue wait and run time on a ManualClock pool have the exact expected percentiles", "[latency][pool]") {
  ManualClock clock;
  Gate gate;
  ThreadPoolExecutor pool(recordingOn(clock));
  StopOnExit stop(gate, pool);
  Counter started;
  // A: admitted and started at 0, runs until the gate opens at 20 ms.
  auto a = pool.submit([&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  // T1..T10, admitted at 1..10 ms behind A, all start at 20 ms and run for
  // no virtual time.
  std::vector<coexec::Future<void>> queued;
  for (int i = 1; i <= 10; ++i) {
    clock.advance(1ms);
    queued.push_back(pool.submit([] {}));
  }
  clock.advance(10ms);  // 20 ms
  gate.open();
  a.get();
  for (auto& f : queued)
    f.get();
  REQUIRE(coexec::test::eventually([&] { return pool.stats().runTime.count == 11; }));

  const PoolStats s = pool.stats();
  // Queue waits: 0 (A), then 19, 18, ..., 10 ms.
  REQUIRE(s.queueWait.count == 11);
  REQUIRE(s.queueWait.max == 19ms);
  REQUIRE(s.queueWait.p50 == reported(14ms, 19ms));  // rank 6 of {0, 10..19}
  REQUIRE(s.queueWait.p90 == reported(18ms, 19ms));  // rank ceil(9.9) = 10
  REQUIRE(s.queueWait.p99 == 19ms);                  // rank 11: the largest, exact
  REQUIRE(s.queueWait.histogram.sum() == 145ms);     // 10 + 11 + ... + 19
  REQUIRE(s.queueWait.histogram.percentile(0.0) == 0ns);
  // Run times: 20 ms (A), ten times 0.
  REQUIRE(s.runTime.count == 11);
  REQUIRE(s.runTime.p50 == 0ns);
  REQUIRE(s.runTime.p90 == 0ns);
  REQUIRE(s.runTime.p99 == 20ms);
  REQUIRE(s.runTime.max == 20ms);
  REQUIRE(s.runTime.histogram.sum() == 20ms);
  // latency() is the same histograms.
  const coexec::PoolLatency latency = pool.latency();
  REQUIRE(latency.queueWait.count() == 11);
  REQUIRE(latency.queueWait.sum() == 145ms);
  REQUIRE(latency.runTime.max() == 20ms);
  // The one-line format shows the p99s.
  const std::string line = fmt::format("{}", s);
  INFO(line);
  REQUIRE(line.find(", wait p99 19ms, run p99 20ms") != std::string::npos);
}

TEST_CASE("A timer task's queue wait runs from its due time", "[latency][pool][timer]") {
  ManualClock clock;
  Gate gate;
  ThreadPoolExecutor pool(recordingOn(clock));
  StopOnExit stop(gate, pool);
  Counter started;
  auto busy = pool.submit([&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  auto timed = pool.schedule([] { return 7; }, 10ms);
  clock.advance(10ms);  // due: queued behind the busy task
  clock.advance(7ms);   // the busy task still runs
  gate.open();
  busy.get();
  REQUIRE(timed.get() == 7);
  REQUIRE(coexec::test::eventually([&] { return pool.stats().runTime.count == 2; }));
  const PoolStats s = pool.stats();
  REQUIRE(s.queueWait.count == 2);
  REQUIRE(s.queueWait.max == 7ms);                  // due at 10 ms, started at 17 ms
  REQUIRE(s.queueWait.histogram.sum() == 7ms);      // and the busy task waited 0
  REQUIRE(s.runTime.max == 17ms);                   // the busy task: 0 to 17 ms
}

TEST_CASE("A coroutine task's queue wait and run time are recorded like a plain task's", "[latency][pool][coroutine]") {
  ManualClock clock;
  Gate gate;
  ThreadPoolExecutor pool(recordingOn(clock));
  StopOnExit stop(gate, pool);
  Counter started;
  auto busy = pool.submit([&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  auto coroutine = pool.submit([&clock]() -> coexec::Task<int> {
    clock.advance(4ms);  // its one segment
    co_return 5;
  });
  clock.advance(3ms);
  gate.open();
  busy.get();
  REQUIRE(coroutine.get() == 5);
  REQUIRE(coexec::test::eventually([&] { return pool.stats().runTime.count == 2; }));
  const PoolStats s = pool.stats();
  REQUIRE(s.queueWait.count == 2);
  REQUIRE(s.queueWait.max == 3ms);            // the coroutine task waited behind the busy one
  REQUIRE(s.runTime.max == 4ms);              // the coroutine task
  REQUIRE(s.runTime.histogram.sum() == 7ms);  // and the busy one: 0 to 3 ms
}

TEST_CASE("Samples of threads that exited stay in the pool's histograms", "[latency][pool][lifecycle]") {
  ManualClock clock;
  ThreadPoolOptions options = recordingOn(clock);
  options.corePoolSize = 0;
  options.maximumPoolSize = 2;
  options.keepAliveTime = 1s;
  options.workQueue = WorkQueue::unbounded();  // (synchronous(): a thread still finishing its last task would refuse the next)
  ThreadPoolExecutor pool(options);
  constexpr int kTasks = 20;
  for (int i = 0; i < kTasks; ++i)
    pool.submit([] {}).get();
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  const PoolStats s = pool.stats();
  REQUIRE(s.poolSize == 0);
  REQUIRE(s.queueWait.count == kTasks);
  REQUIRE(s.runTime.count == kTasks);
}

TEST_CASE("Recording is off by default, and a RejectedExecution's snapshot carries no histogram",
          "[latency][pool]") {
  {
    ThreadPoolExecutor pool(1, 1, 0s, WorkQueue::unbounded());
    pool.submit([] {}).get();
    pool.shutdown();
    REQUIRE(pool.awaitTermination(kLong));
    const PoolStats s = pool.stats();
    REQUIRE(s.taskCount == 1);
    REQUIRE(s.queueWait.count == 0);
    REQUIRE(s.runTime.count == 0);
    REQUIRE(pool.latency().queueWait.count() == 0);
    REQUIRE(fmt::format("{}", s).find("wait p99") == std::string::npos);
  }
  ManualClock clock;
  Gate gate;
  ThreadPoolOptions options = recordingOn(clock);
  options.workQueue = WorkQueue::bounded(1);
  options.rejectionPolicy = RejectionPolicy::abort();
  ThreadPoolExecutor pool(options);
  StopOnExit stop(gate, pool);
  pool.submit([] {}).get();
  REQUIRE(coexec::test::eventually([&] { return pool.stats().runTime.count == 1; }));
  Counter started;
  coexec::test::executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  pool.execute([] {});  // fills the queue
  try {
    pool.execute([] {});
    FAIL("the full pool admitted a task");
  } catch (const RejectedExecution& e) {
    REQUIRE(e.snapshot().queueWait.count == 0);
  }
  REQUIRE(pool.stats().queueWait.count >= 2);
}

TEST_CASE("Every task a busy pool runs is recorded once, while stats() reads concurrently",
          "[latency][pool][stress]") {
  ThreadPoolOptions options;
  options.name = "lat-stress";
  options.corePoolSize = 2;
  options.maximumPoolSize = 2;
  options.workQueue = WorkQueue::unbounded();
  options.recordLatency = true;
  ThreadPoolExecutor pool(options);
  constexpr int kTasks = 20'000;
  std::atomic<bool> done{false};
  std::uint64_t lastSeen = 0;
  bool monotonic = true;
  std::thread reader([&] {
    while (!done.load()) {
      const PoolStats s = pool.stats();
      if (s.queueWait.count < lastSeen) monotonic = false;
      lastSeen = s.queueWait.count;
    }
  });
  coexec::test::JoinOnExit joinReader(reader, [&done] { done.store(true); });
  std::vector<coexec::Future<void>> futures;
  futures.reserve(kTasks);
  std::atomic<int> ran{0};
  for (int i = 0; i < kTasks; ++i)
    futures.push_back(pool.submit([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));
  // Forks from the pool's own threads (local queues, joins) too.
  auto forks = pool.submit([&pool, &ran]() -> coexec::Task<void> {
    for (int i = 0; i < 100; ++i) {
      auto child = pool.submit([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
      co_await child;
    }
  });
  for (auto& f : futures)
    f.get();
  forks.get();
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  done.store(true);
  reader.join();
  REQUIRE(ran.load() == kTasks + 100);
  const PoolStats s = pool.stats();
  REQUIRE(monotonic);
  REQUIRE(s.queueWait.count == kTasks + 101);  // every task, the coroutine one included
  REQUIRE(s.runTime.count == kTasks + 101);
  REQUIRE(s.queueWait.histogram.count() == s.queueWait.count);
  REQUIRE(s.runTime.p50 <= s.runTime.p99);
  REQUIRE(s.runTime.p99 <= s.runTime.max);
}

TEST_CASE("the latency snippet of docs/production.md runs as shown", "[latency][docs]") {
  std::string printed;
  {
    // snippet:begin production-latency
    coexec::ThreadPoolOptions options = coexec::Executors::fixed(8, 1024, "io");
    options.recordLatency = true;
    coexec::ThreadPoolExecutor pool(std::move(options));
    // ... the service runs; then, say once a minute:
    const coexec::PoolStats stats = pool.stats();
    if (stats.queueWait.p99 > 50ms) fmt::print(stderr, "behind: {}\n", stats);
    // snippet:end
    REQUIRE(stats.queueWait.count == 0);  // nothing ran yet
    pool.submit([] {}).get();
    REQUIRE(coexec::test::eventually([&] { return pool.stats().runTime.count == 1; }));
    printed = fmt::format("{}", pool.stats());
  }
  INFO(printed);
  REQUIRE(printed.find(", wait p99 ") != std::string::npos);
  REQUIRE(printed.find(", run p99 ") != std::string::npos);
}
