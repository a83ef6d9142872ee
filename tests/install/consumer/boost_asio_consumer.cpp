// SPDX-License-Identifier: BSL-1.0
// A consumer of the installed coexec::boost_asio: a pool task awaited from a
// Boost.Asio coroutine with coexec::basio::asyncWait, and a coexec Task spawned
// on the io_context with coexec::basio::spawn.
#include <coexec/boost_asio.h>
#include <coexec/coexec.h>

#include <cstdio>

namespace {
coexec::Task<int> doubled(coexec::ThreadPoolExecutor& pool, int x) {
  co_await coexec::resumeOn(pool);
  co_return 2 * x;
}
}  // namespace

int main() {
  coexec::ThreadPoolExecutor pool(coexec::Executors::fixed(2, 8, "consumer"));
  boost::asio::io_context io;
  int fromPool = 0;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        auto future = pool.submit([] { return 21; });
        fromPool = co_await coexec::basio::asyncWait(future, boost::asio::use_awaitable);
      },
      boost::asio::detached);
  coexec::Future<int> spawned = coexec::basio::spawn(io.get_executor(), doubled(pool, 21));
  io.run();
  const int fromTask = spawned.get();
  std::printf("boost_asio consumer: %d and %d\n", fromPool, fromTask);
  return fromPool == 21 && fromTask == 42 ? 0 : 1;
}
