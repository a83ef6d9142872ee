// SPDX-License-Identifier: BSL-1.0
#pragma once

// The pool's side of LatencyHistogram: a histogram one thread records into
// without a lock while others read it (stats(), latency()).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "coexec/LatencyHistogram.h"

namespace coexec::detail {

/// The bucket of a duration of `ns` nanoseconds (LatencyHistogram::bucketIndex).
std::size_t latencyBucket(std::uint64_t ns) noexcept;

/// A LatencyHistogram with one writer and any number of readers: the writer
/// (a pool worker, for its own tasks) updates each counter with a relaxed
/// load and store, no read-modify-write; readers load them relaxed and may
/// see a sample's bucket without its sum (a snapshot taken while the worker
/// records), never a torn counter. 10 KiB of counters, allocated at
/// construction.
class LatencyRecorder {
 public:
  /// \throws std::bad_alloc.
  LatencyRecorder();
  /// Adds one sample. For the one writer; never blocks, never throws.
  void record(std::chrono::nanoseconds value) noexcept {
    const std::uint64_t ns = value.count() <= 0 ? 0 : static_cast<std::uint64_t>(value.count());
    std::atomic<std::uint64_t>& bucket = counts_[latencyBucket(ns)];
    bucket.store(bucket.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    sum_.store(sum_.load(std::memory_order_relaxed) + ns, std::memory_order_relaxed);
    if (ns > max_.load(std::memory_order_relaxed)) max_.store(ns, std::memory_order_relaxed);
  }
  /// Adds what has been recorded so far to `histogram`. Any thread.
  /// \throws std::bad_alloc.
  void addTo(LatencyHistogram& histogram) const;

 private:
  friend struct LatencyAccess;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;
  std::atomic<std::uint64_t> sum_{0};
  std::atomic<std::uint64_t> max_{0};
};

/// A worker's two recorders (PoolLatency's two histograms).
struct WorkerLatency {
  LatencyRecorder queueWait;
  LatencyRecorder runTime;
};

/// Run times that end on threads that are not the pool's (a coroutine task
/// finishing on another pool's thread, an io_context's): any thread records
/// under `mutex`. `runTime` exists only in a pool that records latency.
struct OutsideLatency {
  std::mutex mutex;
  std::unique_ptr<LatencyRecorder> runTime;
  void record(std::chrono::nanoseconds value) noexcept {
    std::lock_guard lock(mutex);
    runTime->record(value);
  }
};

/// LatencyHistogram's friend: fills a histogram from a recorder.
struct LatencyAccess {
  /// Adds what `recorder` holds to `histogram`; never allocates if the
  /// histogram holds buckets already. \throws std::bad_alloc otherwise.
  static void addFrom(LatencyHistogram& histogram, const LatencyRecorder& recorder);
  /// Gives `histogram` its bucket array now. \throws std::bad_alloc.
  static void reserve(LatencyHistogram& histogram) { histogram.ensureBuckets(); }
};

/// Gives both histograms their bucket arrays now (for a merge that must not
/// throw later). \throws std::bad_alloc.
inline void reserveLatency(PoolLatency& latency) {
  LatencyAccess::reserve(latency.queueWait);
  LatencyAccess::reserve(latency.runTime);
}

}  // namespace coexec::detail
