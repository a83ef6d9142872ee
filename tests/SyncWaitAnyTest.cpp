// SPDX-License-Identifier: BSL-1.0
#include "coexec/SyncWait.h"

// syncWait(awaitable): every awaitable of the library and user awaitables,
// named and temporary, give what `co_await` gives (values, references, void)
// and rethrow what it throws; a Future temporary of an owning lambda is
// accepted (no co_await expression is involved) and destroyed once; a pool
// thread is refused.

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "TestSupport.h"
#include "coexec/AsCompleted.h"
#include "coexec/Errors.h"
#include "coexec/InvokeAll.h"
#include "coexec/Sleep.h"
#include "coexec/TaskGroup.h"
#include "coexec/ThisThread.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/WhenAll.h"
#include "coexec/WhenAny.h"
#include "coexec/WithTimeout.h"

using coexec::Future;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using namespace std::chrono_literals;

namespace {

struct AnyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

ThreadPoolExecutor makePool() { return ThreadPoolExecutor(2, 2, 0s, WorkQueue::bounded(64)); }

/// A hand-written awaiter that never suspends: await_ready / await_suspend /
/// await_resume.
struct ReadyAwaiter {
  int value;
  explicit ReadyAwaiter(int v) noexcept : value(v) {}
  bool await_ready() const noexcept { return true; }
  void await_suspend(std::coroutine_handle<>) const noexcept {}
  int await_resume() const noexcept { return value; }
};

/// A hand-written awaiter that suspends and is resumed from a thread of its
/// own; it records the thread that runs await_resume.
struct ThreadAwaiter {
  int value;
  std::thread::id* resumedOn;
  std::thread worker;
  explicit ThreadAwaiter(int v, std::thread::id* where) noexcept : value(v), resumedOn(where) {}
  ThreadAwaiter(const ThreadAwaiter&) = delete;
  ThreadAwaiter& operator=(const ThreadAwaiter&) = delete;
  ~ThreadAwaiter() {
    if (worker.joinable()) worker.join();
  }
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    worker = std::thread([h] { h.resume(); });
  }
  int await_resume() const {
    *resumedOn = coexec::thisThreadId();
    if (value < 0) throw AnyError("negative");
    return value;
  }
};

/// A type awaitable through its member operator co_await (lvalue and rvalue).
struct Awaitable {
  int value;
  explicit Awaitable(int v) noexcept : value(v) {}
  ReadyAwaiter operator co_await() const noexcept { return ReadyAwaiter(value * 2); }
};

/// A type whose operator co_await takes only rvalues.
struct RvalueOnly {
  std::string text;
  explicit RvalueOnly(std::string t) : text(std::move(t)) {}
  struct Awaiter {
    std::string text;
    explicit Awaiter(std::string t) : text(std::move(t)) {}
    bool await_ready() const noexcept { return true; }
    void await_suspend(std::coroutine_handle<>) const noexcept {}
    std::string await_resume() { return std::move(text); }
  };
  Awaiter operator co_await() && { return Awaiter(std::move(text)); }
};

/// A type awaitable through a non-member operator co_await, giving a
/// reference.
struct Box {
  int value = 0;
};
struct BoxAwaiter {
  Box* box;
  explicit BoxAwaiter(Box& b) noexcept : box(&b) {}
  bool await_ready() const noexcept { return true; }
  void await_suspend(std::coroutine_handle<>) const noexcept {}
  int& await_resume() const noexcept { return box->value; }
};
BoxAwaiter operator co_await(Box& box) noexcept { return BoxAwaiter(box); }

/// Destructions of the copies of a capture, counted.
struct Counted {
  std::atomic<int>* destroyed;
  std::string payload = std::string(100, 'x');
  explicit Counted(std::atomic<int>* d) noexcept : destroyed(d) {}
  Counted(const Counted& other) = default;
  Counted(Counted&& other) noexcept : destroyed(other.destroyed), payload(std::move(other.payload)) {
    other.destroyed = nullptr;  // a moved-from copy does not count
  }
  Counted& operator=(const Counted&) = delete;
  ~Counted() {
    if (destroyed != nullptr) destroyed->fetch_add(1);
  }
};

}  // namespace

