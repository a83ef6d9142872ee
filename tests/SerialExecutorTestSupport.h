// SPDX-License-Identifier: BSL-1.0
#pragma once

// Helpers of the SerialExecutor tests (SerialExecutorTest.cpp,
// SerialExecutorMisuseTest.cpp).

#include <cstddef>

#include "coexec/ThreadPoolExecutor.h"

namespace coexec::test {

/// A pool of `threads` fixed threads named "lane-pool", for lanes to run on.
inline ThreadPoolOptions serialPool(std::size_t threads, WorkQueue queue = WorkQueue::bounded(1024)) {
  ThreadPoolOptions options;
  options.name = "lane-pool";
  options.corePoolSize = threads;
  options.maximumPoolSize = threads;
  options.workQueue = queue;
  return options;
}

}  // namespace coexec::test
