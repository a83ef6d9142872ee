// SPDX-License-Identifier: BSL-1.0
// The GCC 12 coroutine bugs through coexec's own API: co_await of
// pool.submit's Future (named, and as a temporary where the compiler gets it
// right), invokeAll and invokeAny of a moved range, and the Task parameters
// coexec accepts and, on GCC 12, refuses. The bugs, the minimal reproducers
// with plain functions and what coexec's refusals rest on are in
// GccCoroutineBugsTest.cpp. The tests CHECK that what they build is
// released exactly once on every compiler, or STATIC_REQUIRE which forms
// compile and which a Task refuses on GCC 12.

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "CoroutineTestSupport.h"
#include "GccCoroutineBugsTestSupport.h"
#include "coexec/Future.h"
#include "coexec/InvokeAll.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using coexec::Future;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::test::Lifetimes;
using coexec::test::Owner;
using coexec::test::Resources;
using coexec::test::taggedPool;
using coexec::test::Tracker;

namespace {

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
// The unsafe form (b) through coexec, where the compiler gets it right.
Task<int> awaitSubmitOfLambdaTemporary(ThreadPoolExecutor& pool, Lifetimes& lifetimes) {
  Tracker tracker(lifetimes);
  const int value = co_await pool.submit([tracker] {
    (void)tracker;
    return 7;
  });
  co_return value;
}

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

// What (b) cannot hurt, through coexec: invokeAll and invokeAny of a moved
// range (GccCoroutineBugsTest's awaitMovedRange), awaited as a temporary
// (accepted on every compiler).
Task<int> awaitInvokeAllOfMovedRange(ThreadPoolExecutor& pool, Lifetimes& lifetimes, const std::string& text) {
  Tracker tracker(lifetimes);
  std::vector<std::function<int()>> tasks;
  for (int i = 0; i < 3; ++i) {
    tasks.emplace_back([tracker, text] { return static_cast<int>(text.size()); });
  }
  const std::vector<int> sizes = co_await pool.invokeAll(std::move(tasks));
  std::vector<std::function<int()>> more;
  more.emplace_back([tracker, text] { return static_cast<int>(text.size()); });
  const int any = co_await pool.invokeAny(std::move(more));
  co_return sizes.at(0) + sizes.at(1) + sizes.at(2) + any;
}

// The Task parameters accepted on every compiler, each awaited inside a
// co_await expression with a capture that owns memory (a long std::string):
// the lambda taken by reference and passed by name.
template <class F>
Task<std::size_t> offloadForwarding(ThreadPoolExecutor& pool, F&& f) {
  auto future = pool.submit(f);
  co_return co_await future;
}
template <class F>
Task<std::size_t> offloadConstReference(ThreadPoolExecutor& pool, const F& f) {
  auto future = pool.submit(f);
  co_return co_await future;
}
// A lambda taken by value that is trivially destructible.
template <class F>
Task<std::size_t> offloadByValue(ThreadPoolExecutor& pool, F f) {
  auto future = pool.submit(f);
  co_return co_await future;
}
Task<std::size_t> sizeOfString(std::string s) { co_return s.size(); }
Task<std::size_t> callFunction(std::function<std::size_t()> f) { co_return f(); }

/// A callable class with a constructor, a Tracker and a std::string: not a
/// lambda, so a Task may take it by value.
class OwningCallable {
 public:
  OwningCallable(Tracker tracker, std::string text) : tracker_(std::move(tracker)), text_(std::move(text)) {}
  std::size_t operator()() const { return text_.size(); }

