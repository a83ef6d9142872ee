// SPDX-License-Identifier: BSL-1.0
// Runs pools to a known ledger and writes, for check_exposition.py:
//
//   prometheus_ExpositionDump EXPOSITION_FILE EXPECTED_FILE
//
// - EXPOSITION_FILE: writePrometheus() of three pools (one call, the
//   several-pool overload): the `ledger` pool while busy, labelled
//   phase="busy" and with a label value that needs every escape; the same
//   pool once terminated, phase="final"; an idle pool with an unbounded
//   queue.
// - EXPECTED_FILE: JSON, the same snapshots field by field under PoolStats'
//   own names, with the full label set each pool's samples must carry, and
//   each latency histogram's count, sum and non-empty fine buckets (their
//   upper bounds), from which the script derives the `le` buckets itself.
//
// The ledger (core 1, max 2, a queue of one, abort()): A runs on the core
// thread, B waits in the queue, C starts the second thread, two more tasks
// are rejected; then A, B, C complete, two tasks fail, one is cancelled at
// submission. The ledger pool records latency (ThreadPoolOptions::
// recordLatency): busy, 2 queue waits (A, C) and no run time; final, 5 of
// each (A, B, C and the two failures). Exit 0 once the files are written; 1 if a snapshot is not the
// ledger's (the numbers below), with what differs on stderr.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "coexec/CancellationToken.h"
#include "coexec/Errors.h"
#include "coexec/Prometheus.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/WorkQueue.h"

using namespace std::chrono_literals;

namespace {

/// Counts arrivals and opens once; every wait is bounded (10 s) and ends the
/// program with exit code 1 when it runs out, instead of hanging.
class Signal {
 public:
  void arrive() {
    std::lock_guard lock(mutex_);
    ++count_;
    cv_.notify_all();
  }
  void waitFor(int n) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, 10s, [&] { return count_ >= n; })) fail(fmt::format("waited 10 s for {} arrivals", n));
  }
  [[noreturn]] static void fail(const std::string& what) {
    std::fprintf(stderr, "prometheus_ExpositionDump: %s\n", what.c_str());
    std::exit(1);
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_ = 0;
};

/// Opens `gate` when the scope ends, also by an exception, so that no
/// blocked task keeps the pool's destructor waiting.
struct OpenOnExit {
  Signal& gate;
  ~OpenOnExit() { gate.arrive(); }
};

int failures = 0;

void expect(std::string_view what, std::uint64_t actual, std::uint64_t expected) {
  if (actual == expected) return;
  std::fprintf(stderr, "%.*s: %llu, expected %llu\n", static_cast<int>(what.size()), what.data(),
               static_cast<unsigned long long>(actual), static_cast<unsigned long long>(expected));
  ++failures;
}

