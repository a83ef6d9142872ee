// SPDX-License-Identifier: BSL-1.0
#pragma once

// A pool's timers: one-shot scheduled tasks (schedule()) and periodic
// schedules (scheduleAtFixedRate(), scheduleWithFixedDelay()). See
// PoolTimers.cpp for the rules and the locking.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "coexec/CancellationToken.h"
#include "coexec/Clock.h"
#include "coexec/PeriodicHandle.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/ResultCore.h"
#include "foundation/SpinWait.h"
#include "engine/TimerService.h"
#include "pool/ScheduledItem.h"

namespace coexec::detail {

class PoolImpl;

/// A task from schedule() while it waits for its deadline. The task holds a
/// reference to it (TaskCore::cancelListener) so that cancelling the Future
/// removes the timer at once.
class OneShotTimer final : public QueuedCancelListener, public ScheduledItem, public Recycled {
 public:
  explicit OneShotTimer(Ref<TaskCore> task) noexcept : task(std::move(task)) {}
  void retainItem() noexcept override { addRef(); }
  void releaseItem() noexcept override { release(); }
  [[nodiscard]] bool isPeriodic() const noexcept override { return false; }
  void queuedTaskCancelled() noexcept override;

  Ref<TaskCore> task;  // until the item leaves the pool (guarded by the pool's mutex_): breaks the cycle
};

/// A periodic schedule: its body, its rules and its end.
class PeriodicState final : public PeriodicControl, public ScheduledItem {
 public:
  PeriodicState(Ref<PeriodicBody> body, Clock& clock, Clock::time_point first, Clock::duration interval, bool fixedRate,
                PeriodicOptions options, const void* poolIdentity);

  void retainItem() noexcept override { addRef(); }
  void releaseItem() noexcept override { release(); }
  [[nodiscard]] bool isPeriodic() const noexcept override { return true; }

  // PeriodicControl
  bool cancel() noexcept override;
  [[nodiscard]] std::uint64_t runCount() const noexcept override { return runs_.load(std::memory_order_acquire); }
  [[nodiscard]] Clock::time_point nextRun() const noexcept override {
    return Clock::time_point(Clock::duration(nextRun_.load(std::memory_order_acquire)));
  }
  [[nodiscard]] const Clock& clock() const noexcept override { return clock_; }

  /// The completion the handle waits on.
  [[nodiscard]] Ref<ResultCore<void>> completion() const noexcept;

  /// One run, on a pool thread (PeriodicRun::invoke). Rethrows the run's
  /// error after the schedule has dealt with it.
  void runOnce(PoolImpl& pool);

  /// Ends the schedule (once; later calls do nothing): settles the handle
  /// with `error` (null: normally), cancels the token, and counts the
  /// outcome in `pool` if the schedule was counted. Outside the pool's lock.
  void end(PoolImpl& pool, std::exception_ptr error) noexcept;

  /// Requires: the pool's mutex_ held. The deadline of the next run, a run
  /// having returned at `now` (the rules are in ThreadPoolExecutor.h); moves
  /// `due` along the grid for fixed rate.
  [[nodiscard]] Clock::time_point nextDeadline(Clock::time_point now) noexcept;

  /// Cancels the token its runs see (outside any lock: callbacks are user
  /// code).
  void cancelRunToken() noexcept { source_.requestCancellation(); }

  void setNextRun(Clock::time_point t) noexcept {
    nextRun_.store(t.time_since_epoch().count(), std::memory_order_release);
  }

  const PeriodicOptions options;
  const bool fixedRate;
  const Clock::duration interval;
  Clock::time_point due;  // the grid point (fixed rate) or deadline of the next run; guarded by the pool's mutex_
  bool counted = false;   // counted in taskCount; guarded by the pool's mutex_
  std::atomic<bool> cancelRequested{false};

 private:
  class Completion;
  Ref<PeriodicBody> body_;
  Clock& clock_;
  CancellationSource source_;
  Ref<ResultCore<void>> completion_;
  std::atomic<bool> ended_{false};
  std::atomic<std::uint64_t> runs_{0};
  std::atomic<Clock::duration::rep> nextRun_;
};

/// A run of a periodic schedule, queued on the pool like a due task. It
/// counts in no counter of the pool (PoolTaskState::countsInStats() is false).
class PeriodicRun final : public TaskCore {
 public:
  PeriodicRun(Ref<PeriodicState> state, PoolImpl& pool);
  [[nodiscard]] PeriodicState& state() const noexcept { return *state_; }

 private:
  void invoke() override { state_->runOnce(pool_); }
  void discardValue() noexcept override {}
  Ref<PeriodicState> state_;
  PoolImpl& pool_;
};

/// A list that holds its first N elements in place: most timer operations
/// collect one item or none, and must not allocate for it.
template <class T, std::size_t N>
class SmallList {
 public:
  void push_back(T value) {
    if (size_ < N) {
      inline_[size_++] = std::move(value);
    } else {
      more_.push_back(std::move(value));
      ++size_;
    }
  }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  template <class F>
  void forEach(F&& f) {
    for (std::size_t i = 0; i < size_ && i < N; ++i)
      f(inline_[i]);
    for (T& value : more_)
      f(value);
  }
  void clear() noexcept {
    for (std::size_t i = 0; i < size_ && i < N; ++i)
      inline_[i] = T();
    more_.clear();
    size_ = 0;
  }

 private:
  T inline_[N]{};
  std::vector<T> more_;
  std::size_t size_ = 0;
};

/// What a timer operation must do once the pool's lock is released: user
/// code (settling Futures and handles, token callbacks, destroying tasks)
/// never runs under it.
struct TimerWork {
  std::vector<std::pair<Ref<PeriodicState>, std::exception_ptr>> end;  // schedules to end, and how (null: normally)
  std::vector<Ref<TaskCore>> cancel;                                   // one-shot tasks to cancel
  SmallList<Ref<TaskCore>, 1> drop;                                    // references to drop
  SmallList<ScheduledItem*, 2> release;                                // the live list's references to drop
  std::vector<Ref<PeriodicState>> tokens;                              // schedules whose run token to cancel
  std::vector<std::exception_ptr> errors;                              // thread factory failures to report

  /// Does it all, in that order; without the pool's lock. Never throws.
  void run(PoolImpl& pool) noexcept;
  /// Nothing to do but dropping the list's references (which may be done
  /// under the lock: the items' other owners keep them, or nothing of the
  /// user's is left in them).
  [[nodiscard]] bool onlyReleases() const noexcept {
    return end.empty() && cancel.empty() && drop.empty() && tokens.empty() && errors.empty();
  }
};

}  // namespace coexec::detail
