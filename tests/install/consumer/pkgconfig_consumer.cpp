// SPDX-License-Identifier: BSL-1.0
// Built with nothing but `pkg-config --cflags --libs coexec`.
#include <coexec/coexec.h>

#include <cstdio>
#include <string_view>

int main() {
  coexec::ThreadPoolExecutor pool(1, 1, std::chrono::seconds(1), coexec::WorkQueue::bounded(4));
  auto answer = pool.submit([] { return 42; });
  const int value = answer.get();
  const std::string_view version = coexec::version();
  std::printf("pkg-config consumer: %d (coexec %.*s)\n", value, static_cast<int>(version.size()), version.data());
  return value == 42 ? 0 : 1;
}
