// SPDX-License-Identifier: BSL-1.0
#pragma once

// What a pool keeps per task: its extension of the task, laid over the
// task's owner data (TaskCore::OwnerData), which the task core zeroes when
// the task is made and never touches again. All zeroes is the state of a
// task the pool has done nothing to: not stamped, counted per run, not in
// flight.

#include <cstdint>
#include <new>
#include <type_traits>

#include "coexec/detail/TaskCore.h"

namespace coexec::detail {

class PoolTaskState {
 public:
  /// For a pool that records latency (ThreadPoolOptions::recordLatency):
  /// when the task was admitted (a timer task: its due time), on the pool's
  /// clock, in its ticks since the clock's epoch. Written before the task is
  /// published to the thread that runs it.
  void stampAdmission(std::int64_t ticks) noexcept {
    admittedAt_ = ticks;
    stamped_ = true;
  }
  [[nodiscard]] bool stamped() const noexcept { return stamped_; }
  /// Precondition: stamped().
  [[nodiscard]] std::int64_t admittedAt() const noexcept { return admittedAt_; }

  /// A run of a periodic schedule, which the pool counts once per schedule,
  /// not per run; marked before the task is published.
  void markPeriodicRun() noexcept { periodicRun_ = true; }
  /// False for a run of a periodic schedule.
  [[nodiscard]] bool countsInStats() const noexcept { return !periodicRun_; }

  /// Which of the pool's in-flight counters a started coroutine task counts
  /// in (fewer than 255); written by the worker that starts it, before the
  /// coroutine runs. Every other task (not a coroutine task, or one started
  /// outside the pool's workers: a caller-run one, a PendingTask::run() one)
  /// is not in flight.
  void enterFlight(std::uint8_t shard) noexcept { flightShard_ = static_cast<std::uint8_t>(shard + 1); }
  [[nodiscard]] bool inFlight() const noexcept { return flightShard_ != 0; }
  /// Precondition: inFlight().
  [[nodiscard]] std::uint8_t shard() const noexcept { return static_cast<std::uint8_t>(flightShard_ - 1); }

 private:
  std::int64_t admittedAt_;
  std::uint8_t flightShard_;  // 1 + the shard; 0: not in flight
  bool stamped_;
  bool periodicRun_;
};

static_assert(std::is_trivially_copyable_v<PoolTaskState> && std::is_trivially_default_constructible_v<PoolTaskState>,
              "laid over zeroed bytes: all zeroes must be a valid state");
static_assert(sizeof(PoolTaskState) <= sizeof(TaskCore::OwnerData) &&
              alignof(PoolTaskState) <= alignof(TaskCore::OwnerData));

/// The pool's state of `task` (one the pool admitted, or runs).
inline PoolTaskState& poolState(TaskCore& task) noexcept {
  return *std::launder(reinterpret_cast<PoolTaskState*>(task.ownerData.bytes));
}
inline const PoolTaskState& poolState(const TaskCore& task) noexcept {
  return *std::launder(reinterpret_cast<const PoolTaskState*>(task.ownerData.bytes));
}

}  // namespace coexec::detail
