// SPDX-License-Identifier: BSL-1.0
#pragma once

// Helpers shared by the pool lifecycle tests (ThreadPoolShutdownTest,
// ThreadPoolTerminationTest, ThreadPoolResizeTest): the check of a terminated
// pool, and the pool shapes a contract runs over.

#include <chrono>
#include <cstddef>

#include "Assertions.h"

#include "TestSupport.h"
#include "coexec/ThreadPoolExecutor.h"

namespace coexec::test {

/// LIF-06: the state of a terminated pool.
inline void checkTerminated(ThreadPoolExecutor& pool) {
  using namespace std::chrono_literals;
  CHECK(pool.awaitTermination(0ns));
  CHECK(pool.isShutdown());
  CHECK(pool.isTerminated());
  CHECK_FALSE(pool.isTerminating());
  const PoolStats s = pool.stats();
  CHECK(s.state == PoolState::terminated);
  CHECK(s.queueSize == 0u);
  CHECK(s.activeCount == 0u);
  CHECK(s.poolSize == 0u);
  checkLedgerAddsUp(s);
}

/// A pool shape the same contract runs over.
struct Shape {
  const char* label;
  std::size_t threads;  // core == max
  WorkQueue queue;
};

inline Shape queueingShape() {
  return GENERATE(values<Shape>({
      {"one thread, bounded queue", 1, WorkQueue::bounded(16)},
      {"two threads, bounded queue", 2, WorkQueue::bounded(16)},
      {"two threads, unbounded queue", 2, WorkQueue::unbounded()},
      {"one thread, priority queue, equal priorities", 1, WorkQueue::priority(16)},
  }));
}

}  // namespace coexec::test
