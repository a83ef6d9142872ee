// SPDX-License-Identifier: BSL-1.0
#include "coexec/ThreadPoolExecutor.h"

// The forms of `co_await` that hand coexec a callable inside the co_await
// expression, each with every kind of callable that GCC 12 compiles
// correctly there, run on every compiler and in every build (ASan/UBSan and
// TSan included): capture-less lambdas and lambdas that capture a
// reference (the common `[&]`), a pointer, an integer or a string_view, all
// trivially destructible. Each lambda is written inside the co_await
// expression, as a user writes it (a macro pastes it there: a lambda
// returned by a helper would be a different shape). The forms GCC 12 refuses
// (a capture that owns memory) are in tests/compile-fail/, refused on GCC 12
// and run by compileForms.* elsewhere; the AsyncWait forms are in
// AsioAwaitableFormsTest. docs/coroutines.md lists them all.
//
// Beside the matrix: the accepted forms whose inputs are not trivially
// destructible but are not temporaries GCC 12 destroys twice (a named
// callable, a Task, a moved range, a moved Future<R>), each with a capture
// that counts its lifetimes and one that owns heap memory.

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "AwaitableFormsTestSupport.h"
#include "CoroutineTestSupport.h"
#include "coexec/CancellationToken.h"
#include "coexec/Future.h"
#include "coexec/InvokeAll.h"
#include "coexec/KeyedExecutor.h"
#include "coexec/SerialExecutor.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/TaskGroup.h"
#include "coexec/WhenAll.h"
#include "coexec/WhenAny.h"
#include "coexec/WithTimeout.h"

using namespace std::chrono_literals;
using coexec::Future;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::test::Lifetimes;
using coexec::test::taggedPool;
using coexec::test::Tracker;

namespace {

/// What the forms submit to: a pool, a group, two kinds of lanes and a token.
struct Env {
  ThreadPoolExecutor pool{taggedPool("forms", 2, 2, WorkQueue::bounded(64))};
  coexec::TaskGroup group{pool};
  coexec::SerialExecutor lane{pool};
  coexec::KeyedExecutor lanes{pool, 4};
  coexec::CancellationSource source;
};

// The forms: `co_await` of an expression that submits the callable `f`.
#define COEXEC_FORM_submit(f) co_await env.pool.submit(f)
#define COEXEC_FORM_submitWithToken(f) co_await env.pool.submit(f, env.source.token())
#define COEXEC_FORM_submitWithOptions(f) co_await env.pool.submit(f, {.name = "forms", .priority = 1})
#define COEXEC_FORM_schedule(f) co_await env.pool.schedule(f, 1ms)
#define COEXEC_FORM_withTimeout(f) co_await coexec::withTimeout(env.pool.submit(f), 1h)
#define COEXEC_FORM_whenAll(f) sumOf(co_await coexec::whenAll(env.pool.submit(f), env.pool.submit(f)))
#define COEXEC_FORM_whenAny(f) std::get<0>((co_await coexec::whenAny(env.pool.submit(f))).value)
#define COEXEC_FORM_groupSpawn(f) co_await env.group.spawn(f)
#define COEXEC_FORM_serialSubmit(f) co_await env.lane.submit(f)
#define COEXEC_FORM_keyedSubmit(f) co_await env.lanes.submit(7, f)

/// whenAll's two results, as one (each is 42).
int sumOf(const std::tuple<int, int>& results) { return std::get<0>(results) + std::get<1>(results) - 42; }

// One coroutine per form and capture kind, named form_kind.
#define COEXEC_FORM_COROUTINE(form, kind, f) \
  Task<int> form##_##kind(Env& env) {        \
    COEXEC_FORM_LOCALS;                      \
    co_return COEXEC_FORM_##form(f);         \
  }
