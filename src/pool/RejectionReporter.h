// SPDX-License-Identifier: BSL-1.0
#pragma once

// RejectionPolicy::abortWithReport(): the sink and its rate limit, shared by
// every copy of one policy. mutex_ guards the limit's state; the report is
// built and written after it is released, and without any lock of the pool
// (dumpThreads() takes and releases the pool's lock before the sink runs).

#include <chrono>
#include <cstdint>
#include <mutex>

#include "coexec/Clock.h"
#include "coexec/Errors.h"
#include "coexec/RejectionPolicy.h"
#include "coexec/detail/Ref.h"

namespace coexec::detail {

class RejectionReporter final : public RefCounted {
 public:
  RejectionReporter(RejectionPolicy::ReportSink sink, std::chrono::nanoseconds interval)
      : sink_(std::move(sink)), interval_(interval) {}

  /// Writes a report of `error` on `pool` to the sink, unless one was
  /// written less than the interval ago on the pool's clock (then counts the
  /// rejection as suppressed). On the calling thread. Never throws.
  void rejected(ThreadPoolExecutor& pool, const RejectedExecution& error) noexcept;

 private:
  const RejectionPolicy::ReportSink sink_;
  const std::chrono::nanoseconds interval_;
  std::mutex mutex_;
  bool reported_ = false;         // guarded by mutex_: a report was written
  Clock::time_point last_{};      // guarded by mutex_: when
  std::uint64_t suppressed_ = 0;  // guarded by mutex_: rejections since, not reported
};

}  // namespace coexec::detail
