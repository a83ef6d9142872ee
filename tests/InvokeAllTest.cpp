#include "coexec/ThreadPoolExecutor.h"

#include <functional>
#include <vector>

#include <catch2/catch.hpp>

#include "CoroutineTestSupport.h"
#include "TestSupport.h"
#include "coexec/SyncWait.h"

using namespace coexec;

namespace {
Task<std::vector<int>> all(ThreadPoolExecutor& pool, std::vector<std::function<int()>>& tasks) {
  co_return co_await pool.invokeAll(tasks);
}
}  // namespace

TEST_CASE("invokeAll returns results in input order", "[invokeAll]") {
  ThreadPoolExecutor pool(2, 2, std::chrono::seconds(60), WorkQueue::bounded(100));
  std::vector<std::function<int()>> tasks;
  for (int i = 0; i < 10; ++i) tasks.push_back([i] { return i * i; });
  std::vector<int> r = syncWait(all(pool, tasks));
  REQUIRE(r.size() == 10);
  for (int i = 0; i < 10; ++i) CHECK(r[i] == i * i);
}
