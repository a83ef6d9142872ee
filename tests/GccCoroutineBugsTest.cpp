#include "coexec/Task.h"

// Regression tests for two GCC 12 coroutine bugs (clang 14 gets both right),
// and for the safe forms coexec's docs recommend (docs/coroutines.md, "GCC 12
// bugs and the safe forms"):
//
// (a) A braced aggregate temporary used as the operand of co_await, whose
//     await_suspend returns false, is destroyed twice:
//         co_await Awaiter{Tracker{}, x};
// (b) A lambda temporary with non-trivially-destructible captures inside a
//     co_await expression is destroyed twice (its captures are destroyed once
//     more than they were constructed):
//         co_await pool.submit([t] { ... });
//
// Each bug test CHECKs that the bug is present on GCC 12 (destroyed ==
// constructed + 1), so that a compiler upgrade that fixes it shows up here,
// and CHECKs balance everywhere else. The tracked objects own nothing, so the
// extra destructor call is only counted, never harmful. The safe form, naming
// the awaiter or the Future first, is balanced on every compiler.
//
// Moving from the lambda does not make (b) harmless: GCC 12 constructs the
// capture in one place and hands the callee a bitwise copy of it, then
// destroys both. A capture that owns memory (a long std::string) is freed
// twice, in every build. So coexec makes the unsafe form impossible where the
// bug exists: on GCC 12, Future's rvalue operator co_await fails a
// static_assert that names the fix, and `co_await pool.submit([s] {...})`
// does not compile (the CTest test compileFail.coAwaitTemporary builds
// tests/compile-fail/CoAwaitTemporary.cpp and checks the message); the named
// form compiles everywhere. The minimal reproducer of (b) below uses a plain
// function, not coexec.

#include <atomic>
#include <coroutine>
#include <string>
#include <utility>

#include <catch2/catch.hpp>

#include "CoroutineTestSupport.h"
#include "coexec/SyncWait.h"
#include "coexec/ThreadPoolExecutor.h"

using coexec::Future;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::test::Lifetimes;
using coexec::test::taggedPool;
using coexec::test::Tracker;

namespace {

#if defined(__GNUC__) && __GNUC__ == 12 && !defined(__clang__)
constexpr bool kGcc12 = true;
#else
constexpr bool kGcc12 = false;
#endif

/// An aggregate awaiter that never suspends (await_suspend returns false).
struct AggregateAwaiter {
  Tracker tracker;
  int value;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> /*awaiting*/) const noexcept { return false; }
  int await_resume() const noexcept { return value; }
};

/// The same awaiter with a constructor: not an aggregate (coexec's own
/// awaiters are written this way).
class ConstructedAwaiter {
 public:
  ConstructedAwaiter(Tracker tracker, int value) : tracker_(std::move(tracker)), value_(value) {}
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> /*awaiting*/) const noexcept { return false; }
  int await_resume() const noexcept { return value_; }

 private:
  Tracker tracker_;
  int value_;
};

/// Releases of an imaginary resource: a copy acquires one, a move transfers
/// it, a moved-from Owner has none. released > acquired means a resource
/// (say, a std::string's heap buffer) would be freed twice.
struct Resources {
  std::atomic<int> acquired{0};
  std::atomic<int> released{0};
};

class Owner {
 public:
  explicit Owner(Resources& resources) noexcept : resources_(&resources) { resources_->acquired.fetch_add(1); }
  Owner(const Owner& other) noexcept : resources_(other.resources_) { resources_->acquired.fetch_add(1); }
  Owner(Owner&& other) noexcept : resources_(other.resources_), owns_(std::exchange(other.owns_, false)) {}
  Owner& operator=(const Owner&) = delete;
  Owner& operator=(Owner&&) = delete;
  ~Owner() {
    if (owns_) resources_->released.fetch_add(1);
  }

 private:
  Resources* resources_;
  bool owns_ = true;
};

/// A ready awaitable that runs `f` first: the shape of `co_await pool.submit(f)`
/// without coexec.
struct ReadyValue {
  int value;
  bool await_ready() const noexcept { return true; }
  void await_suspend(std::coroutine_handle<> /*awaiting*/) const noexcept {}
  int await_resume() const noexcept { return value; }
};
template <class F>
ReadyValue runNow(F&& f) {
  return ReadyValue{f()};
}

// The minimal reproducer of (b): a lambda temporary with a tracked capture.
Task<int> awaitCallOfLambdaTemporary(Lifetimes& lifetimes) {
  Tracker tracker(lifetimes);
  const int value = co_await runNow([tracker] {
    (void)tracker;
    return 3;
  });
  co_return value;
}

// The unsafe form (a), on purpose.
Task<int> awaitBracedAggregate(Lifetimes& lifetimes) {
  const int value = co_await AggregateAwaiter{Tracker(lifetimes), 5};
  co_return value;
}

// The safe form of (a): name the awaiter first.
Task<int> awaitNamedAggregate(Lifetimes& lifetimes) {
  AggregateAwaiter awaiter{Tracker(lifetimes), 5};
  const int value = co_await awaiter;
  co_return value;
}

