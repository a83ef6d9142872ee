// SPDX-License-Identifier: BSL-1.0
#include "coexec/PoolStats.h"

#include "coexec/Format.h"
#include "coexec/WorkQueue.h"

namespace coexec {

std::string_view toString(PoolState state) noexcept {
  switch (state) {
    case PoolState::running: return "RUNNING";
    case PoolState::shutdown: return "SHUTDOWN";
    case PoolState::stop: return "STOP";
    case PoolState::terminated: return "TERMINATED";
  }
  return "UNKNOWN";
}

}  // namespace coexec

fmt::format_context::iterator fmt::formatter<coexec::PoolState>::format(coexec::PoolState state,
                                                                        fmt::format_context& ctx) const {
  return fmt::formatter<std::string_view>::format(coexec::toString(state), ctx);
}

namespace {

/// A duration as a person reads it: `850ns`, `12.3us`, `4.56ms`, `1.2s`.
std::string readable(std::chrono::nanoseconds d) {
  const double ns = static_cast<double>(d.count());
  if (ns < 1e3) return fmt::format("{}ns", d.count());
  if (ns < 1e6) return fmt::format("{:.3g}us", ns / 1e3);
  if (ns < 1e9) return fmt::format("{:.3g}ms", ns / 1e6);
  return fmt::format("{:.3g}s", ns / 1e9);
}

/// `, wait p99 1.2ms, run p99 85us` once a task has been recorded.
std::string latency(const coexec::PoolStats& s) {
  if (s.queueWait.count == 0 && s.runTime.count == 0) return {};
  return fmt::format(", wait p99 {}, run p99 {}", readable(s.queueWait.p99), readable(s.runTime.p99));
}

}  // namespace

fmt::format_context::iterator fmt::formatter<coexec::PoolStats>::format(const coexec::PoolStats& s,
                                                                        fmt::format_context& ctx) const {
  std::string capacity = s.queueCapacity == coexec::WorkQueue::kUnboundedCapacity ? std::string("unbounded")
                                                                                  : fmt::to_string(s.queueCapacity);
  std::string text = fmt::format(
      "pool '{}' {}: size {} (core {}, max {}, largest {}), active {}, queued {}/{}{}, tasks {} (completed {}, "
      "failed {}, cancelled {}, discarded {}, drained {}), rejected {}{}{}{}{}",
      s.name, s.state, s.poolSize, s.corePoolSize, s.maximumPoolSize, s.largestPoolSize, s.activeCount, s.queueSize,
      capacity, s.localQueueSize == 0 ? std::string() : fmt::format(" (+{} local)", s.localQueueSize), s.taskCount,
      s.completedTaskCount, s.failedCount, s.cancelledCount, s.discardedCount, s.drainedCount, s.rejectedCount,
      s.waitedForRoomCount == 0 && s.waitingProducers == 0
          ? std::string()
          : fmt::format(", waited for room {} (waiting now {})", s.waitedForRoomCount, s.waitingProducers),
      s.scheduledCount == 0 ? std::string() : fmt::format(", scheduled {}", s.scheduledCount),
      s.temporaryThreadRuns == 0 ? std::string() : fmt::format(", temporary runs {}", s.temporaryThreadRuns),
      latency(s));
  return fmt::formatter<std::string_view>::format(text, ctx);
}
