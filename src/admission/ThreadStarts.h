// SPDX-License-Identifier: BSL-1.0
#pragma once

// The admission front's thread starts beside the worker list itself: the
// numbers (and so the names) of new workers, the retry of a start that
// failed while work had no thread, and the places of the temporary threads
// of RejectionPolicy::newThreadRuns(). The pool decides when to start a
// thread; this component keeps the counts and the retry's back-off.
//
// Invariants (all guarded by the pool's mutex):
// - Worker numbers are 1, 2, 3... in the order the pool tried to start
//   them; a start that failed keeps its number (the names of threads that
//   exist may so have gaps, never repeats).
// - At most one retry is armed at a time. Its delay starts at kRetryFirst
//   and doubles up to kRetryMost while starts keep failing; it goes back to
//   kRetryFirst once a start succeeds or no thread is needed any more.
// - A temporary thread holds a place from its reservation until its task
//   has run and every reference it held is dropped; a place is reserved
//   only below the cap. The pool does not terminate while a place is held
//   (temporaryAliveLocked()), and the thread that gives the last one back
//   decides, under the pool's mutex, whether it terminates.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace coexec::detail {

class ThreadStarts {
 public:
  static constexpr std::chrono::milliseconds kRetryFirst{1};
  static constexpr std::chrono::milliseconds kRetryMost{1000};

  /// The number the next worker will get (its name, "<pool>-<number>").
  [[nodiscard]] std::size_t nextWorkerNumberLocked() const noexcept { return workersTried_ + 1; }
  /// A worker's start is being tried: its number.
  std::size_t takeWorkerNumberLocked() noexcept { return ++workersTried_; }

  /// A retry is armed and has not fired yet.
  [[nodiscard]] bool retryArmedLocked() const noexcept { return retryArmed_; }
  /// How long the next retry waits.
  [[nodiscard]] std::chrono::nanoseconds retryDelayLocked() const noexcept { return retryDelay_; }
  /// Requires: !retryArmedLocked(). The retry's timer is armed.
  void noteRetryArmedLocked() noexcept { retryArmed_ = true; }
  /// The retry's timer fired.
  void noteRetryFiredLocked() noexcept { retryArmed_ = false; }
  /// A start succeeded, or no thread is needed any more: the next retry
  /// waits kRetryFirst.
  void resetRetryLocked() noexcept { retryDelay_ = kRetryFirst; }
  /// A start failed again: the next retry waits twice as long, up to
  /// kRetryMost.
  void backOffRetryLocked() noexcept { retryDelay_ = std::min<std::chrono::nanoseconds>(retryDelay_ * 2, kRetryMost); }

  /// Reserves a temporary thread's place if fewer than `cap` are held:
  /// returns its number (for its name, "<pool>-tmp-<number>"), or 0 at the
  /// cap. Counted in temporaryRunsLocked() from now on.
  std::size_t reserveTemporaryLocked(std::size_t cap) noexcept {
    if (temporaryAlive_ >= cap) return 0;
    ++temporaryAlive_;
    ++temporaryRuns_;
    return ++temporaryStarted_;
  }
  /// The thread of a reserved place could not be started: the place back,
  /// and the run not counted.
  void unreserveTemporaryLocked() noexcept {
    --temporaryAlive_;
    --temporaryRuns_;
  }
  /// A temporary thread is done with the pool: its place back.
  void temporaryEndedLocked() noexcept { --temporaryAlive_; }
  /// Temporary threads holding a place now.
  [[nodiscard]] std::size_t temporaryAliveLocked() const noexcept { return temporaryAlive_; }
  /// Tasks run on temporary threads so far (PoolStats::temporaryThreadRuns).
  [[nodiscard]] std::uint64_t temporaryRunsLocked() const noexcept { return temporaryRuns_; }

 private:
  std::size_t workersTried_ = 0;
  bool retryArmed_ = false;
  std::chrono::nanoseconds retryDelay_ = kRetryFirst;
  std::size_t temporaryAlive_ = 0;
  std::size_t temporaryStarted_ = 0;
  std::uint64_t temporaryRuns_ = 0;
};

}  // namespace coexec::detail
