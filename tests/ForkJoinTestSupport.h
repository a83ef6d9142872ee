// SPDX-License-Identifier: BSL-1.0
#pragma once

// The fork/join computation the join and queue tests run on a pool
// (ThreadPoolJoinTest.cpp, WorkQueueTest.cpp).

#include "coexec/Future.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

namespace coexec::test {

/// fib(n), every call with n >= 2 submitting both children to `pool` and
/// awaiting them in order: the workers push to and pop from their own
/// queues, and the awaits join the children still queued.
inline Task<long> forkJoinFib(ThreadPoolExecutor& pool, int n) {
  if (n < 2) co_return n;
  Future<long> a = pool.submit(forkJoinFib(pool, n - 1));
  Future<long> b = pool.submit(forkJoinFib(pool, n - 2));
  const long x = co_await a;
  co_return x + co_await b;
}

}  // namespace coexec::test
