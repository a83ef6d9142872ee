// SPDX-License-Identifier: BSL-1.0
#pragma once

// The pool's statistics besides its workers' own counters: the counters of
// the threads that are not its workers (and of exited workers), the
// rejected, discarded and drained counts, and the latency recorded outside
// the workers and by exited workers. stats() and latency() sum these with
// the live workers' own (PoolWorker.h: PoolCounters, WorkerLatency).
//
// Invariants:
// - Every outcome counted (completed, failed, cancelled) was counted in
//   `tasks` before: admission adds to `tasks` before anyone can run the
//   task, and an outcome is added with a release store or read-modify-write
//   after it. sum() reads the outcomes first (acquire) and `tasks` last, so
//   a snapshot never shows more outcomes than tasks.
// - A worker that exits adds its counters and its latency recorders here
//   (addExitedLocked()), under the pool's mutex, which stats() and latency()
//   hold: no snapshot counts them twice or misses them. The latency buckets
//   exist from the pool's construction, so an exit never allocates.
// - The outside counters are written by many threads (read-modify-writes);
//   a worker's own only by that worker, or under the pool's mutex
//   (PoolCounters). The rejected, discarded and drained counts are guarded
//   by the pool's mutex.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "coexec/LatencyHistogram.h"
#include "engine/PoolWorker.h"
#include "metrics/LatencyRecorder.h"

namespace coexec::detail {

class Tallies {
 public:
  /// `recordLatency`: ThreadPoolOptions::recordLatency; the recorders are
  /// made (and their buckets reserved) now. \throws std::bad_alloc.
  explicit Tallies(bool recordLatency) {
    if (recordLatency) {
      reserveLatency(exitedLatency_);
      outsideLatency_.runTime = std::make_unique<LatencyRecorder>();
    }
  }

  /// The counters of the threads that are not the pool's workers.
  [[nodiscard]] PoolCounters& outside() noexcept { return outside_; }

  /// The sum of `field` over the outside counters and each worker of
  /// `workers`, each read with `order` (see the invariants for the order in
  /// which stats() reads the fields).
  template <class Workers>
  [[nodiscard]] std::uint64_t sum(std::atomic<std::uint64_t> PoolCounters::*field, const Workers& workers,
                                  std::memory_order order) const noexcept {
    std::uint64_t total = (outside_.*field).load(order);
    for (const PoolWorker& worker : workers)
      total += (worker.counters.*field).load(order);
    return total;
  }
  /// Workers running an item now, summed the same way.
  template <class Workers>
  [[nodiscard]] std::size_t active(const Workers& workers) const noexcept {
    std::size_t total = outside_.active.load(std::memory_order_relaxed);
    for (const PoolWorker& worker : workers)
      total += worker.counters.active.load(std::memory_order_relaxed);
    return total;
  }

  /// Requires: the pool's mutex held; `gone` exits and writes its counters
  /// no more. Adds its counts and latency here.
  void addExitedLocked(const PoolWorker& gone) noexcept {
    const PoolCounters& counters = gone.counters;
    outside_.tasks.fetch_add(counters.tasks.load(std::memory_order_relaxed), std::memory_order_relaxed);
    outside_.completed.fetch_add(counters.completed.load(std::memory_order_relaxed), std::memory_order_relaxed);
    outside_.failed.fetch_add(counters.failed.load(std::memory_order_relaxed), std::memory_order_relaxed);
    outside_.cancelled.fetch_add(counters.cancelled.load(std::memory_order_relaxed), std::memory_order_relaxed);
    if (gone.latency != nullptr) {  // buckets reserved at construction: no allocation here
      gone.latency->queueWait.addTo(exitedLatency_.queueWait);
      gone.latency->runTime.addTo(exitedLatency_.runTime);
    }
  }

  /// A coroutine task's run time, recorded on a thread that is not one of
  /// the pool's workers. Requires: recording latency. Takes a lock of its
  /// own; never allocates.
  void recordOutsideRun(std::chrono::nanoseconds ran) noexcept { outsideLatency_.record(ran); }
  /// Requires: the pool's mutex held, recording latency. Adds the exited
  /// workers' and the outside latency, then each of `workers`', to `merged`.
  /// \throws std::bad_alloc.
  template <class Workers>
  void mergeLatencyLocked(PoolLatency& merged, const Workers& workers) const {
    merged.queueWait.merge(exitedLatency_.queueWait);
    merged.runTime.merge(exitedLatency_.runTime);
    outsideLatency_.runTime->addTo(merged.runTime);
    for (const PoolWorker& worker : workers) {
      if (worker.latency == nullptr) continue;  // (every worker has them when recording is on)
      worker.latency->queueWait.addTo(merged.queueWait);
      worker.latency->runTime.addTo(merged.runTime);
    }
  }

  // Requires: the pool's mutex held, for each of these.
  void countRejectedLocked(std::uint64_t tasks = 1) noexcept { rejected_ += tasks; }
  void countDiscardedLocked() noexcept { ++discarded_; }
  void countDrainedLocked() noexcept { ++drained_; }
  [[nodiscard]] std::uint64_t rejectedLocked() const noexcept { return rejected_; }
  [[nodiscard]] std::uint64_t discardedLocked() const noexcept { return discarded_; }
  [[nodiscard]] std::uint64_t drainedLocked() const noexcept { return drained_; }

 private:
  PoolCounters outside_;  // its own cache line (PoolCounters is aligned)
  std::uint64_t rejected_ = 0;
  std::uint64_t discarded_ = 0;
  std::uint64_t drained_ = 0;
  PoolLatency exitedLatency_;
  OutsideLatency outsideLatency_;
};

}  // namespace coexec::detail
