// SPDX-License-Identifier: BSL-1.0
// Built by the CTest test compileFail.coAwaitTemporary, never linked there.
// On GCC 12 and older each line marked `expect-error` must fail with
// coexec's static_assert that names the fix, and nothing else may fail; on
// other compilers the whole file must compile, and the test
// compileForms.* (an executable of these files with COEXEC_RUN_FORMS
// defined) runs every form and checks its result, under ASan in the clang
// build.
//
// Refused on GCC 12: `co_await` of the Future of a submission that took over
// a callable temporary that is not trivially destructible, here a lambda
// whose capture owns memory (a long std::string, on the heap: a double free
// is an error under ASan). The accepted forms, capture-less and `[&]`
// lambdas among them, are run on every compiler by AwaitableFormsTest.
//
// clang-format off
// expect-message: coexec: GCC 12 miscompiles temporaries in a co_await expression; name the Future first: auto f = pool.submit(...); co_await f;
// clang-format on
//
// Each refused form awaits a Future of a different result type: a refusal
// is one instantiation per type, reported once per translation unit.

#include "coexec/ThreadPoolExecutor.h"

#include <chrono>
#include <functional>
#include <string>
#include <utility>

#include "coexec/CancellationToken.h"
#include "coexec/Future.h"
#include "coexec/Task.h"
#include "coexec/TaskOptions.h"

using namespace std::chrono_literals;

namespace submitForms {

// A lambda temporary with a capture that owns memory: the heap-corrupting form.
coexec::Task<std::string> awaitSubmitOfOwningLambda(coexec::ThreadPoolExecutor& pool, std::string s) {
  co_return co_await pool.submit([s] { return s; });  // expect-error
}

// The same with a token and with options.
coexec::Task<std::size_t> awaitSubmitWithToken(coexec::ThreadPoolExecutor& pool, std::string s,
                                               coexec::CancellationToken token) {
  co_return co_await pool.submit([s] { return s.size(); }, token);  // expect-error
}

coexec::Task<long> awaitSubmitWithOptions(coexec::ThreadPoolExecutor& pool, std::string s) {
  co_return co_await pool.submit([s] { return static_cast<long>(s.size()); }, {.name = "forms"});  // expect-error
}

// A scheduled task: the ScheduledFuture of an owning lambda.
coexec::Task<int> awaitScheduleOfOwningLambda(coexec::ThreadPoolExecutor& pool, std::string s) {
  co_return co_await pool.schedule([s] { return static_cast<int>(s.size()); }, 1ms);  // expect-error
}

// A callable that is not a lambda but is not trivially destructible either.
coexec::Task<unsigned> awaitSubmitOfFunction(coexec::ThreadPoolExecutor& pool, std::string s) {
  co_return co_await pool.submit(std::function<unsigned()>([s] { return static_cast<unsigned>(s.size()); }));  // expect-error
}

// The Future named with `auto` keeps its type: std::move of it is refused
// too (an rvalue cannot be told from a temporary). `co_await f` is the form.
coexec::Task<short> awaitMovedOwningFuture(coexec::ThreadPoolExecutor& pool, std::string s) {
  auto future = pool.submit([s] { return static_cast<short>(s.size()); });
  co_return co_await std::move(future);  // expect-error
}

// The safe forms of the same submissions compile everywhere: the Future
// named first (as `auto`, or as a Future<R>, which may then be moved).
coexec::Task<std::string> awaitNamedOwningFuture(coexec::ThreadPoolExecutor& pool, std::string s) {
  auto future = pool.submit([s] { return s; });
  co_return co_await future;
}

coexec::Task<std::string> awaitMovedPlainFuture(coexec::ThreadPoolExecutor& pool, std::string s) {
  coexec::Future<std::string> future = pool.submit([s] { return s; });
  co_return co_await std::move(future);
}

coexec::Task<int> awaitNamedScheduled(coexec::ThreadPoolExecutor& pool, std::string s) {
  auto future = pool.schedule([s] { return static_cast<int>(s.size()); }, 1ms);
  co_return co_await future;
}

}  // namespace submitForms

#ifdef COEXEC_RUN_FORMS
#include <catch2/catch.hpp>

#include "CoroutineTestSupport.h"
#include "coexec/SyncWait.h"

TEST_CASE("where GCC 12 refuses co_await of a submission of an owning lambda temporary, the forms run correctly",
          "[gcc-bug][forms]") {
  coexec::ThreadPoolExecutor pool(coexec::test::taggedPool("forms", 2, 2, coexec::WorkQueue::bounded(16)));
  const std::string text(300, 'f');  // long: on the heap, so ASan would see a double free
  coexec::CancellationSource source;
  CHECK(coexec::syncWait(submitForms::awaitSubmitOfOwningLambda(pool, text)) == text);
  CHECK(coexec::syncWait(submitForms::awaitSubmitWithToken(pool, text, source.token())) == text.size());
  CHECK(coexec::syncWait(submitForms::awaitSubmitWithOptions(pool, text)) == 300L);
  CHECK(coexec::syncWait(submitForms::awaitScheduleOfOwningLambda(pool, text)) == 300);
  CHECK(coexec::syncWait(submitForms::awaitSubmitOfFunction(pool, text)) == 300U);
  CHECK(coexec::syncWait(submitForms::awaitMovedOwningFuture(pool, text)) == 300);
  CHECK(coexec::syncWait(submitForms::awaitNamedOwningFuture(pool, text)) == text);
  CHECK(coexec::syncWait(submitForms::awaitMovedPlainFuture(pool, text)) == text);
  CHECK(coexec::syncWait(submitForms::awaitNamedScheduled(pool, text)) == 300);
  pool.close();
  CHECK(pool.stats().completedTaskCount == 9);
}
#endif