COEXEC_CAPTURE_KINDS(COEXEC_FORM_COROUTINE, submit)
COEXEC_CAPTURE_KINDS(COEXEC_FORM_COROUTINE, submitWithToken)
COEXEC_CAPTURE_KINDS(COEXEC_FORM_COROUTINE, submitWithOptions)
COEXEC_CAPTURE_KINDS(COEXEC_FORM_COROUTINE, schedule)
COEXEC_CAPTURE_KINDS(COEXEC_FORM_COROUTINE, withTimeout)
COEXEC_CAPTURE_KINDS(COEXEC_FORM_COROUTINE, whenAll)
COEXEC_CAPTURE_KINDS(COEXEC_FORM_COROUTINE, whenAny)
COEXEC_CAPTURE_KINDS(COEXEC_FORM_COROUTINE, groupSpawn)
COEXEC_CAPTURE_KINDS(COEXEC_FORM_COROUTINE, serialSubmit)
COEXEC_CAPTURE_KINDS(COEXEC_FORM_COROUTINE, keyedSubmit)

/// Runs every capture kind of one form; each must give 42.
#define COEXEC_RUN_KIND(form, kind, f) CHECK(syncWait(form##_##kind(env)) == 42);
#define COEXEC_RUN_FORM(form)                   \
  do {                                          \
    INFO("form: " #form);                       \
    COEXEC_CAPTURE_KINDS(COEXEC_RUN_KIND, form) \
  } while (false)

/// The pool's ledger once everything has run: `tasks` tasks, all completed.
void checkAllCompleted(Env& env, std::uint64_t tasks) {
  const coexec::PoolStats stats = coexec::test::finalStats(env.pool);
  CHECK(stats.taskCount == tasks);
  CHECK(stats.completedTaskCount == tasks);
}

// The accepted forms whose input has a destructor but is no temporary that
// GCC 12 destroys twice, each with a Tracker (its lifetimes are counted) and
// a long std::string (on the heap: ASan sees a double free).

Task<std::size_t> submitOfNamedOwningLambda(ThreadPoolExecutor& pool, Lifetimes& lifetimes, std::string s) {
  Tracker tracker(lifetimes);
  auto work = [tracker, s] { return s.size(); };  // a named callable: submit() copies it
  co_return co_await pool.submit(work);
}

Task<std::size_t> measure(Tracker tracker, std::string s) {
  (void)tracker;
  co_return s.size();
}

Task<std::size_t> submitOfTaskTemporary(ThreadPoolExecutor& pool, Lifetimes& lifetimes, std::string s) {
  co_return co_await pool.submit(measure(Tracker(lifetimes), s));
}

Task<std::size_t> awaitOfMovedPlainFuture(ThreadPoolExecutor& pool, Lifetimes& lifetimes, std::string s) {
  Tracker tracker(lifetimes);
  Future<std::size_t> future = pool.submit([tracker, s] { return s.size(); });
  co_return co_await std::move(future);
}

Task<std::size_t> invokeAllOfMovedRange(ThreadPoolExecutor& pool, Lifetimes& lifetimes, std::string s) {
  Tracker tracker(lifetimes);
  std::vector<std::function<std::size_t()>> tasks;
  tasks.emplace_back([tracker, s] { return s.size(); });
  tasks.emplace_back([tracker, s] { return s.size() + 1; });
  const std::vector<std::size_t> sizes = co_await pool.invokeAll(std::move(tasks));
  co_return sizes.at(0) + sizes.at(1);
}

Task<std::size_t> invokeAnyOfMovedRange(ThreadPoolExecutor& pool, Lifetimes& lifetimes, std::string s) {
  Tracker tracker(lifetimes);
  std::vector<std::function<std::size_t()>> tasks;
  tasks.emplace_back([tracker, s] { return s.size(); });
  co_return co_await pool.invokeAny(std::move(tasks));
}

Task<std::size_t> whenAllOfTaskTemporaries(Lifetimes& lifetimes, std::string s) {
  const auto [a, b] = co_await coexec::whenAll(measure(Tracker(lifetimes), s), measure(Tracker(lifetimes), s));
  co_return a + b;
}

}  // namespace

TEST_CASE("co_await pool.submit of a trivially destructible lambda temporary runs it, with every capture kind",
          "[gcc-bug][forms][submit]") {
  Env env;
  COEXEC_RUN_FORM(submit);
  COEXEC_RUN_FORM(submitWithToken);
  COEXEC_RUN_FORM(submitWithOptions);
  checkAllCompleted(env, 15);
}