TEST_CASE("syncWait of a Future returns its value, named or moved in", "[syncWait][future]") {
  ThreadPoolExecutor pool = makePool();
  Future<int> named = pool.submit([] { return 7; });
  CHECK(syncWait(named) == 7);
  Future<int> moved = pool.submit([] { return 8; });
  CHECK(syncWait(std::move(moved)) == 8);
  CHECK(syncWait(pool.submit([] { return 9; })) == 9);
  Future<void> done = pool.submit([] {});
  syncWait(done);
  static_assert(std::is_void_v<decltype(syncWait(done))>);
  Future<int> failing = pool.submit([]() -> int { throw AnyError("from the pool"); });
  CHECK_THROWS_AS(syncWait(failing), AnyError);
  const coexec::PoolStats stats = coexec::test::finalStats(pool);
  CHECK(stats.completedTaskCount == 4);
  CHECK(stats.failedCount == 1);
}

TEST_CASE("syncWait of a Future of a reference returns the reference", "[syncWait][future]") {
  ThreadPoolExecutor pool = makePool();
  int target = 1;
  Future<int&> ref = pool.submit([&target]() -> int& { return target; });
  int& got = syncWait(ref);
  static_assert(std::is_same_v<decltype(syncWait(ref)), int&>);
  CHECK(&got == &target);
}

TEST_CASE("syncWait of a Future temporary from an owning lambda is accepted and destroys the capture once",
          "[syncWait][future][gcc12]") {
  ThreadPoolExecutor pool = makePool();
  CHECK(syncWait(pool.submit([s = std::string(100, 'x')] { return s.size(); })) == 100);
  std::atomic<int> destroyed{0};
  {
    Counted counted(&destroyed);
    // One copy goes into the lambda; the pool destroys the task's copy once.
    const std::size_t size = syncWait(pool.submit([c = counted] { return c.payload.size(); }));
    CHECK(size == 100);
    CHECK(destroyed.load() == 1);
  }
  CHECK(destroyed.load() == 2);  // and the original
  const coexec::PoolStats stats = coexec::test::finalStats(pool);
  CHECK(stats.completedTaskCount == 2);
}

TEST_CASE("syncWait of a ScheduledFuture returns its value", "[syncWait][schedule]") {
  ThreadPoolExecutor pool = makePool();
  auto scheduled = pool.schedule([] { return 5; }, 1ms);
  CHECK(syncWait(scheduled) == 5);
  CHECK(syncWait(pool.schedule([] { return 6; }, 0ms)) == 6);
}

TEST_CASE("syncWait of a PeriodicHandle returns once the schedule is cancelled", "[syncWait][periodic]") {
  ThreadPoolExecutor pool = makePool();
  std::atomic<int> runs{0};
  coexec::PeriodicHandle handle;
  handle = pool.scheduleAtFixedRate(
      [&] {
        if (runs.fetch_add(1) + 1 == 3) throw AnyError("third run");
      },
      0ms, 1ms);
  CHECK_THROWS_AS(syncWait(handle), AnyError);  // the error ended the schedule
  CHECK(runs.load() == 3);
}

TEST_CASE("syncWait of invokeAll returns the results in order", "[syncWait][invokeAll]") {
  ThreadPoolExecutor pool = makePool();
  std::vector<std::function<int()>> tasks;
  for (int i = 0; i < 5; ++i) tasks.emplace_back([i] { return i * i; });
  auto v = syncWait(pool.invokeAll(tasks));
  CHECK(v == std::vector<int>{0, 1, 4, 9, 16});
  auto named = pool.invokeAll(std::move(tasks));
  CHECK(syncWait(named) == std::vector<int>{0, 1, 4, 9, 16});
  std::vector<std::function<int()>> failing{[] { return 1; }, []() -> int { throw AnyError("second"); }};
  CHECK_THROWS_AS(syncWait(pool.invokeAll(failing)), AnyError);
}

TEST_CASE("syncWait of invokeAny returns the first success or throws AllFailed", "[syncWait][invokeAny]") {
  ThreadPoolExecutor pool = makePool();
  std::vector<std::function<int()>> tasks{[]() -> int { throw AnyError("a"); }, [] { return 3; }};
  CHECK(syncWait(pool.invokeAny(tasks)) == 3);
  std::vector<std::function<int()>> allFail{[]() -> int { throw AnyError("a"); },
                                            []() -> int { throw AnyError("b"); }};
  try {
    (void)syncWait(pool.invokeAny(allFail));
    FAIL("invokeAny of failing tasks returned");
  } catch (const coexec::AllFailed& e) {
    CHECK(e.errors().size() == 2);
  }
}

TEST_CASE("syncWait of invokeAll with a timeout throws TimeoutError", "[syncWait][invokeAll][timeout]") {
  ThreadPoolExecutor pool = makePool();
  std::vector<std::function<int(coexec::CancellationToken)>> tasks{[](coexec::CancellationToken token) {
    while (!token.isCancellationRequested()) std::this_thread::sleep_for(1ms);
    return 0;
  }};
  CHECK_THROWS_AS(syncWait(pool.invokeAll(tasks, 5ms)), coexec::TimeoutError);
}