 private:
  Tracker tracker_;
  std::string text_;
};
Task<std::size_t> callOwningCallable(OwningCallable f) { co_return f(); }

Task<std::size_t> awaitAcceptedTaskParameters(ThreadPoolExecutor& pool, Lifetimes& lifetimes, std::string s) {
  Tracker tracker(lifetimes);
  auto work = [s, tracker] { return s.size(); };
  std::size_t total = co_await offloadForwarding(pool, work);
  total += co_await offloadConstReference(pool, work);
  total += co_await offloadByValue(pool, [&s] { return s.size(); });
  total += co_await offloadByValue(pool, [] { return std::size_t{1}; });
  total += co_await sizeOfString(std::string(300, 'v'));
  total += co_await sizeOfString(s);
  std::function<std::size_t()> function = work;
  total += co_await callFunction(std::move(function));
  total += co_await callOwningCallable(OwningCallable(Tracker(lifetimes), s));
  auto coroutineLambda = [s, tracker]() -> Task<std::size_t> { co_return s.size(); };
  total += co_await coroutineLambda();
  co_return total;
}

}  // namespace

// Where the compiler has the bug, the refusal of `co_await` on a Future
// temporary of an owning callable is a static_assert in the body of its rvalue
// operator co_await: a requires-expression cannot see it, so the CTest test
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

TEST_CASE("co_await pool.invokeAll(std::move(tasks)) and invokeAny destroy the moved range exactly once on every "
          "compiler",
          "[gcc-bug][safe][invokeAll]") {
  Lifetimes lifetimes;
  const std::string text(300, 'r');  // long: on the heap, so ASan would see a double free
  {
    ThreadPoolExecutor pool(taggedPool("gcc", 2, 2, WorkQueue::bounded(8)));
    CHECK(syncWait(awaitInvokeAllOfMovedRange(pool, lifetimes, text)) == 4 * 300);
  }
  CAPTURE(lifetimes.constructed.load(), lifetimes.destroyed.load());
  CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load());
}

TEST_CASE("Task parameters that GCC 12 does not refuse build and release an owning capture once, inside a co_await "
          "expression",
          "[gcc-bug][safe][task]") {
  Lifetimes lifetimes;
  const std::string text(300, 't');  // long: on the heap, so ASan would see a double free
  {
    ThreadPoolExecutor pool(taggedPool("gcc", 1, 1, WorkQueue::bounded(8)));
    // 300 each but the capture-less lambda's 1.
    CHECK(syncWait(awaitAcceptedTaskParameters(pool, lifetimes, text)) == 8 * 300 + 1);
  }
  CAPTURE(lifetimes.constructed.load(), lifetimes.destroyed.load());
  CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load());
}

#if COEXEC_DETAIL_REFUSE_CLOSURE_PARAMETERS
TEST_CASE("on GCC 12 a Task refuses exactly the parameters that take over a lambda that is not trivially "
          "destructible",
          "[gcc-bug][task]") {
  using coexec::detail::takesOverOwningClosure;
  const std::string s;
  auto owning = [s] { return s.size(); };
  auto owningGeneric = [s](auto n) { return s.size() + n; };
  auto borrowing = [&s] { return s.size(); };
  using Owning = decltype(owning);
  // Refused: the closure by value or as an rvalue reference.
  STATIC_REQUIRE(takesOverOwningClosure<Owning>());
  STATIC_REQUIRE(takesOverOwningClosure<Owning&&>());
  STATIC_REQUIRE(takesOverOwningClosure<const Owning>());
  STATIC_REQUIRE(takesOverOwningClosure<decltype(owningGeneric)>());
  // Accepted: lvalue references, trivially destructible lambdas, other types.
  STATIC_REQUIRE_FALSE(takesOverOwningClosure<Owning&>());
  STATIC_REQUIRE_FALSE(takesOverOwningClosure<const Owning&>());
  STATIC_REQUIRE_FALSE(takesOverOwningClosure<decltype(borrowing)>());
  STATIC_REQUIRE_FALSE(takesOverOwningClosure<std::function<std::size_t()>>());
  STATIC_REQUIRE_FALSE(takesOverOwningClosure<OwningCallable>());
  STATIC_REQUIRE_FALSE(takesOverOwningClosure<std::string>());
  STATIC_REQUIRE_FALSE(takesOverOwningClosure<std::vector<Owning>>());
  STATIC_REQUIRE_FALSE(takesOverOwningClosure<int>());
}
#endif
