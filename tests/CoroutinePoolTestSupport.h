// SPDX-License-Identifier: BSL-1.0
#pragma once

// Helpers shared by the coroutine pool tests (CoroutinePoolSubmitTest,
// CoroutinePoolSuspensionTest, CoroutinePoolLifetimeTest): a coroutine's own
// exception type and the proof that a coroutine task has suspended.

#include <stdexcept>

#include "Assertions.h"

#include "TestSupport.h"
#include "coexec/ThreadPoolExecutor.h"

namespace coexec::test {

struct CoroutineError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Blocks until a coroutine task of the one-thread `pool` has suspended. The
/// coroutine arrives at `reached` right before its co_await on work that
/// cannot be done yet; a probe task submitted after that can run on the
/// pool's only thread only once the coroutine has given the thread back.
/// The probe counts as a task of `pool`.
inline void requireSuspended(ThreadPoolExecutor& pool, Counter& reached) {
  REQUIRE(pool.maximumPoolSize() == 1);
  REQUIRE(reached.waitFor(1));
  Future<void> probe = pool.submit([] {});
  REQUIRE(probe.waitFor(kLong));
}

}  // namespace coexec::test
