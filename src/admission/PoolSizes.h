// SPDX-License-Identifier: BSL-1.0
#pragma once

// The admission front's sizes: corePoolSize, maximumPoolSize, keepAliveTime
// and allowCoreThreadTimeOut, the rules admission and the worker loop read
// them by, and the largest number of threads the pool has had. The pool
// counts its threads and decides; this component keeps the sizes valid.
//
// Invariants:
// - 1 <= maximumPoolSize, corePoolSize <= maximumPoolSize, keepAliveTime >=
//   0, from construction (ThreadPoolOptions::validated()) through every
//   setter: a setter that would break one throws std::invalid_argument and
//   changes nothing.
// - Guarded by the pool's mutex (the *Locked functions). corePoolSize has a
//   lock-free mirror, stored under the mutex with each change, which a
//   lock-free submission reads (belowCore()) beside the pool's thread-count
//   mirror: a hint only, since a submission that sees fewer threads than
//   core takes the locked path, where the sizes are read under the mutex.
// - The largest size only grows (noteThreadsLocked()).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>

#include "coexec/Export.h"

namespace coexec::detail {

class COEXEC_EXPORT PoolSizes {
 public:
  /// Requires: the sizes already checked (ThreadPoolOptions::validated()).
  /// `coreMirror` is the pool's lock-free copy of corePoolSize, which this
  /// component writes (it lives with the pool's other mirrors, which
  /// submissions read together).
  PoolSizes(std::atomic<std::size_t>& coreMirror, std::size_t core, std::size_t maximum,
            std::chrono::nanoseconds keepAlive, bool coreTimesOut) noexcept
      : coreMirror_(coreMirror), core_(core), maximum_(maximum), keepAlive_(keepAlive), coreTimesOut_(coreTimesOut) {
    coreMirror_.store(core, std::memory_order_relaxed);
  }

  // Requires: the pool's mutex held, for each *Locked function.
  [[nodiscard]] std::size_t coreLocked() const noexcept { return core_; }
  [[nodiscard]] std::size_t maximumLocked() const noexcept { return maximum_; }
  [[nodiscard]] std::chrono::nanoseconds keepAliveLocked() const noexcept { return keepAlive_; }
  [[nodiscard]] bool coreTimesOutLocked() const noexcept { return coreTimesOut_; }
  [[nodiscard]] std::size_t largestLocked() const noexcept { return largest_; }

  /// Admission step 1 and the core resize: `threads` is below corePoolSize.
  [[nodiscard]] bool belowCoreLocked(std::size_t threads) const noexcept { return threads < core_; }
  /// Admission step 3: another thread may start.
  [[nodiscard]] bool belowMaximumLocked(std::size_t threads) const noexcept { return threads < maximum_; }
  /// After setMaximumPoolSize(): `threads` is more than the pool may keep.
  [[nodiscard]] bool aboveMaximumLocked(std::size_t threads) const noexcept { return threads > maximum_; }
  /// An idle worker of a pool of `threads` threads waits keepAliveTime at
  /// most, then exits.
  [[nodiscard]] bool idleTimesOutLocked(std::size_t threads) const noexcept { return coreTimesOut_ || threads > core_; }
  /// Without the lock: `threads` (the pool's mirror of its thread count) is
  /// below corePoolSize's mirror. A hint (see the invariants). Never throws.
  [[nodiscard]] bool belowCore(std::size_t threads) const noexcept {
    return threads < coreMirror_.load(std::memory_order_relaxed);
  }

  /// The pool has `threads` threads now.
  void noteThreadsLocked(std::size_t threads) noexcept { largest_ = std::max(largest_, threads); }

  /// Sets corePoolSize; returns by how much it grew (0 if it did not).
  /// \throws std::invalid_argument if `core` is greater than maximumPoolSize.
  std::size_t setCoreLocked(std::size_t core);
  /// Sets maximumPoolSize. \throws std::invalid_argument if `maximum` is 0
  /// or less than corePoolSize.
  void setMaximumLocked(std::size_t maximum);
  /// Sets keepAliveTime. \throws std::invalid_argument if it is negative.
  void setKeepAliveLocked(std::chrono::nanoseconds keepAlive) {
    checkKeepAlive(keepAlive);
    keepAlive_ = keepAlive;
  }
  /// \throws std::invalid_argument if `keepAlive` is negative (so that the
  /// pool can check before it takes its mutex).
  static void checkKeepAlive(std::chrono::nanoseconds keepAlive);
  void setCoreTimesOutLocked(bool value) noexcept { coreTimesOut_ = value; }

 private:
  std::atomic<std::size_t>& coreMirror_;
  std::size_t core_;
  std::size_t maximum_;
  std::chrono::nanoseconds keepAlive_;
  bool coreTimesOut_;
  std::size_t largest_ = 0;
};

}  // namespace coexec::detail
