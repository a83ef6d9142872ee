// Built with nothing but `pkg-config --cflags --libs coexec`.
#include <coexec/coexec.h>

#include <cstdio>

int main() {
  coexec::ThreadPoolExecutor pool(1, 1, std::chrono::seconds(1), coexec::WorkQueue::bounded(4));
  auto answer = pool.submit([] { return 42; });
  const int value = answer.get();
  std::printf("pkg-config consumer: %d\n", value);
  return value == 42 ? 0 : 1;
}
