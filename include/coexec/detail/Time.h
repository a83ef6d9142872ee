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

}  // namespace coexec::detail
