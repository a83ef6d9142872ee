// SPDX-License-Identifier: BSL-1.0
// Retry with back-off: a coroutine on a pool calls a flaky operation and,
// between attempts, sleeps with co_await coexec::sleepFor(), which holds no
// thread: the pool's one thread runs other work meanwhile. Then a sleep from
// main() under syncWait(). Checks its own results.

#include <coexec/coexec.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

using namespace std::chrono_literals;

namespace {

/// Fails its first two calls, then answers 42.
struct FlakyService {
  std::atomic<int> calls{0};
  bool tryFetch(int& value) {
    if (calls.fetch_add(1) < 2) return false;
    value = 42;
    return true;
  }
};

coexec::Task<int> fetchWithBackoff(FlakyService& service) {
  auto delay = 10ms;
  for (int attempt = 1;; ++attempt) {
    int value = 0;
    if (service.tryFetch(value)) co_return value;
    if (attempt == 5) throw std::runtime_error("gave up after 5 attempts");
    co_await coexec::sleepFor(delay);  // suspends; no thread waits
    delay *= 2;
  }
}

bool check(bool ok, const char* what) {
  fmt::print("{} {}\n", ok ? "ok  " : "FAIL", what);
  return ok;
}

}  // namespace

int main() {
  coexec::ThreadPoolExecutor pool({.name = "sleep", .corePoolSize = 1, .maximumPoolSize = 1});
  FlakyService service;
  const auto start = std::chrono::steady_clock::now();
  coexec::Future<int> fetched = pool.submit([&service] { return fetchWithBackoff(service); });
  // The pool has one thread, and it is free while the coroutine sleeps.
  coexec::Future<std::thread::id> other = pool.submit([] { return std::this_thread::get_id(); });
  const int value = fetched.get();
  const auto elapsed = std::chrono::steady_clock::now() - start;

  // Outside any pool, a sleep resumes on the syncWait() thread.
  const std::thread::id mainThread = std::this_thread::get_id();
  const std::thread::id resumedOn = coexec::syncWait([]() -> coexec::Task<std::thread::id> {
    co_await coexec::sleepFor(5ms);
    co_return coexec::thisThreadId();
  }());
  pool.close();

  bool ok = true;
  ok &= check(value == 42, "the third attempt returned 42");
  ok &= check(service.calls.load() == 3, "three attempts were made");
  ok &= check(elapsed >= 30ms, "the back-off slept 10 ms, then 20 ms");
  ok &= check(other.get() != mainThread, "another task ran on the pool meanwhile");
  ok &= check(resumedOn == mainThread, "a sleep under syncWait resumed on the main thread");
  return ok ? 0 : 1;
}