TEST_CASE("co_await pool.schedule of a trivially destructible lambda temporary runs it, with every capture kind",
          "[gcc-bug][forms][schedule]") {
  Env env;
  COEXEC_RUN_FORM(schedule);
  checkAllCompleted(env, 5);
}

TEST_CASE("co_await withTimeout(pool.submit(...)) of a trivially destructible lambda runs it, with every capture kind",
          "[gcc-bug][forms][timeout]") {
  Env env;
  COEXEC_RUN_FORM(withTimeout);
  checkAllCompleted(env, 5);
}

TEST_CASE("co_await whenAll/whenAny of submits of trivially destructible lambdas runs them, with every capture kind",
          "[gcc-bug][forms][combinators]") {
  Env env;
  COEXEC_RUN_FORM(whenAll);
  COEXEC_RUN_FORM(whenAny);
  checkAllCompleted(env, 15);
}

TEST_CASE("co_await of a group's and the lanes' Futures of trivially destructible lambdas, with every capture kind",
          "[gcc-bug][forms][lanes]") {
  Env env;
  COEXEC_RUN_FORM(groupSpawn);
  COEXEC_RUN_FORM(serialSubmit);
  COEXEC_RUN_FORM(keyedSubmit);
  syncWait([](coexec::TaskGroup& group) -> Task<void> { co_await group.join(); }(env.group));
  CHECK(env.group.running() == 0);
  checkAllCompleted(env, 15);
}

TEST_CASE(
    "a submission of a trivially destructible callable returns a plain Future, one of an owning temporary a "
    "Future that refuses co_await as a temporary on GCC 12",
    "[gcc-bug][forms]") {
  Env env;
  std::string s(300, 's');
  auto work = [s] { return s.size(); };
  STATIC_REQUIRE(std::is_same_v<decltype(env.pool.submit([] { return 1; })), Future<int>>);
  STATIC_REQUIRE(std::is_same_v<decltype(env.pool.submit([&s] { return s.size(); })), Future<std::size_t>>);
  STATIC_REQUIRE(std::is_same_v<decltype(env.pool.submit(work)), Future<std::size_t>>);  // a named callable
  STATIC_REQUIRE(std::is_same_v<decltype(env.pool.submit(std::declval<Task<std::size_t>>())), Future<std::size_t>>);
  using Owning = decltype(env.pool.submit([s] { return s.size(); }));
  STATIC_REQUIRE(coexec::detail::kIsOwningCallableFuture<Owning>);
  STATIC_REQUIRE(std::is_base_of_v<Future<std::size_t>, Owning>);
  STATIC_REQUIRE(std::is_base_of_v<coexec::ScheduledFuture<int>, decltype(env.pool.schedule([s] { return 1; }, 1ms))>);
  STATIC_REQUIRE(coexec::detail::kIsOwningCallableFuture<decltype(env.pool.schedule(std::move(work), 1ms))>);
  // Either converts to Future<R>, as before.
  Future<std::size_t> plain = env.pool.submit([s] { return s.size(); });
  CHECK(plain.get() == 300);
}

TEST_CASE("the accepted forms whose inputs have destructors destroy each input exactly once, on every compiler",
          "[gcc-bug][forms]") {
  Lifetimes lifetimes;
  const std::string text(300, 'x');  // long: on the heap, so ASan would see a double free
  {
    ThreadPoolExecutor pool(taggedPool("forms", 2, 2, WorkQueue::bounded(16)));
    CHECK(syncWait(submitOfNamedOwningLambda(pool, lifetimes, text)) == 300);
    CHECK(syncWait(submitOfTaskTemporary(pool, lifetimes, text)) == 300);
    CHECK(syncWait(awaitOfMovedPlainFuture(pool, lifetimes, text)) == 300);
    CHECK(syncWait(invokeAllOfMovedRange(pool, lifetimes, text)) == 601);
    CHECK(syncWait(invokeAnyOfMovedRange(pool, lifetimes, text)) == 300);
    CHECK(syncWait(whenAllOfTaskTemporaries(lifetimes, text)) == 600);
    pool.close();
    CHECK(pool.stats().completedTaskCount == 6);
  }
  CAPTURE(lifetimes.constructed.load(), lifetimes.destroyed.load());
  CHECK(lifetimes.constructed.load() > 0);
  CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load());
}
