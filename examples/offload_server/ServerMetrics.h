// SPDX-License-Identifier: BSL-1.0
#pragma once

// The server's own counters, and the /metrics page that shows them next to
// the pool's statistics in the Prometheus text exposition format.

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include <coexec/PoolStats.h>

namespace offload {

/// Request and connection counters, updated by the io threads.
///
/// Thread safety: every member may be called from any thread. The counters
/// are relaxed atomics: each is exact on its own, and a snapshot of several
/// (snapshot()) is not one instant's.
class ServerMetrics {
 public:
  /// The status codes counted one by one; any other lands in "other".
  static constexpr std::array<int, 12> kStatusCodes = {200, 400, 404, 405, 408, 413, 414, 431, 500, 501, 503, 505};

  /// Counts one response with this status code. Never blocks.
  void countResponse(int status) noexcept;
  /// Counts one /work request the pool refused (answered 503). Never blocks.
  void countRejected() noexcept { rejected_.fetch_add(1, std::memory_order_relaxed); }
  /// A request began / ended being handled (parsed, not yet answered).
  void requestStarted() noexcept { inFlight_.fetch_add(1, std::memory_order_relaxed); }
  void requestFinished() noexcept { inFlight_.fetch_sub(1, std::memory_order_relaxed); }
  /// A connection was accepted / closed.
  void connectionOpened() noexcept;
  void connectionClosed() noexcept { connectionsOpen_.fetch_sub(1, std::memory_order_relaxed); }

  /// The number of responses sent with `status` (any code; the uncounted
  /// ones together). Never blocks.
  [[nodiscard]] std::uint64_t responses(int status) const noexcept;
  /// Responses of every status.
  [[nodiscard]] std::uint64_t totalResponses() const noexcept;
  [[nodiscard]] std::uint64_t rejected() const noexcept { return rejected_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::int64_t inFlight() const noexcept { return inFlight_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::int64_t connectionsOpen() const noexcept {
    return connectionsOpen_.load(std::memory_order_relaxed);
  }

  /// The /metrics page: every field of `pool` as coexec::writePrometheus()
  /// writes it (labelled with the pool's name), then these counters, in the
  /// Prometheus text format (version 0.0.4). Never blocks; throws only
  /// std::bad_alloc.
  [[nodiscard]] std::string renderPrometheus(const coexec::PoolStats& pool) const;

 private:
  static constexpr std::size_t kOther = kStatusCodes.size();
  // Relaxed throughout: each counter is read on its own, for display.
  std::array<std::atomic<std::uint64_t>, kStatusCodes.size() + 1> responses_{};
  std::atomic<std::uint64_t> rejected_{0};
  std::atomic<std::int64_t> inFlight_{0};
  std::atomic<std::int64_t> connectionsOpen_{0};
  std::atomic<std::uint64_t> connectionsAccepted_{0};
};

}  // namespace offload
