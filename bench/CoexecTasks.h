#pragma once

// The coroutines the coexec benchmarks run, shared by CoexecPool.cpp (the
// timed workloads) and AllocCount.cpp (allocations per operation), so that
// both measure the same code.

#include <cstddef>

#include <coexec/coexec.h>

namespace bench {

/// W3: a coroutine hopping `n` times through the pool it runs on.
inline coexec::Task<void> hops(coexec::ThreadPoolExecutor& pool, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    co_await coexec::resumeOn(pool);
}

/// W4: fork/join fib: every call with n >= 2 submits both children and
/// awaits them.
inline coexec::Task<long> fib(coexec::ThreadPoolExecutor& pool, int n) {
  if (n < 2) co_return n;
  coexec::Future<long> a = pool.submit(fib(pool, n - 1));
  coexec::Future<long> b = pool.submit(fib(pool, n - 2));
  const long x = co_await a;
  co_return x + co_await b;
}

}  // namespace bench
