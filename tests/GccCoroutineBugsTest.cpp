// SPDX-License-Identifier: BSL-1.0
#include "coexec/Task.h"

// Regression tests for two GCC 12 coroutine bugs (clang 14 gets both right),
// the findings coexec's refusals rest on, and the safe forms coexec's docs
// recommend (docs/coroutines.md, "GCC 12 bugs and the safe forms"):
//
// (a) A braced aggregate temporary used as the operand of co_await, whose
//     await_suspend returns false, is destroyed twice:
//         co_await Awaiter{Tracker{}, x};
// (b) An aggregate-initialized temporary created inside a co_await
//     expression has its members destroyed once more than they were built.
//     A lambda closure is one, so its captures are destroyed twice:
//         co_await pool.submit([t] { ... });
//     and so is a braced aggregate argument (`f(Agg{t})`), or a lambda
//     temporary handed to a constructor (`std::vector<std::function<...>>(2,
//     [t] {...})`).
//
// Each bug test CHECKs that the bug is present on GCC 12 (destroyed ==
// constructed + 1), so that a compiler upgrade that fixes it shows up here,
// and CHECKs balance everywhere else. The tracked objects own nothing, so the
// extra destructor call is only counted, never harmful.
//
// Moving from the lambda does not make (b) harmless: GCC 12 constructs the
// capture in one place and hands the callee a bitwise copy of it, then
// destroys both. A capture that owns memory (a long std::string) is freed
// twice, in every build. What (b) cannot hurt, found here and relied on:
// - a temporary whose type is trivially destructible (a capture-less lambda,
//   `[&]`, captures of pointers and integers): a second destruction of it
//   does nothing (AwaitableFormsTest runs each such form under ASan);
// - a temporary built by a constructor (a Task, a class callable), which is
//   destroyed once;
// - a range moved in, `co_await pool.invokeAll(std::move(tasks))` (an xvalue:
//   no temporary is created in the expression), destroyed once;
// - a braced list inside a co_await expression, which GCC 12 does not compile
//   at all ("array used as initializer": compileFail.gccBracedListInCoAwait).
// So coexec refuses exactly the forms (b) can hurt through it: on GCC 12, the
// Future of a submission that took over a callable temporary that is not
// trivially destructible cannot be awaited as a temporary
// (detail/OwningCallableFuture.h; compileFail.coAwaitTemporary and its
// siblings check each refused form's message). The minimal reproducers below
// use plain functions, not coexec; the findings through coexec's API (the
// Future of pool.submit, invokeAll and invokeAny, the Task parameters
// accepted and refused) are in GccCoroutineBugsApiTest.cpp.
//
// Which parameters (b) reaches: every one a lambda temporary can bind to. A
// coroutine's parameter taken by value, by forwarding reference or by const
// reference, given `[t] {...}` inside a co_await expression, sees the
// captures destroyed once more than built; given a named lambda (copied, or
// moved with std::move), never. Heap-owning captures make that a double free
// at -O2 ("double free detected in tcache 2") and under ASan ("attempting
// double-free"), the shape `co_await offload(pool, [s] {...})` of a helper
// `template <class F> Task<R> offload(ThreadPoolExecutor&, F f)` among them.
// A std::string or a class callable built by a constructor, passed as a
// temporary, is destroyed once; a std::function parameter given a lambda
// temporary is not (the lambda inside the conversion is (b) again).
// A Task coroutine's parameters are the one place coexec sees: on GCC 12 it
// refuses a Task parameter that takes over a lambda that is not trivially
// destructible, declared by value or as an rvalue reference, whatever the
// argument (a type cannot tell a temporary from std::move of a named lambda;
// detail/TaskPromise.h, compileFail.taskClosureParameter). Parameters of
// lvalue reference type are accepted, so a `const F&` parameter given a
// temporary is not refused: the same type serves every named lambda.

