// SPDX-License-Identifier: BSL-1.0
#include "coexec/Task.h"

// Task<T>: lazy start; values, void, references and move-only values;
// exceptions through nested awaits; the constant-stack guarantee of a very
// deep synchronous chain; single await; and the frame of a Task that is never
// awaited (or never resumed) destroyed exactly once, which ASan/LSan check.

#include <coroutine>
#include <cstddef>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "Assertions.h"

#include "CoroutineTestSupport.h"
#include "coexec/SyncWait.h"

using coexec::syncWait;
using coexec::Task;
using coexec::test::Lifetimes;
using coexec::test::runOnStackOf;
using coexec::test::Tracker;

static_assert(std::is_same_v<Task<>, Task<void>>);
static_assert(!std::is_copy_constructible_v<Task<int>>);
static_assert(!std::is_copy_assignable_v<Task<int>>);
static_assert(std::is_nothrow_move_constructible_v<Task<int>>);
static_assert(std::is_nothrow_move_assignable_v<Task<int>>);
static_assert(std::is_same_v<Task<int&>::value_type, int&>);

namespace {

struct DeepError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Task<int> answer() { co_return 42; }

Task<void> setFlag(bool& flag) {
  flag = true;
  co_return;
}

Task<int&> pick(int& a, int& b, bool first) {
  if (first) co_return a;
  co_return b;
}

Task<std::unique_ptr<std::string>> makeBox(std::string text) {
  co_return std::make_unique<std::string>(std::move(text));
}

Task<int> addOne(Task<int> inner) { co_return co_await std::move(inner) + 1; }

// ---- exceptions through three levels ------------------------------------------

Task<int> level3(bool fail) {
  if (fail) throw DeepError("thrown at level 3");
  co_return 3;
}

Task<int> level2(bool fail, bool& level2Continued) {
  const int value = co_await level3(fail);
  level2Continued = true;
  co_return value + 20;
}

Task<int> level1(bool fail, bool& level1Continued, bool& level2Continued) {
  const int value = co_await level2(fail, level2Continued);
  level1Continued = true;
  co_return value + 100;
}

// ---- the deep chain -------------------------------------------------------------

Task<int> chain(int n) {
  if (n == 0) co_return 0;
  co_return co_await chain(n - 1) + 1;
}

/// The stack the constant-stack tests run on. A nested resumption costs at
/// least one call frame (the resume, a few dozen bytes even when optimised;
/// 100 or more at -O0 and under the sanitizers), so a chain of a million that
/// nested would need tens of megabytes: it overflows this stack whatever
/// `ulimit -s` says, while the trampoline needs a few kilobytes.
constexpr std::size_t kSmallStack = 256 * 1024;

Task<long> sumOfAnswers(int count) {
  long sum = 0;
  for (int i = 0; i < count; ++i)
    sum += co_await answer();
  co_return sum;
}

// ---- lifetimes ---------------------------------------------------------------------

Task<int> holdsParameter([[maybe_unused]] Tracker tracker, bool& ran) {
  ran = true;
  co_return 1;
}

Task<int> holdsLocal(Lifetimes& lifetimes) {
  Tracker local(lifetimes);
  co_await std::suspend_always{};  // never resumed in the test below
  co_return 2;
}

/// A coroutine type that is not coexec's: it starts eagerly and is resumed by
/// whoever completes what it awaits, outside any coexec trampoline.
struct Detached {
  struct promise_type {
    Detached get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

Detached awaitChainDetached(int depth, int& out) { out = co_await chain(depth); }

}  // namespace

TEST_CASE("a Task does not run until it is awaited", "[task]") {
  bool ran = false;
  Task<void> task = setFlag(ran);
  CHECK(task.valid());
  CHECK_FALSE(ran);
  syncWait(std::move(task));
  CHECK(ran);
}

TEST_CASE("awaiting a Task<int> returns its value", "[task]") {
  CHECK(syncWait(answer()) == 42);
  CHECK(syncWait(addOne(addOne(answer()))) == 44);
}

TEST_CASE("awaiting a Task<void> runs it to the end", "[task]") {
  bool inner = false;
  bool outer = false;
  auto awaitVoid = [](bool& innerFlag, bool& outerFlag) -> Task<void> {
    co_await setFlag(innerFlag);
    outerFlag = innerFlag;
  };
  syncWait(awaitVoid(inner, outer));
  CHECK(inner);
  CHECK(outer);
}

TEST_CASE("awaiting a Task<T&> returns a reference to the very object the task chose", "[task]") {
  int a = 1;
  int b = 2;
  auto writeThrough = [](int& x, int& y) -> Task<bool> {
    int& chosen = co_await pick(x, y, false);
    chosen = 7;
    co_return &chosen == &y;
  };
  CHECK(syncWait(writeThrough(a, b)));
  CHECK(a == 1);
  CHECK(b == 7);
  int& direct = syncWait(pick(a, b, true));
  CHECK(&direct == &a);
}

TEST_CASE("a Task of a move-only type hands its value over", "[task]") {
  std::unique_ptr<std::string> box = syncWait(makeBox("moved out"));
  REQUIRE(box);
  CHECK(*box == "moved out");
}

TEST_CASE("an exception propagates through three levels of awaiting Tasks", "[task][exceptions]") {
  bool level1Continued = false;
  bool level2Continued = false;
  CHECK_THROWS_MATCHES(syncWait(level1(true, level1Continued, level2Continued)), DeepError,
                       Catch::Matchers::Message("thrown at level 3"));
  CHECK_FALSE(level2Continued);
  CHECK_FALSE(level1Continued);

  // The same chain without the failure returns through every level.
  CHECK(syncWait(level1(false, level1Continued, level2Continued)) == 123);
  CHECK(level2Continued);
  CHECK(level1Continued);
}

TEST_CASE("an exception from two levels down can be caught and handled by the awaiter", "[task][exceptions]") {
  auto handles = []() -> Task<std::string> {
    bool unused = false;
    try {
      (void)co_await level2(true, unused);
    } catch (const DeepError& e) {
      co_return std::string("caught: ") + e.what();
    }
    co_return "not caught";
  };
  CHECK(syncWait(handles()) == "caught: thrown at level 3");
}

TEST_CASE("a one-million-deep chain of synchronously completing Tasks runs in constant stack", "[task][stack]") {
  // Every transfer goes through the trampoline, so this holds at -O0 and under
  // the sanitizers, not only where the compiler makes symmetric transfer a
  // tail call. On a 256 KiB stack, so that a chain that nested would overflow
  // even where the main thread's stack is unlimited (see kSmallStack).
  CHECK(runOnStackOf(kSmallStack, [] { return syncWait(chain(1'000'000)); }) == 1'000'000);
}

TEST_CASE("a million awaits of synchronously completing Tasks in a loop run in constant stack", "[task][stack]") {
  CHECK(runOnStackOf(kSmallStack, [] { return syncWait(sumOfAnswers(1'000'000)); }) == 42'000'000L);
}

TEST_CASE("a Task awaited by a coroutine outside coexec completes by symmetric transfer", "[task]") {
  int out = -1;
  awaitChainDetached(1000, out);  // completes synchronously: nothing in the chain suspends
  CHECK(out == 1000);
}

TEST_CASE("a Task destroyed without being awaited destroys its frame without running it", "[task][lifetime]") {
  Lifetimes lifetimes;
  bool ran = false;
  {
    Task<int> task = holdsParameter(Tracker(lifetimes), ran);
    CHECK(lifetimes.alive() == 1);  // the frame's copy of the parameter
  }
  CHECK_FALSE(ran);
  CHECK(lifetimes.constructed.load() >= 2);
  CHECK(lifetimes.alive() == 0);
}

TEST_CASE("a Task destroyed while suspended destroys the locals in its frame", "[task][lifetime]") {
  Lifetimes lifetimes;
  {
    Task<int> task = holdsLocal(lifetimes);
    task.handle().resume();  // runs up to the suspend_always
    CHECK(lifetimes.alive() == 1);
  }
  CHECK(lifetimes.constructed.load() == 1);
  CHECK(lifetimes.destroyed.load() == 1);
}

TEST_CASE("move-assigning a Task destroys the frame it held", "[task][lifetime]") {
  Lifetimes lifetimes;
  bool ran = false;
  Task<int> task = holdsParameter(Tracker(lifetimes), ran);
  CHECK(lifetimes.alive() == 1);
  task = answer();
  CHECK(lifetimes.alive() == 0);
  Task<int> other = std::move(task);
  CHECK_FALSE(task.valid());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  CHECK(other.valid());
  CHECK(syncWait(std::move(other)) == 42);
  CHECK_FALSE(ran);
}

TEST_CASE("awaiting a Task a second time throws std::logic_error", "[task]") {
  auto awaitTwice = []() -> Task<int> {
    Task<int> task = answer();
    const int first = co_await task;
    const int second = co_await task;
    co_return first + second;
  };
  CHECK_THROWS_AS(syncWait(awaitTwice()), std::logic_error);
  CHECK_THROWS_WITH(syncWait(awaitTwice()),
                    Catch::Matchers::StartsWith("coexec::Task::operator co_await: the Task was already started"));
}

TEST_CASE("awaiting an empty or moved-from Task throws std::logic_error", "[task]") {
  auto awaitEmpty = []() -> Task<int> {
    Task<int> empty;
    co_return co_await std::move(empty);
  };
  CHECK_THROWS_AS(syncWait(awaitEmpty()), std::logic_error);
  CHECK_THROWS_AS(syncWait(awaitEmpty()), std::invalid_argument);
  CHECK_THROWS_WITH(syncWait(awaitEmpty()),
                    "coexec::Task::operator co_await: the Task is empty (default-constructed or moved from), so there "
                    "is no coroutine to start.");
  auto awaitMovedFrom = []() -> Task<int> {
    Task<int> task = answer();
    Task<int> thief = std::move(task);
    co_return co_await std::move(task);  // NOLINT(bugprone-use-after-move): the point of the test
  };
  CHECK_THROWS_AS(syncWait(awaitMovedFrom()), std::logic_error);
}
