// SPDX-License-Identifier: BSL-1.0
#pragma once

// Helpers shared by the tests: gates that release blocked tasks even when an
// assertion fails (so a failing test cannot hang the pool's destructor),
// bounded polling for states that are reached asynchronously, the ledger
// check, and a thread with a small fixed stack.
//
// Every helper that waits fails the test when its wait times out, or returns
// false for the caller to REQUIRE (and is [[nodiscard]]); none returns as if
// the awaited event had happened.

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>

#include "Assertions.h"
#include <fmt/format.h>

#include "coexec/Format.h"
#include "coexec/PoolStats.h"
#include "coexec/ThreadPoolExecutor.h"

namespace coexec::test {

/// The limit for "eventually" (the JDK's LONG_DELAY_MS).
inline constexpr std::chrono::milliseconds kLong{10'000};

/// Shuts `pool` down, waits (up to kLong) until it has terminated and
/// returns its final statistics, whose ledger the caller checks.
inline PoolStats finalStats(ThreadPoolExecutor& pool) {
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  return pool.stats();
}

/// True in builds with AddressSanitizer or ThreadSanitizer (GCC defines
/// __SANITIZE_*__, clang answers __has_feature), which slow every atomic
/// operation and allocation by an order of magnitude.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

/// A stress loop's size: `n`, or `n / divisor` (at least 1) under the sanitizers.
constexpr std::size_t stressSize(std::size_t n, std::size_t divisor) {
  return kSanitized ? (n / divisor > 0 ? n / divisor : 1) : n;
}

namespace detail {

/// The thread that runs main() and with it every Catch2 test case (dynamic
/// initialisation runs on it, before main).
inline const std::thread::id kTestThread = std::this_thread::get_id();

/// Ends the test after a wait that timed out: on the test's own thread a
/// Catch2 failure (the test case fails, its guards unwind, the next case
/// runs); on any other thread (a pool thread, where Catch2 must not be used
/// and an exception would only reach the pool) the message on stderr and
/// std::abort(), which fails the test case's process.
[[noreturn]] inline void failTimedOutWait(const std::string& message) {
  if (std::this_thread::get_id() == kTestThread) {
    FAIL(message);  // throws
  }
  std::fprintf(stderr, "coexec test: %s (on a thread other than the test's: aborting)\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

/// "tests/X.cpp:123", for messages. Helpers take the place of their caller
/// as default arguments `const char* file = __builtin_FILE(), int line =
/// __builtin_LINE()` (GCC and clang; std::source_location needs clang 15).
inline std::string place(const char* file, int line) {
  if (const char* tests = std::strstr(file, "tests/")) file = tests;
  return fmt::format("{}:{}", file, line);
}

}  // namespace detail

/// A one-shot gate: tasks wait() on it until the test open()s it.
///
/// Declare the gate before the pool (so it outlives every task that waits on
/// it) and open it before the pool's destructor runs, e.g. with a guard
/// declared after the pool, so that a failed REQUIRE that unwinds the test
/// releases every blocked task instead of hanging the destructor. The gate's
/// own destructor opens it too, as a last resort.
///
/// A wait() that times out fails the test: the gate never opening means the
/// test is broken, and a waiter must not carry on as if it had opened. The
/// failure names the gate by the place it was declared.
class Gate {
 public:
  Gate(const char* file = __builtin_FILE(), int line = __builtin_LINE()) : declaredIn_(file), declaredAt_(line) {}
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  ~Gate() { open(); }

  void open() {
    // Notify under the lock: a waiter may destroy the gate as soon as it can
    // see `open_`.
    std::lock_guard lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }
  /// Blocks until open(). If kWaitLimit passes first, fails the test (see
  /// detail::failTimedOutWait) instead of returning.
  void wait() {
    std::unique_lock lock(mutex_);
    if (cv_.wait_for(lock, kWaitLimit, [&] { return open_; })) return;
    lock.unlock();
    detail::failTimedOutWait(fmt::format("the gate declared at {} was not opened within {} s",
                                         detail::place(declaredIn_, declaredAt_),
                                         std::chrono::duration_cast<std::chrono::seconds>(kWaitLimit).count()));
  }
  bool isOpen() const {
    std::lock_guard lock(mutex_);
    return open_;
  }

 private:
  /// Longer than kLong: a test that waits kLong for a gated task to start or
  /// finish reports that first, with its own message.
  static constexpr std::chrono::milliseconds kWaitLimit = kLong * 3;

  const char* declaredIn_;
  int declaredAt_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

/// Opens a gate when it goes out of scope. Declare the Gate before the pool
/// (queued tasks that run while the pool's destructor drains the queue still
/// find it alive) and this guard after the pool (it is destroyed first, so a
/// failed assertion releases the blocked tasks before the pool's destructor
/// waits for them).
class OpenOnExit {
 public:
  explicit OpenOnExit(Gate& gate) : gate_(gate) {}
  OpenOnExit(const OpenOnExit&) = delete;
  OpenOnExit& operator=(const OpenOnExit&) = delete;
  ~OpenOnExit() { gate_.open(); }

 private:
  Gate& gate_;
};

/// Declared right after a helper thread: when the test leaves its scope
/// (also through a failed REQUIRE) it runs `stop`, which tells the thread to
/// end (a flag, a gate), and joins the thread.
class JoinOnExit {
 public:
  JoinOnExit(std::thread& thread, std::function<void()> stop) : thread_(thread), stop_(std::move(stop)) {}
  JoinOnExit(const JoinOnExit&) = delete;
  JoinOnExit& operator=(const JoinOnExit&) = delete;
  ~JoinOnExit() {
    stop_();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::thread& thread_;
  std::function<void()> stop_;
};

/// Declared right after the pool: when the test leaves its scope (also through
/// a failed REQUIRE) it opens the gate and stops the pool, so no blocked or
/// queued task keeps the pool's destructor waiting. A no-op for a pool already
/// terminated.
class StopOnExit {
 public:
  StopOnExit(Gate& gate, ThreadPoolExecutor& pool) : gate_(gate), pool_(pool) {}
  StopOnExit(const StopOnExit&) = delete;
  StopOnExit& operator=(const StopOnExit&) = delete;
  ~StopOnExit() {
    gate_.open();
    (void)pool_.shutdownNow();
  }

 private:
  Gate& gate_;
  ThreadPoolExecutor& pool_;
};

/// Counts arrivals; waitFor(n) blocks until n have arrived.
class Counter {
 public:
  void arrive() {
    // Notify under the lock: a waiter may destroy the counter as soon as it
    // can see the count.
    std::lock_guard lock(mutex_);
    ++count_;
    cv_.notify_all();
  }
  /// Blocks until `n` have arrived: true; false if kLong passed first (the
  /// caller REQUIREs it).
  [[nodiscard]] bool waitFor(std::size_t n) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, kLong, [&] { return count_ >= n; });
  }
  std::size_t count() const {
    std::lock_guard lock(mutex_);
    return count_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t count_ = 0;
};

/// A shared resource whose deleter arrives at `released`: only the last
/// owner's destruction counts, so the moves and copies a pool makes on the way
/// do not. `released` must outlive every copy.
inline std::shared_ptr<int> releaseSignal(int value, Counter& released) {
  return {new int(value), [&released](int* p) {
            delete p;
            released.arrive();
          }};
}

/// Executes `n` tasks on `pool` that each arrive at `started` and then block
/// on `gate`: the usual way to occupy n threads (or fill a queue).
inline void executeBlocked(ThreadPoolExecutor& pool, std::size_t n, Counter& started, Gate& gate) {
  for (std::size_t i = 0; i < n; ++i) {
    pool.execute([&started, &gate] {
      started.arrive();
      gate.wait();
    });
  }
}

/// Polls `condition` every millisecond until it holds or `limit` passes. For
/// states reached asynchronously (a thread exiting after keep-alive); the
/// sleep only bounds the wait, it never decides the outcome.
[[nodiscard]] inline bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit = kLong) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

/// Which side of a two-thread race starts first (see race()).
enum class Lead {
  here,   ///< the calling thread acts while the other thread is still waking up
  there,  ///< the other thread acts while the calling thread is still waking up
  none,   ///< both leave one latch together
};
/// Every lead, for loops that cycle through them.
inline constexpr Lead kLeads[] = {Lead::here, Lead::there, Lead::none};

inline const char* leadName(Lead lead) {
  switch (lead) {
    case Lead::here: return "the calling thread leads";
    case Lead::there: return "the other thread leads";
    case Lead::none: return "both start together";
  }
  return "?";
}

/// Runs `here()` on the calling thread and `there()` on a new thread at the
/// same moment, or with one side given a head start: the leading side opens a
/// latch the other is blocked on (or about to block on) and acts at once,
/// while the other still has to wake up. A race test that cycles through
/// kLeads sees the outcomes of either side winning, and of a close race,
/// instead of whichever one the scheduler happens to favour. Joins the other
/// thread before it returns or unwinds.
template <class Here, class There>
void race(Lead lead, Here&& here, There&& there) {
  std::latch go(lead == Lead::none ? 2 : 1);
  std::jthread other([&] {
    switch (lead) {
      case Lead::here: go.wait(); break;
      case Lead::there: go.count_down(); break;
      case Lead::none: go.arrive_and_wait(); break;
    }
    there();
  });
  switch (lead) {
    case Lead::here: go.count_down(); break;
    case Lead::there: go.wait(); break;
    case Lead::none: go.arrive_and_wait(); break;
  }
  here();
}

/// What the ledger accounts for: every admitted task that ended (completed,
/// failed, cancelled, discarded, drained) or still waits in a queue, shared
/// or local. See PoolStats.
inline std::uint64_t ledgerAccountedFor(const PoolStats& s) {
  return s.completedTaskCount + s.failedCount + s.cancelledCount + s.discardedCount + s.drainedCount + s.queueSize +
         s.localQueueSize;
}

/// Checks the ledger PoolStats documents for a quiescent pool:
/// `taskCount == completed + failed + cancelled + discarded + drained +
/// queueSize + localQueueSize`. A failure shows the whole snapshot and the
/// caller's line.
inline void checkLedgerAddsUp(const PoolStats& s, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  INFO("ledger checked at " << detail::place(file, line) << " on " << fmt::format("{}", s));
  CHECK(s.taskCount == ledgerAccountedFor(s));
}

/// Runs `f()` on a new thread whose stack is exactly `stackBytes` (rounded up
/// to the page size), waits for it and returns what `f` returned, or rethrows
/// what it threw. A test of constant stack use runs on it so that deep
/// recursion overflows whatever `ulimit -s` says (even `unlimited`, where
/// the main thread's stack grows on demand).
template <class F>
auto runOnStackOf(std::size_t stackBytes, F f) -> std::invoke_result_t<F&> {
  using R = std::invoke_result_t<F&>;
  struct Call {
    F& f;
    std::optional<std::conditional_t<std::is_void_v<R>, bool, R>> result{};
    std::exception_ptr error{};
    static void* run(void* self) {
      auto& call = *static_cast<Call*>(self);
      try {
        if constexpr (std::is_void_v<R>) {
          call.f();
          call.result.emplace(true);
        } else {
          call.result.emplace(call.f());
        }
      } catch (...) {
        call.error = std::current_exception();
      }
      return nullptr;
    }
  } call{f, {}, {}};
  auto check = [](int error, const char* what) {
    if (error != 0) throw std::system_error(error, std::generic_category(), what);
  };
  pthread_attr_t attributes;
  check(pthread_attr_init(&attributes), "pthread_attr_init");
  const long page = sysconf(_SC_PAGESIZE);
  const std::size_t pageSize = page > 0 ? static_cast<std::size_t>(page) : 4096;
  const std::size_t rounded = (stackBytes + pageSize - 1) / pageSize * pageSize;
  pthread_t thread{};
  int error = pthread_attr_setstacksize(&attributes, rounded);
  if (error == 0) error = pthread_create(&thread, &attributes, &Call::run, &call);
  pthread_attr_destroy(&attributes);
  check(error, "starting a thread with a fixed stack size");
  check(pthread_join(thread, nullptr), "pthread_join");
  if (call.error) std::rethrow_exception(call.error);
  if constexpr (!std::is_void_v<R>) return std::move(*call.result);
}

}  // namespace coexec::test