TEST_CASE("syncWait of whenAll and whenAny returns their results", "[syncWait][when]") {
  ThreadPoolExecutor pool = makePool();
  Future<int> a = pool.submit([] { return 1; });
  Future<std::string> b = pool.submit([] { return std::string("b"); });
  auto [x, y] = syncWait(coexec::whenAll(std::move(a), std::move(b)));
  CHECK(x == 1);
  CHECK(y == "b");
  Future<int> c = pool.submit([] { return 2; });
  auto any = syncWait(coexec::whenAny(std::move(c)));
  CHECK(any.index == 0);
  CHECK(std::get<0>(any.value) == 2);
  Future<int> failing = pool.submit([]() -> int { throw AnyError("when"); });
  CHECK_THROWS_AS(syncWait(coexec::whenAll(std::move(failing))), AnyError);
}

TEST_CASE("syncWait of withTimeout returns the value or throws TimeoutError", "[syncWait][timeout]") {
  ThreadPoolExecutor pool = makePool();
  CHECK(syncWait(coexec::withTimeout(pool.submit([] { return 4; }), 10s)) == 4);
  // The task ends when the timeout cancels it (withTimeout waits for that).
  Future<int> slow = pool.submit([](coexec::CancellationToken token) {
    while (!token.isCancellationRequested()) std::this_thread::sleep_for(1ms);
    return 0;
  });
  auto timed = coexec::withTimeout(slow, 1ms);
  CHECK_THROWS_AS(syncWait(timed), coexec::TimeoutError);
}

TEST_CASE("syncWait of TaskGroup::join and of asCompleted's next", "[syncWait][group]") {
  ThreadPoolExecutor pool = makePool();
  coexec::TaskGroup group(pool);
  std::atomic<int> ran{0};
  for (int i = 0; i < 4; ++i) (void)group.spawn([&] { ran.fetch_add(1); });
  syncWait(group.join());
  CHECK(ran.load() == 4);

  std::vector<Future<int>> futures;
  for (int i = 0; i < 3; ++i) futures.push_back(pool.submit([i] { return i + 10; }));
  auto completions = coexec::asCompleted(std::move(futures));
  int sum = 0;
  int count = 0;
  while (std::optional<Future<int>> done = syncWait(completions.next())) {
    sum += done->get();
    ++count;
  }
  CHECK(count == 3);
  CHECK(sum == 33);
}

TEST_CASE("syncWait of sleepFor, a non-movable awaiter, returns after the sleep", "[syncWait][sleep]") {
  const auto before = std::chrono::steady_clock::now();
  syncWait(coexec::sleepFor(2ms));
  CHECK(std::chrono::steady_clock::now() - before >= 2ms);
}

TEST_CASE("syncWait of user awaitables", "[syncWait][user]") {
  CHECK(syncWait(ReadyAwaiter(3)) == 3);
  ReadyAwaiter named(4);
  CHECK(syncWait(named) == 4);
  CHECK(syncWait(Awaitable(5)) == 10);
  CHECK(syncWait(RvalueOnly("moved")) == "moved");
  RvalueOnly rvalueNamed("named");
  CHECK(syncWait(std::move(rvalueNamed)) == "named");
  Box box;
  int& ref = syncWait(box);
  CHECK(&ref == &box.value);

  std::thread::id resumedOn;
  CHECK(syncWait(ThreadAwaiter(6, &resumedOn)) == 6);
  CHECK(resumedOn != std::thread::id());
  CHECK(resumedOn != coexec::thisThreadId());  // resumed by the awaiter's own thread
  CHECK_THROWS_AS(syncWait(ThreadAwaiter(-1, &resumedOn)), AnyError);
}

TEST_CASE("syncWait of an awaitable on a pool thread throws std::logic_error", "[syncWait][pool]") {
  ThreadPoolExecutor pool = makePool();
  ThreadPoolExecutor other = makePool();
  Future<int> outer = pool.submit([&] {
    Future<int> inner = other.submit([] { return 1; });
    try {
      (void)syncWait(inner);
      return 0;
    } catch (const std::logic_error&) {
      return 2;
    }
  });
  CHECK(outer.get() == 2);
  Future<int> user = pool.submit([] {
    try {
      return syncWait(ReadyAwaiter(1));
    } catch (const std::logic_error&) {
      return 3;
    }
  });
  CHECK(user.get() == 3);
}
