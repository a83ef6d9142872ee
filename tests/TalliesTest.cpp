// SPDX-License-Identifier: BSL-1.0
// The pool's tallies on their own (src/pool/Tallies.h): sums over the
// outside counters and the live workers', an exited worker's counts and
// latency moved in once, the rejected, discarded and drained counts, and
// the latency merged from the exited workers, the outside recorder and the
// live workers.

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>

#include "Assertions.h"

#include "coexec/LatencyHistogram.h"
#include "engine/PoolWorker.h"
#include "pool/Tallies.h"

using coexec::PoolLatency;
using coexec::detail::PoolCounters;
using coexec::detail::PoolWorker;
using coexec::detail::Tallies;
using coexec::detail::WorkerLatency;
using namespace std::chrono_literals;

TEST_CASE("Tallies: sums cover the outside counters and every live worker, and an exited worker's counts move in once",
          "[pool][stats]") {
  Tallies tallies(/*recordLatency=*/false);
  std::list<PoolWorker> workers(2);
  tallies.outside().tasks.store(3);
  tallies.outside().completed.store(1);
  workers.front().counters.tasks.store(10);
  workers.front().counters.completed.store(7);
  workers.front().counters.active.store(1);
  workers.back().counters.tasks.store(5);
  workers.back().counters.failed.store(2);
  CHECK(tallies.sum(&PoolCounters::tasks, workers, std::memory_order_acquire) == 18);
  CHECK(tallies.sum(&PoolCounters::completed, workers, std::memory_order_acquire) == 8);
  CHECK(tallies.sum(&PoolCounters::failed, workers, std::memory_order_acquire) == 2);
  CHECK(tallies.active(workers) == 1);

  // The first worker exits: its counts move to the tallies, the worker
  // leaves the list, and the sums stay the same.
  tallies.addExitedLocked(workers.front());
  workers.pop_front();
  CHECK(tallies.sum(&PoolCounters::tasks, workers, std::memory_order_acquire) == 18);
  CHECK(tallies.sum(&PoolCounters::completed, workers, std::memory_order_acquire) == 8);
  CHECK(tallies.outside().tasks.load() == 13);

  tallies.countRejectedLocked();
  tallies.countRejectedLocked(4);
  tallies.countDiscardedLocked();
  tallies.countDrainedLocked();
  tallies.countDrainedLocked();
  CHECK(tallies.rejectedLocked() == 5);
  CHECK(tallies.discardedLocked() == 1);
  CHECK(tallies.drainedLocked() == 2);
}

TEST_CASE("Tallies: latency merges the exited workers', the outside recorder's and the live workers' samples",
          "[pool][stats]") {
  Tallies tallies(/*recordLatency=*/true);
  std::list<PoolWorker> workers(2);
  for (PoolWorker& worker : workers) worker.latency = std::make_unique<WorkerLatency>();
  workers.front().latency->queueWait.record(1us);
  workers.front().latency->runTime.record(2us);
  workers.back().latency->runTime.record(3us);
  tallies.recordOutsideRun(4us);

  tallies.addExitedLocked(workers.front());
  workers.pop_front();
  workers.back().latency->runTime.record(5us);

  PoolLatency merged;
  tallies.mergeLatencyLocked(merged, workers);
  CHECK(merged.queueWait.count() == 1);  // the exited worker's
  CHECK(merged.runTime.count() == 4);    // 2 us (exited), 3 us and 5 us (live), 4 us (outside)
}
