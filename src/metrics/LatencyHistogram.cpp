// SPDX-License-Identifier: BSL-1.0
#include "coexec/LatencyHistogram.h"

// Bucket layout (see LatencyHistogram): index v for v < 64; above, for a
// value whose highest set bit is b (6 <= b <= kTopBit), the 32 buckets of
// [2^b, 2^(b+1)) follow those of the lower powers, each 2^(b-5) wide. The
// relative width of a bucket, 2^(b-5) / its lower edge, is at most 1/32.

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "metrics/LatencyRecorder.h"

namespace coexec {
namespace {

constexpr std::uint64_t kSubBuckets = std::uint64_t{1} << LatencyHistogram::kSubBucketBits;
constexpr unsigned kFirstBit = LatencyHistogram::kSubBucketBits + 1;  // the first power with shared buckets

std::uint64_t toTicks(std::chrono::nanoseconds value) noexcept {
  return value.count() <= 0 ? 0 : static_cast<std::uint64_t>(value.count());
}

}  // namespace

namespace detail {

std::size_t latencyBucket(std::uint64_t ns) noexcept {
  if (ns < LatencyHistogram::kExactBelow) return static_cast<std::size_t>(ns);
  const unsigned bit = 63 - static_cast<unsigned>(std::countl_zero(ns));
  if (bit > LatencyHistogram::kTopBit) return LatencyHistogram::kBucketCount - 1;
  const unsigned shift = bit - LatencyHistogram::kSubBucketBits;
  return static_cast<std::size_t>(LatencyHistogram::kExactBelow + (bit - kFirstBit) * kSubBuckets +
                                  ((ns >> shift) - kSubBuckets));
}

}  // namespace detail

std::size_t LatencyHistogram::bucketIndex(std::chrono::nanoseconds value) noexcept {
  return detail::latencyBucket(toTicks(value));
}

std::chrono::nanoseconds LatencyHistogram::bucketLowerBound(std::size_t index) noexcept {
  if (index < kExactBelow) return std::chrono::nanoseconds(static_cast<std::int64_t>(index));
  const std::size_t above = index - kExactBelow;
  const unsigned bit = kFirstBit + static_cast<unsigned>(above / kSubBuckets);
  const std::uint64_t sub = kSubBuckets + above % kSubBuckets;
  return std::chrono::nanoseconds(static_cast<std::int64_t>(sub << (bit - kSubBucketBits)));
}

std::chrono::nanoseconds LatencyHistogram::bucketUpperBound(std::size_t index) noexcept {
  if (index + 1 >= kBucketCount) return std::chrono::nanoseconds::max();
  return bucketLowerBound(index + 1) - std::chrono::nanoseconds(1);
}

void LatencyHistogram::ensureBuckets() {
  if (counts_.empty()) counts_.assign(kBucketCount, 0);
}

void LatencyHistogram::record(std::chrono::nanoseconds value) {
  ensureBuckets();
  const std::uint64_t ns = toTicks(value);
  ++counts_[detail::latencyBucket(ns)];
  ++count_;
  sum_ += ns;
  max_ = std::max(max_, ns);
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
  if (other.count_ == 0) return;
  ensureBuckets();
  for (std::size_t i = 0; i < kBucketCount; ++i)
    counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  max_ = std::max(max_, other.max_);
}

std::chrono::nanoseconds LatencyHistogram::percentile(double quantile) const {
  if (!(quantile >= 0.0 && quantile <= 1.0)) {
    throw std::invalid_argument(
        fmt::format("coexec::LatencyHistogram::percentile: quantile {} is not within [0, 1]", quantile));
  }
  if (count_ == 0) return std::chrono::nanoseconds(0);
  const auto rank = std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::ceil(quantile * static_cast<double>(count_))));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBucketCount; ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::min(bucketUpperBound(i), max());
  }
  return max();
}

std::uint64_t LatencyHistogram::countAt(std::size_t index) const noexcept {
  return index < counts_.size() ? counts_[index] : 0;
}

std::uint64_t LatencyHistogram::countAtOrBelow(std::chrono::nanoseconds bound) const noexcept {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < counts_.size() && bucketUpperBound(i) <= bound; ++i)
    total += counts_[i];
  return total;
}

LatencySummary LatencySummary::of(LatencyHistogram histogram) {
  LatencySummary summary;
  summary.count = histogram.count();
  summary.p50 = histogram.percentile(0.5);
  summary.p90 = histogram.percentile(0.9);
  summary.p99 = histogram.percentile(0.99);
  summary.p999 = histogram.percentile(0.999);
  summary.max = histogram.max();
  summary.histogram = std::move(histogram);
  return summary;
}

namespace detail {

LatencyRecorder::LatencyRecorder() : counts_(new std::atomic<std::uint64_t>[LatencyHistogram::kBucketCount]) {
  for (std::size_t i = 0; i < LatencyHistogram::kBucketCount; ++i)
    counts_[i].store(0, std::memory_order_relaxed);
}

void LatencyRecorder::addTo(LatencyHistogram& histogram) const {
  // Relaxed: the writer may be recording meanwhile; the count is the sum of
  // the buckets read, so that count() and the buckets agree.
  LatencyAccess::addFrom(histogram, *this);
}

void LatencyAccess::addFrom(LatencyHistogram& histogram, const LatencyRecorder& recorder) {
  const bool wasEmpty = histogram.counts_.empty();
  histogram.ensureBuckets();
  std::uint64_t count = 0;
  for (std::size_t i = 0; i < LatencyHistogram::kBucketCount; ++i) {
    const std::uint64_t n = recorder.counts_[i].load(std::memory_order_relaxed);
    histogram.counts_[i] += n;
    count += n;
  }
  if (count == 0) {
    if (wasEmpty) histogram.counts_.clear();  // still a histogram without samples (see LatencyHistogram)
    return;
  }
  histogram.count_ += count;
  histogram.sum_ += recorder.sum_.load(std::memory_order_relaxed);
  histogram.max_ = std::max(histogram.max_, recorder.max_.load(std::memory_order_relaxed));
}

}  // namespace detail
}  // namespace coexec
