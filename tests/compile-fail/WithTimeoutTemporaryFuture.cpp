// SPDX-License-Identifier: BSL-1.0
// Built by the CTest test compileFail.withTimeoutTemporaryFuture, never
// linked there. On GCC 12 and older each line marked `expect-error` must
// fail with coexec's static_assert that names the fix, and nothing else may
// fail; on other compilers the whole file must compile, and
// compileForms.* runs every form (COEXEC_RUN_FORMS) and checks its result.
//
// clang-format off
// expect-message: coexec: GCC 12 miscompiles temporaries in a co_await expression; name the withTimeout first: auto timed = withTimeout(pool.submit(...), d); co_await timed;
// clang-format on
//
// Refused: `co_await withTimeout(F, d)` where the result owns the Future of
// a submission of a callable temporary that is not trivially destructible
// (a Future temporary of a lambda whose capture owns memory, which GCC 12
// destroys twice, or std::move of such a Future named with `auto`). Each
// refused form awaits a Future of a different result type: the refusal is
// one instantiation per type, reported once per translation unit.

#include "coexec/WithTimeout.h"

#include <chrono>
#include <string>
#include <utility>

#include "coexec/Future.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using namespace std::chrono_literals;

namespace timeoutForms {

// A lambda temporary with a capture that owns memory: the heap-corrupting form.
coexec::Task<std::string> awaitTimedSubmit(coexec::ThreadPoolExecutor& pool, std::string s) {
  co_return co_await coexec::withTimeout(pool.submit([s] { return s; }), 5s);  // expect-error
}

// Such a Future named with `auto` and moved into the expression: refused too.
coexec::Task<long> awaitTimedMovedFuture(coexec::ThreadPoolExecutor& pool, std::string s) {
  auto future = pool.submit([s] { return static_cast<long>(s.size()); });
  co_return co_await coexec::withTimeout(std::move(future), 5s);  // expect-error
}

// The safe forms compile everywhere: the result named first (owning or not),
// a borrowed named Future in the temporary form, a moved Future<R>, and a
// Task.
coexec::Task<double> awaitNamedTimed(coexec::ThreadPoolExecutor& pool, std::string s) {
  auto timed = coexec::withTimeout(pool.submit([s] { return static_cast<double>(s.size()); }), 5s);
  co_return co_await timed;
}

coexec::Task<float> awaitBorrowedTemporary(coexec::ThreadPoolExecutor& pool, std::string s) {
  auto future = pool.submit([s] { return static_cast<float>(s.size()); });
  co_return co_await coexec::withTimeout(future, 5s);
}

coexec::Task<int> awaitMovedPlainFuture(coexec::ThreadPoolExecutor& pool, std::string s) {
  coexec::Future<int> future = pool.submit([s] { return static_cast<int>(s.size()); });
  co_return co_await coexec::withTimeout(std::move(future), 5s);
}

coexec::Task<short> child() { co_return 1; }

coexec::Task<short> awaitTimedTask() {
  auto timed = coexec::withTimeout(child(), 5s);
  const short one = co_await timed;
  co_return static_cast<short>(one + co_await coexec::withTimeout(child(), 5s));
}

}  // namespace timeoutForms

#ifdef COEXEC_RUN_FORMS
#include <catch2/catch.hpp>

#include "CoroutineTestSupport.h"
#include "coexec/SyncWait.h"

TEST_CASE("where GCC 12 refuses withTimeout of an owning lambda's Future temporary, the forms run correctly",
          "[gcc-bug][forms]") {
  coexec::ThreadPoolExecutor pool(coexec::test::taggedPool("forms", 2, 2, coexec::WorkQueue::bounded(16)));
  const std::string text(300, 't');
  CHECK(coexec::syncWait(timeoutForms::awaitTimedSubmit(pool, text)) == text);
  CHECK(coexec::syncWait(timeoutForms::awaitTimedMovedFuture(pool, text)) == 300L);
  CHECK(coexec::syncWait(timeoutForms::awaitNamedTimed(pool, text)) == 300.0);
  CHECK(coexec::syncWait(timeoutForms::awaitBorrowedTemporary(pool, text)) == 300.0F);
  CHECK(coexec::syncWait(timeoutForms::awaitMovedPlainFuture(pool, text)) == 300);
  CHECK(coexec::syncWait(timeoutForms::awaitTimedTask()) == 2);
  pool.close();
  CHECK(pool.stats().completedTaskCount == 5);
}
#endif