#include <coroutine>
#include <exception>
#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "CoroutineTestSupport.h"
#include "GccCoroutineBugsTestSupport.h"
#include "coexec/SyncWait.h"

using coexec::syncWait;
using coexec::Task;
using coexec::test::checkOneDestructionTooManyOnGcc12;
using coexec::test::Lifetimes;
using coexec::test::Tracker;

namespace {

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

/// A ready awaitable that runs `f` first and ignores the aggregate.
struct Tracked {
  Tracker tracker;
};
template <class F>
ReadyValue runNowWith(F&& f, const Tracked& /*aggregate*/) {
  return ReadyValue{f()};
}

/// A callable that is not an aggregate: it has a constructor.
class ConstructedCallable {
 public:
  explicit ConstructedCallable(Tracker tracker) : tracker_(std::move(tracker)) {}
  int operator()() const { return 4; }

 private:
  Tracker tracker_;
};

/// A ready awaitable that takes a range over and reports its size.
template <class Range>
ReadyValue takeRange(Range&& range) {
  const std::remove_cvref_t<Range> owned(std::forward<Range>(range));
  return ReadyValue{static_cast<int>(owned.size())};
}

/// A coroutine type of the test's own, which coexec does not see: runs to
/// its co_return when called, and `co_await` of it gives the value.
class Immediate {
 public:
  struct promise_type {
    Immediate get_return_object() noexcept {
      return Immediate(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_value(int v) noexcept { value = v; }
    void unhandled_exception() noexcept { std::terminate(); }
    int value = 0;
  };
  Immediate(Immediate&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Immediate(const Immediate&) = delete;
  Immediate& operator=(const Immediate&) = delete;
  Immediate& operator=(Immediate&&) = delete;
  ~Immediate() {
    if (handle_) handle_.destroy();
  }
  bool await_ready() const noexcept { return true; }
  void await_suspend(std::coroutine_handle<> /*awaiting*/) const noexcept {}
  int await_resume() const noexcept { return handle_.promise().value; }

 private:
  explicit Immediate(std::coroutine_handle<promise_type> handle) noexcept : handle_(handle) {}
  std::coroutine_handle<promise_type> handle_;
};

// A coroutine parameter of each kind a lambda temporary binds to.
template <class F>
Immediate callByValue(F f) {
  co_return f();
}
template <class F>
Immediate callByForwardingReference(F&& f) {
  co_return f();
}
template <class F>
Immediate callByConstReference(const F& f) {
  co_return f();
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

// (b) through a braced aggregate argument: not a lambda, not the awaiter.
Task<int> awaitCallWithBracedAggregate(Lifetimes& lifetimes) {
  Tracker tracker(lifetimes);
  const int value = co_await runNowWith([] { return 3; }, Tracked{tracker});
  co_return value;
}

// (b) through a lambda temporary handed to a constructor in the expression.
Task<int> awaitRangeBuiltFromLambdaTemporary(Lifetimes& lifetimes) {
  Tracker tracker(lifetimes);
  const int value = co_await takeRange(std::vector<std::function<int()>>(2, [tracker] {
    (void)tracker;
    return 1;
  }));
  co_return value;
}

// What (b) cannot hurt: a callable temporary built by a constructor.
Task<int> awaitCallOfConstructedTemporary(Lifetimes& lifetimes) {
  const int value = co_await runNow(ConstructedCallable(Tracker(lifetimes)));
  co_return value;
}

// What (b) cannot hurt: a named range moved in.
Task<int> awaitMovedRange(Lifetimes& lifetimes) {
  Tracker tracker(lifetimes);
  std::vector<std::function<int()>> tasks;
  tasks.emplace_back([tracker] {
    (void)tracker;
    return 1;
  });
  const int value = co_await takeRange(std::move(tasks));
  co_return value;
}

// (b) through a coroutine's parameter: a lambda temporary handed to a
// coroutine of the test's own (by value, by forwarding reference, by const
// reference) inside a co_await expression.
Task<int> awaitCoroutineGivenLambdaTemporary(Lifetimes& lifetimes, int kind) {
  Tracker tracker(lifetimes);
  switch (kind) {
    case 0:
      co_return co_await callByValue([tracker] {
        (void)tracker;
        return 10;
      });
    case 1:
      co_return co_await callByForwardingReference([tracker] {
        (void)tracker;
        return 11;
      });
    default:
      co_return co_await callByConstReference([tracker] {
        (void)tracker;
        return 12;
      });
  }
}

// What (b) cannot hurt: a named lambda copied or moved into a by-value
// coroutine parameter.
Task<int> awaitCoroutineGivenNamedLambda(Lifetimes& lifetimes) {
  Tracker tracker(lifetimes);
  auto work = [tracker] {
    (void)tracker;
    return 13;
  };
  const int copied = co_await callByValue(work);
  const int moved = co_await callByValue(std::move(work));
  co_return copied + moved;
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

}  // namespace

TEST_CASE("GCC 12 destroys a braced aggregate co_await operand twice when await_suspend returns false", "[gcc-bug]") {
  Lifetimes lifetimes;
  CHECK(syncWait(awaitBracedAggregate(lifetimes)) == 5);
  checkOneDestructionTooManyOnGcc12(lifetimes);
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
  checkOneDestructionTooManyOnGcc12(lifetimes);
}

TEST_CASE("GCC 12 destroys a braced aggregate argument inside a co_await expression once more than it built it",
          "[gcc-bug]") {
  Lifetimes lifetimes;
  CHECK(syncWait(awaitCallWithBracedAggregate(lifetimes)) == 3);
  checkOneDestructionTooManyOnGcc12(lifetimes);
}

TEST_CASE("GCC 12 destroys the captures of a lambda temporary handed to a constructor in a co_await expression twice",
          "[gcc-bug]") {
  Lifetimes lifetimes;
  CHECK(syncWait(awaitRangeBuiltFromLambdaTemporary(lifetimes)) == 2);
  checkOneDestructionTooManyOnGcc12(lifetimes);
}

TEST_CASE("GCC 12 destroys the captures of a lambda temporary handed to a coroutine's parameter in a co_await "
          "expression once more than it built them, by value, by forwarding reference and by const reference",
          "[gcc-bug]") {
  for (int kind = 0; kind < 3; ++kind) {
    CAPTURE(kind);
    Lifetimes lifetimes;
    CHECK(syncWait(awaitCoroutineGivenLambdaTemporary(lifetimes, kind)) == 10 + kind);
    checkOneDestructionTooManyOnGcc12(lifetimes);
  }
}

TEST_CASE("a named lambda copied or moved into a coroutine's by-value parameter is destroyed exactly once on every "
          "compiler",
          "[gcc-bug][safe]") {
  Lifetimes lifetimes;
  CHECK(syncWait(awaitCoroutineGivenNamedLambda(lifetimes)) == 26);
  CAPTURE(lifetimes.constructed.load(), lifetimes.destroyed.load());
  CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load());
}

TEST_CASE("a callable temporary built by a constructor in a co_await expression is destroyed exactly once on every "
          "compiler",
          "[gcc-bug][safe]") {
  Lifetimes lifetimes;
  CHECK(syncWait(awaitCallOfConstructedTemporary(lifetimes)) == 4);
  CAPTURE(lifetimes.constructed.load(), lifetimes.destroyed.load());
  CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load());
}

TEST_CASE("a named range moved into a co_await expression is destroyed exactly once on every compiler",
          "[gcc-bug][safe]") {
  Lifetimes lifetimes;
  CHECK(syncWait(awaitMovedRange(lifetimes)) == 1);
  CAPTURE(lifetimes.constructed.load(), lifetimes.destroyed.load());
  CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load());
}