Task<int> awaitConstructedTemporary(Lifetimes& lifetimes) {
  const int value = co_await ConstructedAwaiter(Tracker(lifetimes), 5);
  co_return value;
}

#if !COEXEC_GCC_CO_AWAIT_TEMPORARY_BUG
// The unsafe form (b) through coexec, where the compiler gets it right.
Task<int> awaitSubmitOfLambdaTemporary(ThreadPoolExecutor& pool, Lifetimes& lifetimes) {
  Tracker tracker(lifetimes);
  const int value = co_await pool.submit([tracker] {
    (void)tracker;
    return 7;
  });
  co_return value;
}

#endif

// The safe form of (b): name the Future first.
Task<int> awaitNamedFuture(ThreadPoolExecutor& pool, Lifetimes& lifetimes) {
  Tracker tracker(lifetimes);
  Future<int> future = pool.submit([tracker] {
    (void)tracker;
    return 7;
  });
  const int value = co_await future;
  co_return value;
}

#if !COEXEC_GCC_CO_AWAIT_TEMPORARY_BUG
// The unsafe form (b) with a capture that owns a resource.
Task<int> awaitSubmitOfOwningLambda(ThreadPoolExecutor& pool, Resources& resources) {
  Owner owner(resources);
  const int value = co_await pool.submit([owner] {
    (void)owner;
    return 9;
  });
  co_return value;
}

// The unsafe form (b) with a long std::string: a double free on GCC 12.
Task<std::string> awaitSubmitOfStringLambda(ThreadPoolExecutor& pool, std::string s) {
  co_return co_await pool.submit([s] { return s; });
}
#endif

}  // namespace

TEST_CASE("GCC 12 destroys a braced aggregate co_await operand twice when await_suspend returns false", "[gcc-bug]") {
  Lifetimes lifetimes;
  CHECK(syncWait(awaitBracedAggregate(lifetimes)) == 5);
  CAPTURE(lifetimes.constructed.load(), lifetimes.destroyed.load());
  if constexpr (kGcc12) {
    CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load() + 1);  // the bug is still there
  } else {
    CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load());
  }
}

TEST_CASE("a named aggregate awaiter is destroyed exactly once on every compiler", "[gcc-bug][safe]") {
  Lifetimes lifetimes;
  CHECK(syncWait(awaitNamedAggregate(lifetimes)) == 5);
  CAPTURE(lifetimes.constructed.load(), lifetimes.destroyed.load());
  CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load());
}

TEST_CASE("an awaiter temporary with a constructor is destroyed exactly once on every compiler", "[gcc-bug][safe]") {
  Lifetimes lifetimes;
  CHECK(syncWait(awaitConstructedTemporary(lifetimes)) == 5);
  CAPTURE(lifetimes.constructed.load(), lifetimes.destroyed.load());
  CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load());
}

TEST_CASE("GCC 12 destroys the captures of a lambda temporary in a co_await expression once more than it built them",
          "[gcc-bug]") {
  Lifetimes lifetimes;
  CHECK(syncWait(awaitCallOfLambdaTemporary(lifetimes)) == 3);
  CAPTURE(lifetimes.constructed.load(), lifetimes.destroyed.load());
  if constexpr (kGcc12) {
    CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load() + 1);  // the bug is still there
  } else {
    CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load());
  }
}

// Where the compiler has the bug, the refusal of `co_await` on a Future
// temporary is a static_assert in the body of the rvalue operator co_await: a
// requires-expression cannot see it, so the CTest test
// compileFail.coAwaitTemporary checks it by building a file that does it.
TEST_CASE("co_await of a named Future compiles on every compiler", "[gcc-bug][submit]") {
  STATIC_REQUIRE(requires(Future<int> & named) { named.operator co_await(); });  // the safe form, everywhere
}

TEST_CASE("a lambda submitted before the co_await, its Future named, is destroyed exactly once on every compiler",
          "[gcc-bug][safe]") {
  Lifetimes lifetimes;
  {
    ThreadPoolExecutor pool(taggedPool("gcc", 1, 1, WorkQueue::bounded(4)));
    CHECK(syncWait(awaitNamedFuture(pool, lifetimes)) == 7);
  }
  CAPTURE(lifetimes.constructed.load(), lifetimes.destroyed.load());
  CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load());
}

#if !COEXEC_GCC_CO_AWAIT_TEMPORARY_BUG
TEST_CASE("co_await pool.submit of a lambda temporary builds and releases its captures once, where allowed",
          "[gcc-bug][submit]") {
  Lifetimes lifetimes;
  Resources resources;
  {
    ThreadPoolExecutor pool(taggedPool("gcc", 1, 1, WorkQueue::bounded(4)));
    CHECK(syncWait(awaitSubmitOfLambdaTemporary(pool, lifetimes)) == 7);
    CHECK(syncWait(awaitSubmitOfOwningLambda(pool, resources)) == 9);
    const std::string text(300, 's');  // long: on the heap, so ASan would see a double free
    CHECK(syncWait(awaitSubmitOfStringLambda(pool, text)) == text);
  }
  CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load());
  CHECK(resources.released.load() == resources.acquired.load());
}
#endif
