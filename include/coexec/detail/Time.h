#pragma once

#include <chrono>

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

/// `d` in steady-clock units, rounded up and saturated at duration::max()
/// (a zero or negative `d` gives itself, rounded up).
template <class Rep, class Period>
SteadyClock::duration saturatingDuration(std::chrono::duration<Rep, Period> d) {
  const std::chrono::duration<double> wanted = d;
  if (wanted >= std::chrono::duration<double>(SteadyClock::duration::max())) return SteadyClock::duration::max();
  if (wanted <= std::chrono::duration<double>(SteadyClock::duration::min())) return SteadyClock::duration::min();
  return std::chrono::ceil<SteadyClock::duration>(d);
}

/// `now + d`, saturated at time_point::max() instead of overflowing; a zero
/// or negative `d` gives `now`.
template <class Rep, class Period>
SteadyClock::time_point deadlineOn(SteadyClock::time_point now, std::chrono::duration<Rep, Period> d) {
  if (d <= d.zero()) return now;
  const std::chrono::duration<double> wanted = d;
  const std::chrono::duration<double> room = SteadyClock::time_point::max() - now;
  if (wanted >= room) return SteadyClock::time_point::max();
  return now + std::chrono::ceil<SteadyClock::duration>(d);
}

}  // namespace coexec::detail
