// SPDX-License-Identifier: BSL-1.0
// Built by the CTest test compileFail.combinatorTemporary, never linked
// there. On GCC 12 and older each line marked `expect-error` must fail with
// coexec's static_assert that names the fix, and nothing else may fail; on
// other compilers the whole file must compile, and compileForms.* runs
// every form (COEXEC_RUN_FORMS) and checks its result.
//
// Refused on GCC 12: whenAll/whenAny awaited as a temporary while it owns the
// Future of a submission of a callable temporary that is not trivially
// destructible (a lambda whose capture owns memory), built inside the
// co_await expression, where GCC 12 destroys that lambda's captures twice.
// Accepted everywhere, as the last function shows: the same inputs named
// first, or the awaitable named first; and `co_await
// pool.invokeAll(std::move(tasks))`, which GCC 12 compiles correctly
// (tests/GccCoroutineBugsTest.cpp).
//
// clang-format off
// expect-message: coexec: GCC 12 miscompiles temporaries in a co_await expression; name the inputs or the awaitable first
// clang-format on
//
// Each refused form is a different awaitable type: a refusal is one
// instantiation per type, reported once per translation unit.

#include "coexec/ThreadPoolExecutor.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "coexec/Future.h"
#include "coexec/InvokeAll.h"
#include "coexec/Task.h"
#include "coexec/WhenAll.h"
#include "coexec/WhenAny.h"

namespace combinatorForms {

// whenAll of a Future temporary of an owning lambda (and one of a
// capture-less lambda, which alone would be accepted).
coexec::Task<std::string> awaitWhenAllOfOwningSubmit(coexec::ThreadPoolExecutor& pool, std::string s) {
  auto [a, b] = co_await coexec::whenAll(pool.submit([s] { return s; }), pool.submit([] { return 1; }));  // expect-error
  co_return a + std::to_string(b);
}

// whenAny of a Future temporary of an owning lambda.
coexec::Task<std::size_t> awaitWhenAnyOfOwningSubmit(coexec::ThreadPoolExecutor& pool, std::string s) {
  co_return std::get<0>((co_await coexec::whenAny(pool.submit([s] { return s.size(); }))).value);  // expect-error
}

// The same inputs in the safe forms, and the owned ranges of invokeAll and
// invokeAny, compile everywhere.
coexec::Task<std::size_t> namedForms(coexec::ThreadPoolExecutor& pool, std::string s) {
  auto a = pool.submit([s] { return s.size(); });
  auto b = pool.submit([s] { return s.size(); });
  const auto [x, y] = co_await coexec::whenAll(a, b);
  auto any = coexec::whenAny(pool.submit([s] { return s.size(); }));
  const auto z = co_await any;
  std::vector<std::function<std::size_t()>> tasks{[s] { return s.size(); }, [s] { return s.size(); }};
  const std::vector<std::size_t> all = co_await pool.invokeAll(std::move(tasks));
  std::vector<std::function<std::size_t()>> more{[s] { return s.size(); }};
  const std::size_t first = co_await pool.invokeAny(std::move(more));
  co_return x + y + std::get<0>(z.value) + all.at(0) + all.at(1) + first;
}

}  // namespace combinatorForms

#ifdef COEXEC_RUN_FORMS
#include <catch2/catch.hpp>

#include "CoroutineTestSupport.h"
#include "coexec/SyncWait.h"

TEST_CASE("where GCC 12 refuses whenAll/whenAny of an owning lambda's Future temporary, the forms run correctly",
          "[gcc-bug][forms]") {
  coexec::ThreadPoolExecutor pool(coexec::test::taggedPool("forms", 2, 2, coexec::WorkQueue::bounded(16)));
  const std::string text(300, 'c');
  CHECK(coexec::syncWait(combinatorForms::awaitWhenAllOfOwningSubmit(pool, text)) == text + "1");
  CHECK(coexec::syncWait(combinatorForms::awaitWhenAnyOfOwningSubmit(pool, text)) == 300);
  CHECK(coexec::syncWait(combinatorForms::namedForms(pool, text)) == 6 * 300);
  pool.close();
  CHECK(pool.stats().completedTaskCount == 9);
}
#endif