std::string jsonString(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json(const coexec::LatencySummary& summary) {
  std::string buckets;
  for (std::size_t i = 0; i < coexec::LatencyHistogram::kBucketCount; ++i) {
    if (const std::uint64_t n = summary.histogram.countAt(i); n != 0) {
      buckets += fmt::format("{}[{}, {}]", buckets.empty() ? "" : ", ",
                             coexec::LatencyHistogram::bucketUpperBound(i).count(), n);
    }
  }
  return fmt::format("{{\"count\": {}, \"sumNs\": {}, \"buckets\": [{}]}}", summary.count,
                     summary.histogram.sum().count(), buckets);
}

std::string json(const coexec::LabelledStats& pool) {
  const coexec::PoolStats& s = pool.stats;
  std::string labels = fmt::format("{}: {}", jsonString("pool"), jsonString(s.name));
  for (const auto& [name, value] : pool.labels)
    labels += fmt::format(", {}: {}", jsonString(name), jsonString(value));
  return fmt::format(
      "{{\"labels\": {{{}}}, \"state\": {}, \"stats\": {{\"corePoolSize\": {}, \"maximumPoolSize\": {}, "
      "\"poolSize\": {}, \"activeCount\": {}, \"largestPoolSize\": {}, \"taskCount\": {}, "
      "\"completedTaskCount\": {}, \"queueSize\": {}, \"localQueueSize\": {}, \"queueCapacity\": {}, "
      "\"rejectedCount\": {}, \"waitedForRoomCount\": {}, \"waitingProducers\": {}, \"failedCount\": {}, "
      "\"cancelledCount\": {}, \"discardedCount\": {}, \"drainedCount\": {}, \"scheduledCount\": {}, "
      "\"temporaryThreadRuns\": {}}}, \"latency\": {{\"queueWait\": {}, \"runTime\": {}}}}}",
      labels, jsonString(coexec::toString(s.state)), s.corePoolSize, s.maximumPoolSize, s.poolSize, s.activeCount,
      s.largestPoolSize, s.taskCount, s.completedTaskCount, s.queueSize, s.localQueueSize, s.queueCapacity,
      s.rejectedCount, s.waitedForRoomCount, s.waitingProducers, s.failedCount, s.cancelledCount, s.discardedCount,
      s.drainedCount, s.scheduledCount, s.temporaryThreadRuns, json(s.queueWait), json(s.runTime));
}

/// The ledger pool's two snapshots: busy, then terminated.
std::pair<coexec::PoolStats, coexec::PoolStats> runLedger() {
  Signal started;
  Signal gate;
  coexec::ThreadPoolOptions options;
  options.name = "ledger";
  options.corePoolSize = 1;
  options.maximumPoolSize = 2;
  options.workQueue = coexec::WorkQueue::bounded(1);
  options.rejectionPolicy = coexec::RejectionPolicy::abort();
  options.recordLatency = true;
  coexec::ThreadPoolExecutor pool(std::move(options));
  OpenOnExit release{gate};
  const auto blocked = [&] {
    started.arrive();
    gate.waitFor(1);
  };
  auto a = pool.submit(blocked);
  started.waitFor(1);
  auto b = pool.submit(blocked);
  auto c = pool.submit(blocked);
  started.waitFor(2);
  for (int i = 0; i < 2; ++i) {
    try {
      pool.execute([] {});
      Signal::fail("a task was admitted to the full pool");
    } catch (const coexec::RejectedExecution&) {
    }
  }
  const coexec::PoolStats busy = pool.stats();

  gate.arrive();
  a.get();
  b.get();
  c.get();
  for (int i = 0; i < 2; ++i) {
    auto failing = pool.submit([]() -> int { throw std::runtime_error("task failed"); });
    try {
      (void)failing.get();
      Signal::fail("the failing task returned");
    } catch (const std::runtime_error&) {
    }
  }
  coexec::CancellationSource source;
  source.requestCancellation();
  auto cancelled = pool.submit([] {}, source.token());
  try {
    cancelled.get();
    Signal::fail("the task cancelled at submission ran");
  } catch (const coexec::OperationCancelled&) {
  }
  pool.shutdown();
  if (!pool.awaitTermination(10s)) Signal::fail("the pool did not terminate within 10 s");
  return {busy, pool.stats()};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: prometheus_ExpositionDump EXPOSITION_FILE EXPECTED_FILE\n");
    return 2;
  }
  const auto [busy, last] = runLedger();
  expect("busy: poolSize", busy.poolSize, 2);
  expect("busy: activeCount", busy.activeCount, 2);
  expect("busy: queueSize", busy.queueSize, 1);
  expect("busy: taskCount", busy.taskCount, 3);
  expect("busy: rejectedCount", busy.rejectedCount, 2);
  expect("final: taskCount", last.taskCount, 6);
  expect("final: completedTaskCount", last.completedTaskCount, 3);
  expect("final: failedCount", last.failedCount, 2);
  expect("final: cancelledCount", last.cancelledCount, 1);
  expect("final: rejectedCount", last.rejectedCount, 2);
  expect("final: largestPoolSize", last.largestPoolSize, 2);
  expect("final: poolSize", last.poolSize, 0);
  expect("busy: queueWait.count", busy.queueWait.count, 2);
  expect("busy: runTime.count", busy.runTime.count, 0);
  expect("final: queueWait.count", last.queueWait.count, 5);
  expect("final: runTime.count", last.runTime.count, 5);

  coexec::ThreadPoolExecutor idlePool({.name = "idle", .workQueue = coexec::WorkQueue::unbounded()});
  const coexec::PoolStats idle = idlePool.stats();
  const std::vector<coexec::LabelledStats> pools = {
      {busy, {{"phase", "busy"}, {"note", "a \"quoted\" C:\\path\nand a second line, caf\xc3\xa9"}}},
      {last, {{"phase", "final"}}},
      {idle, {}},
  };
  std::string exposition;
  coexec::writePrometheus(exposition, pools);

  std::string expected = fmt::format("{{\"unboundedCapacity\": {}, \"pools\": [\n",
                                     coexec::WorkQueue::kUnboundedCapacity);
  for (std::size_t i = 0; i < pools.size(); ++i)
    expected += (i == 0 ? "" : ",\n") + json(pools[i]);
  expected += "\n]}\n";

  for (const auto& [path, text] : {std::pair{argv[1], &exposition}, std::pair{argv[2], &expected}}) {
    std::ofstream file(path, std::ios::binary);
    file << *text;
    file.close();
    if (!file) Signal::fail(fmt::format("could not write {}", path));
  }
  return failures == 0 ? 0 : 1;
}
