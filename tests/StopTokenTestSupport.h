// SPDX-License-Identifier: BSL-1.0
#pragma once

// Helpers shared by the std::stop_token tests (StopTokenTest.cpp,
// StopTokenLinkTest.cpp): waiting for a stop request without sleeping, and
// the count of live stop-token bridges.

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <stop_token>

#include "TestSupport.h"
#include "coexec/CancellationToken.h"

namespace coexec::test {

/// Blocks until stop is requested on `stop` (true) or kLong passes (false).
/// Event-driven: condition_variable_any wakes on the stop request.
inline bool waitForStop(const std::stop_token& stop) {
  std::mutex mutex;
  std::condition_variable_any cv;
  std::unique_lock lock(mutex);
  (void)cv.wait_for(lock, stop, kLong, [] { return false; });
  return stop.stop_requested();
}

/// Baseline-relative count of live StopTokenBridges (0 without fault points).
inline std::size_t bridges() { return coexec::detail::liveStopTokenBridges(); }

}  // namespace coexec::test
