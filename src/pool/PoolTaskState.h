// SPDX-License-Identifier: BSL-1.0
#pragma once

// What a pool keeps per task: its extension of the task, kept in the task's
// owner storage (TaskCore::ownerBytes and ownerWord), which the task core
// zeroes when the task is made and never touches again. All zeroes is the
// state of a task the pool has done nothing to: counted per run, not in
// flight, not stamped.
//
// Layout: ownerBytes[0] is 1 + the in-flight shard (0: not in flight), read
// on every coroutine task's suspension and finish, beside the stage word;
// ownerBytes[1] marks a periodic run; ownerWord is the admission stamp, its
// ticks with the sign bit flipped, so that 0 stands for INT64_MIN, which no
// stamp is (the clocks count from their epoch).

#include <cstdint>

#include "coexec/detail/TaskCore.h"

namespace coexec::detail {

/// A view of the pool's state of one task (one the pool admitted, or runs).
class PoolTaskState {
 public:
  explicit PoolTaskState(TaskCore& task) noexcept : task_(task) {}

  /// For a pool that records latency (ThreadPoolOptions::recordLatency):
  /// when the task was admitted (a timer task: its due time), on the pool's
  /// clock, in its ticks since the clock's epoch. Written before the task is
  /// published to the thread that runs it.
  void stampAdmission(std::int64_t ticks) noexcept { task_.ownerWord = static_cast<std::uint64_t>(ticks) ^ kSign; }
  [[nodiscard]] bool stamped() const noexcept { return task_.ownerWord != 0; }
  /// Precondition: stamped().
  [[nodiscard]] std::int64_t admittedAt() const noexcept { return static_cast<std::int64_t>(task_.ownerWord ^ kSign); }

  /// A run of a periodic schedule, which the pool counts once per schedule,
  /// not per run; marked before the task is published.
  void markPeriodicRun() noexcept { task_.ownerBytes[1] = 1; }
  /// False for a run of a periodic schedule.
  [[nodiscard]] bool countsInStats() const noexcept { return task_.ownerBytes[1] == 0; }

  /// Which of the pool's in-flight counters a started coroutine task counts
  /// in (fewer than 255); written by the worker that starts it, before the
  /// coroutine runs. Every other task (not a coroutine task, or one started
  /// outside the pool's workers: a caller-run one, a PendingTask::run() one)
  /// is not in flight.
  void enterFlight(std::uint8_t shard) noexcept { task_.ownerBytes[0] = static_cast<std::uint8_t>(shard + 1); }
  [[nodiscard]] bool inFlight() const noexcept { return task_.ownerBytes[0] != 0; }
  /// Precondition: inFlight().
  [[nodiscard]] std::uint8_t shard() const noexcept { return static_cast<std::uint8_t>(task_.ownerBytes[0] - 1); }

 private:
  static constexpr std::uint64_t kSign = std::uint64_t{1} << 63;
  TaskCore& task_;
};

/// The pool's state of `task`.
inline PoolTaskState poolState(TaskCore& task) noexcept { return PoolTaskState(task); }
/// Read only: the view is const, so that none of its writers applies.
inline const PoolTaskState poolState(const TaskCore& task) noexcept {
  return PoolTaskState(const_cast<TaskCore&>(task));
}

}  // namespace coexec::detail
