#pragma once

// Helpers shared by the cancellation flow tests (CancellationFlowTokenTest,
// CancellationFlowTreeTest): a pool's final stats.

#include <catch2/catch.hpp>

#include "TestSupport.h"
#include "coexec/ThreadPoolExecutor.h"

namespace coexec::test {

/// Shuts `pool` down and waits until it has terminated, then returns its
/// statistics, whose ledger the caller checks.
inline PoolStats finalStats(ThreadPoolExecutor& pool) {
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  return pool.stats();
}

}  // namespace coexec::test
