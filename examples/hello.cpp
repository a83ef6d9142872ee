#include <coexec/coexec.h>

#include <fmt/format.h>

#include <vector>

coexec::Task<int> sumOfSquares(coexec::ThreadPoolExecutor& pool) {
  std::vector<coexec::Future<int>> squares;
  for (int i = 1; i <= 4; ++i) {
    squares.push_back(pool.submit([i] { return i * i; }));
  }
  int sum = 0;
  for (coexec::Future<int>& square : squares) {
    sum += co_await square;  // name the Future, then co_await it
  }
  co_return sum;
}

int main() {
  coexec::ThreadPoolExecutor pool({.name = "hello", .corePoolSize = 2, .maximumPoolSize = 2});
  const int sum = coexec::syncWait(sumOfSquares(pool));
  pool.close();  // waits until the pool's threads are done: the counters below are final
  const coexec::PoolStats stats = pool.stats();
  fmt::print("1 + 4 + 9 + 16 = {}\n{}\n", sum, stats);
  return sum == 30 && stats.completedTaskCount == 4 ? 0 : 1;
}
