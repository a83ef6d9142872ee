// SPDX-License-Identifier: BSL-1.0
#pragma once

// The coroutines the coexec benchmarks run, shared by CoexecPool.cpp (the
// timed workloads) and AllocCount.cpp (allocations per operation), so that
// both measure the same code.

#include <cstddef>
#include <vector>

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

/// W4s.whenAll: fib with both children submitted and awaited together with
/// whenAll of their Futures.
inline coexec::Task<long> fibWhenAll(coexec::ThreadPoolExecutor& pool, int n) {
  if (n < 2) co_return n;
  coexec::Future<long> a = pool.submit(fibWhenAll(pool, n - 1));
  coexec::Future<long> b = pool.submit(fibWhenAll(pool, n - 2));
  const auto [x, y] = co_await coexec::whenAll(a, b);
  co_return x + y;
}

/// W4s.group: fib with both children spawned in a TaskGroup and joined.
inline coexec::Task<long> fibGroup(coexec::ThreadPoolExecutor& pool, int n) {
  if (n < 2) co_return n;
  coexec::TaskGroup group(pool);
  coexec::Future<long> a = group.spawn(fibGroup(pool, n - 1));
  coexec::Future<long> b = group.spawn(fibGroup(pool, n - 2));
  co_await group.join();
  co_return a.get() + b.get();
}

/// W4s.invokeAll: fib with both children run by invokeAll of two callables
/// that make their Tasks.
struct FibCall {
  coexec::ThreadPoolExecutor* pool;
  int n;
  coexec::Task<long> operator()() const;
};

inline coexec::Task<long> fibInvokeAll(coexec::ThreadPoolExecutor& pool, int n) {
  if (n < 2) co_return n;
  std::vector<FibCall> calls{{&pool, n - 1}, {&pool, n - 2}};
  const std::vector<long> results = co_await pool.invokeAll(calls);
  co_return results[0] + results[1];
}

inline coexec::Task<long> FibCall::operator()() const { return fibInvokeAll(*pool, n); }

/// W7: a trivial task: returns its index.
struct Trivial {
  int index;
  int operator()() const noexcept { return index; }
};

/// W7: one round of invokeAll over `tasks` (copied into the pool's tasks;
/// the vector stays as it is).
inline coexec::Task<std::vector<int>> invokeAllRound(coexec::ThreadPoolExecutor& pool, std::vector<Trivial>& tasks) {
  co_return co_await pool.invokeAll(tasks);
}

/// W7 without results: `rounds` rounds of invokeAll over void tasks, from
/// one coroutine (for the allocation count of the combinator alone).
inline coexec::Task<void> invokeAllVoidRounds(coexec::ThreadPoolExecutor& pool, std::vector<void (*)()>& tasks,
                                              std::size_t rounds) {
  for (std::size_t r = 0; r < rounds; ++r)
    co_await pool.invokeAll(tasks);
}

/// W7 with results: `rounds` rounds of invokeAll over `tasks`, from one
/// coroutine; returns the sum of the last elements (a check).
inline coexec::Task<long> invokeAllRounds(coexec::ThreadPoolExecutor& pool, std::vector<Trivial>& tasks,
                                          std::size_t rounds) {
  long sum = 0;
  for (std::size_t r = 0; r < rounds; ++r) {
    const std::vector<int> results = co_await pool.invokeAll(tasks);
    sum += results.back();
  }
  co_return sum;
}

}  // namespace bench
