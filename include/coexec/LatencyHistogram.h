// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "coexec/Export.h"
#include "coexec/detail/StandardLibrary.h"

namespace coexec {

namespace detail {
struct LatencyAccess;
}

/// A histogram of durations with log-linear buckets (HdrHistogram's layout):
/// every duration below 64 ns has a bucket of its own; above, each power of
/// two is split into 32 buckets of equal width, up to 2^44 ns (about 4.9
/// hours), beyond which everything shares the last bucket (max() stays
/// exact).
///
/// The error bound: a percentile is reported as the upper edge of the
/// bucket that holds it (capped at max()), so it is never below the true
/// value and at most 1/32 of it (3.125 %) above, exact below 64 ns.
/// sum() and max() are exact.
///
/// A histogram with no sample holds no bucket array (one allocation of
/// kBucketCount counters, 10 KiB, comes with the first sample or merge).
///
/// Thread safety: a plain value; copy freely. Not safe to modify from two
/// threads at once (the pool keeps one recorder per worker and merges them
/// into a LatencyHistogram only in stats() and latency()).
class COEXEC_EXPORT LatencyHistogram {
 public:
  /// log2 of the buckets each power of two is split into (32).
  static constexpr unsigned kSubBucketBits = 5;
  /// Durations below this many nanoseconds each have a bucket of their own.
  static constexpr std::uint64_t kExactBelow = std::uint64_t{2} << kSubBucketBits;
  /// The highest bit of a duration that still gets its own buckets: from
  /// 2^(kTopBit + 1) ns on, all share the last bucket.
  static constexpr unsigned kTopBit = 43;
  /// The number of buckets: 64 exact ones, then 32 per power of two.
  static constexpr std::size_t kBucketCount =
      kExactBelow + (kTopBit - kSubBucketBits) * (std::size_t{1} << kSubBucketBits);
  /// The bound on a reported percentile's relative error (see the class).
  static constexpr double kRelativeError = 1.0 / double(std::uint64_t{1} << kSubBucketBits);

  /// The bucket `value` falls in (a negative value counts as 0). Never throws.
  [[nodiscard]] static std::size_t bucketIndex(std::chrono::nanoseconds value) noexcept;
  /// The smallest duration bucket `index` holds. Precondition: index < kBucketCount.
  [[nodiscard]] static std::chrono::nanoseconds bucketLowerBound(std::size_t index) noexcept;
  /// The largest duration bucket `index` holds (inclusive);
  /// `nanoseconds::max()` for the last bucket. Precondition: index < kBucketCount.
  [[nodiscard]] static std::chrono::nanoseconds bucketUpperBound(std::size_t index) noexcept;

  /// Adds one sample (a negative duration counts as 0). Never blocks.
  /// \throws std::bad_alloc on the first sample, if the bucket array cannot
  /// be allocated (the histogram is then unchanged).
  void record(std::chrono::nanoseconds value);
  /// Adds every sample of `other` to this histogram. Never blocks.
  /// \throws std::bad_alloc as record() does (this histogram is then unchanged).
  void merge(const LatencyHistogram& other);

  /// The number of samples. Never throws.
  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  /// The sum of the samples. Never throws.
  [[nodiscard]] std::chrono::nanoseconds sum() const noexcept {
    return std::chrono::nanoseconds(static_cast<std::int64_t>(sum_));
  }
  /// The largest sample; 0 without any. Never throws.
  [[nodiscard]] std::chrono::nanoseconds max() const noexcept {
    return std::chrono::nanoseconds(static_cast<std::int64_t>(max_));
  }
  /// The `quantile` of the samples (0.5 for the median, 0.99 for p99): the
  /// upper edge of the bucket holding the ceil(quantile x count())-th
  /// smallest sample (the smallest for 0), capped at max(); see the class
  /// for the error bound. 0 without samples. Never blocks.
  /// \throws std::invalid_argument if `quantile` is not within [0, 1].
  [[nodiscard]] std::chrono::nanoseconds percentile(double quantile) const;
  /// The samples in bucket `index` (0 for an index past the last). Never throws.
  [[nodiscard]] std::uint64_t countAt(std::size_t index) const noexcept;
  /// The samples in the buckets whose upper edge is at most `bound`: the
  /// samples at or below `bound`, give or take those of the one bucket that
  /// straddles it (at most 3.125 % below `bound`), which are not counted.
  /// What a Prometheus `le` bucket counts (see writePrometheus()). Never throws.
  [[nodiscard]] std::uint64_t countAtOrBelow(std::chrono::nanoseconds bound) const noexcept;

 private:
  friend struct detail::LatencyAccess;
  void ensureBuckets();
  std::vector<std::uint64_t> counts_;  // kBucketCount entries once there is a sample, else empty
  std::uint64_t count_ = 0;
  std::uint64_t sum_ = 0;  // nanoseconds
  std::uint64_t max_ = 0;  // nanoseconds
};

/// The figures an operator reads off a LatencyHistogram, with the histogram
/// behind them (for exporters, and for other percentiles).
///
/// Thread safety: a plain value; copy freely.
struct LatencySummary {
  std::uint64_t count = 0;           ///< the number of samples
  std::chrono::nanoseconds p50{0};   ///< the median
  std::chrono::nanoseconds p90{0};   ///< the 90th percentile
  std::chrono::nanoseconds p99{0};   ///< the 99th percentile
  std::chrono::nanoseconds p999{0};  ///< the 99.9th percentile
  std::chrono::nanoseconds max{0};   ///< the largest sample (exact)
  LatencyHistogram histogram;        ///< every sample; the percentiles above are its percentile()

  /// The summary of `histogram` (which it keeps). Never blocks.
  /// \throws std::bad_alloc.
  [[nodiscard]] static LatencySummary of(LatencyHistogram histogram);
};

/// A pool's latency histograms (ThreadPoolExecutor::latency()), over its
/// lifetime, on its clock: `queueWait` from a task's admission (a timer
/// task: its due time) to its start, `runTime` from its start to its end.
/// See ThreadPoolOptions::recordLatency for which tasks are recorded.
///
/// Thread safety: a plain value; copy freely.
struct PoolLatency {
  LatencyHistogram queueWait;  ///< admission (or due time) to start
  LatencyHistogram runTime;    ///< start to end
};

}  // namespace coexec
