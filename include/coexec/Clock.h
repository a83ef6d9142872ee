// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <atomic>
#include <vector>

#include "coexec/Export.h"
#include "coexec/detail/StandardLibrary.h"

namespace coexec {

namespace detail {
class TimerService;
}

/// Where coexec reads the time: a source of `std::chrono::steady_clock`
/// time points. Timers driven by a clock fire when its now() reaches their
/// deadline.
///
/// coexec provides two clocks: SteadyClock (the real, monotonic time; the
/// default everywhere) and ManualClock (time that moves only when a test
/// advances it).
///
/// \par Thread safety
/// now() may be called from any thread at any time, concurrently with
/// everything else the clock does.
class COEXEC_EXPORT Clock {
 public:
  /// std::chrono::steady_clock's duration.
  using duration = std::chrono::steady_clock::duration;
  /// std::chrono::steady_clock's time point: what now() returns and deadlines
  /// are given in.
  using time_point = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;

  /// The current time on this clock; never goes back. Never blocks; never
  /// throws.
  [[nodiscard]] virtual time_point now() const noexcept = 0;
};

/// The real time: `std::chrono::steady_clock::now()`. Stateless; use the
/// process-wide instance from steadyClock().
class COEXEC_EXPORT SteadyClock final : public Clock {
 public:
  /// `std::chrono::steady_clock::now()`. Never blocks; never throws.
  [[nodiscard]] time_point now() const noexcept override { return std::chrono::steady_clock::now(); }
};

/// The process-wide SteadyClock, the default clock of coexec. Never blocks;
/// never throws. Lives until the end of the program.
[[nodiscard]] COEXEC_EXPORT SteadyClock& steadyClock() noexcept;

/// A clock for tests: its time stands still until advance() moves it, and
/// the timers it drives fire inside advance(), on the calling thread, so a
/// test decides exactly when each one fires and needs no real sleeps.
///
/// What advance(d) guarantees: when it returns, every timer driven by this
/// clock whose deadline is at or before the new time has been handed over
/// (its callback has run to completion), one after another on the thread
/// that called advance(), in deadline order (equal deadlines: in the order
/// they were scheduled). While the timer due at time t runs, now() reads t
/// (time steps from deadline to deadline, never backwards); a timer that a
/// callback schedules and that is due by the new time fires in the same
/// call. Once every due timer has run, now() reads the new time.
///
/// A pool takes a clock in ThreadPoolOptions::clock: with a ManualClock, its
/// scheduled tasks become due, its idle threads time out (keepAliveTime) and
/// sleeps in its coroutines end only when advance() reaches them. A timer
/// "fires" by handing its work to the pool inside advance(); the work then
/// runs on a pool thread, so a test waits for it (its Future) before it
/// looks (see docs/time.md).
///
/// \par Thread safety
/// now() may be called from any thread, concurrently with advance().
/// Concurrent advance() calls are serialised: the second starts when the
/// first has returned.
/// \note A timer callback must not call advance() on the clock that fires
/// it, nor destroy a timer service of that clock: either would deadlock.
class COEXEC_EXPORT ManualClock final : public Clock {
 public:
  /// A clock whose time is `start` (by default the steady clock's epoch)
  /// until advanced.
  explicit ManualClock(time_point start = time_point{}) noexcept : now_(start.time_since_epoch().count()) {}
  ManualClock(const ManualClock&) = delete;
  ManualClock& operator=(const ManualClock&) = delete;
  /// \note Every timer service driven by this clock must be destroyed first.
  ~ManualClock() override;

  /// The time this clock has been advanced to. Never blocks; never throws.
  [[nodiscard]] time_point now() const noexcept override {
    // acquire: pairs with advance()'s release store, so a thread that sees
    // the new time also sees what the callbacks fired before it did.
    return time_point(duration(now_.load(std::memory_order_acquire)));
  }

  /// Moves time forward by `d` and fires every timer that becomes due, as
  /// described in the class comment. Blocks while those callbacks run (on
  /// this thread) and while another advance() runs. A zero `d` fires the
  /// timers already due; a time past time_point::max() saturates there.
  /// \throws std::invalid_argument if `d` is negative (time never goes back).
  void advance(duration d);

 private:
  friend class detail::TimerService;

  std::atomic<duration::rep> now_;
  std::mutex mutex_;                             // serialises advance(); guards services_
  std::vector<detail::TimerService*> services_;  // the timer services this clock drives; guarded by mutex_
};

}  // namespace coexec
