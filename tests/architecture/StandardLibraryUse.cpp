// SPDX-License-Identifier: BSL-1.0
// Compiled (not run) by CheckHeaderSize.cmake, once as coexec's headers are
// included by default and once with COEXEC_FULL_STD_HEADERS: both ways, a
// program may use the names that <coexec/ThreadPoolExecutor.h> only
// declares on libstdc++ (std::thread, std::stop_token) once it includes
// their standard headers after coexec's.

#include <coexec/ThreadPoolExecutor.h>

#include <functional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>

int main() {
  coexec::ThreadPoolOptions options;
  options.threadFactory = [](std::string name, std::function<void()> body) {
    (void)name;
    return std::thread(std::move(body));
  };
  coexec::ThreadPoolExecutor pool(std::move(options));
  coexec::Future<bool> stop = pool.submit([](std::stop_token token) { return token.stop_requested(); });
  coexec::Future<bool> cancel =
      pool.submit([](coexec::CancellationToken token) { return token.isCancellationRequested(); });
  std::stop_source source;
  coexec::Future<int> linked = pool.submit([] { return 1; }, source.get_token());
  const std::stop_token bridged = coexec::CancellationToken().stopToken();
  return stop.get() || cancel.get() || linked.get() != 1 || bridged.stop_possible() ? 1 : 0;
}
