// SPDX-License-Identifier: BSL-1.0
#pragma once

// A cheap monotonic time stamp for diagnostics (the age of a running task in
// a thread dump): CLOCK_MONOTONIC_COARSE, read from the vDSO in a few
// nanoseconds, at the resolution of the kernel's tick (a few milliseconds).
// Not for deadlines: those use the pool's Clock.

#include <time.h>

#include <cstdint>

namespace coexec::detail {

/// Nanoseconds on the coarse monotonic clock; always > 0. Never blocks.
inline std::int64_t coarseNowNanos() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec + 1;
}

}  // namespace coexec::detail
