// Built by the CTest test compileFail.combinatorTemporary, never linked. On
// GCC 12 and older each line marked `expect-error` must fail with coexec's
// static_assert that names the fix, and nothing else may fail; on other
// compilers the whole file must compile (the temporary forms are allowed).
//
// The refused shape is the one that bites on GCC 12: a combinator awaited as
// a temporary while it owns inputs built or moved inside the co_await
// expression (a range passed as an rvalue, a Future temporary), where a
// lambda temporary's captures would be destroyed twice.
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
#include "coexec/Task.h"
#include "coexec/WhenAll.h"
#include "coexec/WhenAny.h"

// invokeAll of an rvalue range, awaited as a temporary.
coexec::Task<std::size_t> awaitInvokeAllOfMovedRange(coexec::ThreadPoolExecutor& pool,
                                                     std::vector<std::function<int()>> tasks) {
  co_return (co_await pool.invokeAll(std::move(tasks))).size();  // expect-error
}

// invokeAny of an rvalue range, awaited as a temporary.
coexec::Task<long> awaitInvokeAnyOfMovedRange(coexec::ThreadPoolExecutor& pool,
                                              std::vector<std::function<long()>> tasks) {
  co_return co_await pool.invokeAny(std::move(tasks));  // expect-error
}

// whenAll of Future temporaries (a lambda with a capture that owns memory).
coexec::Task<std::string> awaitWhenAllOfSubmits(coexec::ThreadPoolExecutor& pool, std::string s) {
  auto [a, b] = co_await coexec::whenAll(pool.submit([s] { return s; }), pool.submit([] { return 1; }));  // expect-error
  co_return a + std::to_string(b);
}

// whenAny of a Future temporary.
coexec::Task<std::size_t> awaitWhenAnyOfSubmit(coexec::ThreadPoolExecutor& pool) {
  co_return (co_await coexec::whenAny(pool.submit([] { return 2.0; }))).index;  // expect-error
}

// The safe forms compile everywhere: named inputs, or a named awaitable.
coexec::Task<int> namedForms(coexec::ThreadPoolExecutor& pool, std::vector<std::function<int()>> tasks) {
  const std::vector<int> first = co_await pool.invokeAll(tasks);
  auto all = pool.invokeAll(std::move(tasks));
  const std::vector<int> second = co_await all;
  coexec::Future<int> a = pool.submit([] { return 3; });
  coexec::Future<int> b = pool.submit([] { return 4; });
  const auto [x, y] = co_await coexec::whenAll(a, b);
  auto any = coexec::whenAny(pool.submit([] { return 5; }));
  const auto z = co_await any;
  co_return static_cast<int>(first.size() + second.size()) + x + y + std::get<0>(z.value);
}
