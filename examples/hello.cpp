// SPDX-License-Identifier: BSL-1.0
#include <coexec/coexec.h>

#include <fmt/format.h>

#include <numeric>
#include <vector>

coexec::Task<int> sumOfSquares(coexec::ThreadPoolExecutor& pool) {
  // Four tasks at once: each goes to the pool now, and its Future is kept.
  std::vector<coexec::Future<int>> squares;
  for (int i = 1; i <= 4; ++i) {
    squares.push_back(pool.submit([i] { return i * i; }));
  }
  std::vector<int> values;
  for (coexec::Future<int>& square : squares) {
    values.push_back(co_await square);  // suspends without holding a thread
  }
  // One more task, submitted and awaited in one expression.
  co_return co_await pool.submit([&] { return std::accumulate(values.begin(), values.end(), 0); });
}

int main() {
  coexec::ThreadPoolExecutor pool({.name = "hello", .corePoolSize = 2, .maximumPoolSize = 2});
  const int sum = coexec::syncWait(sumOfSquares(pool));
  pool.close();  // waits until the pool's threads are done: the counters below are final
  const coexec::PoolStats stats = pool.stats();
  fmt::print("1 + 4 + 9 + 16 = {}\n{}\n", sum, stats);
  return sum == 30 && stats.completedTaskCount == 5 ? 0 : 1;
}
