// SPDX-License-Identifier: BSL-1.0
#pragma once

#include "coexec/detail/StandardLibrary.h"

namespace coexec::detail {

using SteadyClock = std::chrono::steady_clock;

/// `now + timeout` on the steady clock, saturated at time_point::max() instead
/// of overflowing (for timeouts such as hours::max()); a zero or negative
/// timeout gives `now`.
template <class Rep, class Period>
SteadyClock::time_point deadlineAfter(std::chrono::duration<Rep, Period> timeout) {
  const auto now = SteadyClock::now();
  if (timeout <= timeout.zero()) return now;
  const std::chrono::duration<double> wanted = timeout;
  const std::chrono::duration<double> room = SteadyClock::time_point::max() - now;
  if (wanted >= room) return SteadyClock::time_point::max();
  return now + std::chrono::ceil<SteadyClock::duration>(timeout);
}

/// `d` as a steady-clock duration, rounded up, saturated at duration::max()
/// instead of overflowing; a zero or negative `d` gives zero.
template <class Rep, class Period>
SteadyClock::duration saturatedDuration(std::chrono::duration<Rep, Period> d) noexcept {
  if (d <= d.zero()) return SteadyClock::duration::zero();
  const std::chrono::duration<double> wanted = d;
  const std::chrono::duration<double> room = SteadyClock::duration::max();
  if (wanted >= room) return SteadyClock::duration::max();
  return std::chrono::ceil<SteadyClock::duration>(d);
}

/// `t + d` for a `d` that is not negative, saturated at time_point::max()
/// instead of overflowing.
inline SteadyClock::time_point saturatedAdd(SteadyClock::time_point t, SteadyClock::duration d) noexcept {
  // For a t at or before the epoch, t + d <= d cannot overflow.
  if (t.time_since_epoch() > SteadyClock::duration::zero() && d > SteadyClock::time_point::max() - t) {
    return SteadyClock::time_point::max();
  }
  return t + d;
}

/// `now + d` on any clock's time line, saturated at time_point::max(); a
/// zero or negative `d` gives `now`.
template <class Rep, class Period>
SteadyClock::time_point deadlineOn(SteadyClock::time_point now, std::chrono::duration<Rep, Period> d) noexcept {
  return saturatedAdd(now, saturatedDuration(d));
}

}  // namespace coexec::detail
