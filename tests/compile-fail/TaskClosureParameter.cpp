// SPDX-License-Identifier: BSL-1.0
// Built by the CTest test compileFail.taskClosureParameter, never linked
// there. On GCC 12 and older each line marked `expect-error` must fail with
// coexec's static_assert that names the fix, and nothing else may fail; on
// other compilers the whole file must compile, and the test compileForms.*
// (an executable of these files with COEXEC_RUN_FORMS defined) runs every
// form and checks its result, under ASan in the clang build. With
// COEXEC_ALLOW_GCC12_CLOSURE_PARAMETERS defined the file compiles everywhere
// (compileFail.taskClosureParameterAllowed).
//
// Refused on GCC 12: a Task coroutine whose parameter takes over a lambda
// that is not trivially destructible, by value or as an rvalue reference.
// Written inside a co_await expression, `co_await offload(pool, [s] {...})`,
// GCC 12 frees the lambda's copy of `s` twice (tests/GccCoroutineBugsTest.cpp).
// The parameter's type cannot tell that lambda from a named one, so a named
// lambda handed to such a parameter is refused too. The accepted forms are run
// on every compiler by GccCoroutineBugsApiTest.
//
// clang-format off
// expect-message: coexec: GCC 12 miscompiles temporaries in a co_await expression; name the lambda first, or capture by reference
// clang-format on

#include "coexec/ThreadPoolExecutor.h"

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "coexec/Future.h"
#include "coexec/Task.h"

namespace closureParameters {

// The shape of a helper of the user's own: the lambda taken by value.
template <class F>
coexec::Task<std::size_t> offload(coexec::ThreadPoolExecutor& pool, F f) {
  auto future = pool.submit(std::move(f));
  co_return co_await future;
}

// The same with a forwarding reference: a lambda temporary binds as F&&.
template <class F>
coexec::Task<std::size_t> offloadForwarding(coexec::ThreadPoolExecutor& pool, F&& f) {
  auto future = pool.submit(f);
  co_return co_await future;
}

// The heap-corrupting form: an owning lambda temporary inside the co_await.
coexec::Task<std::size_t> awaitOffloadOfOwningLambda(coexec::ThreadPoolExecutor& pool, std::string s) {
  co_return co_await offload(pool, [s] { return s.size(); });  // expect-error
}

// The same through a forwarding reference.
coexec::Task<std::size_t> awaitForwardingOfOwningLambda(coexec::ThreadPoolExecutor& pool, std::string s) {
  co_return co_await offloadForwarding(pool, [s] { return s.size() + 1; });  // expect-error
}

// A capture that owns something other than memory of a std::string.
coexec::Task<std::size_t> awaitOffloadOfSharedCapture(coexec::ThreadPoolExecutor& pool, std::string s) {
  auto shared = std::make_shared<std::string>(std::move(s));
  co_return co_await offload(pool, [shared] { return shared->size() + 2; });  // expect-error
}

// A coroutine lambda with a by-value parameter (`auto f`) is refused alike.
coexec::Task<std::size_t> awaitGenericCoroutineLambda(std::string s) {
  auto call = [](auto f) -> coexec::Task<std::size_t> { co_return f(); };
  co_return co_await call([s] { return s.size() + 3; });  // expect-error
}

// A named lambda moved into a by-value or rvalue parameter: a parameter's
// type cannot tell it from a temporary. Pass it by name to a reference
// parameter instead (the accepted forms below).
coexec::Task<std::size_t> awaitOffloadOfMovedLambda(coexec::ThreadPoolExecutor& pool, std::string s) {
  auto work = [s] { return s.size() + 4; };
  co_return co_await offload(pool, std::move(work));  // expect-error
}

// The fixes of the refused forms compile everywhere: the lambda named first
// and taken by reference, or captured by reference.
coexec::Task<std::size_t> awaitForwardingOfNamedLambda(coexec::ThreadPoolExecutor& pool, std::string s) {
  auto work = [s] { return s.size(); };
  co_return co_await offloadForwarding(pool, work);
}

coexec::Task<std::size_t> awaitOffloadOfReferenceCapture(coexec::ThreadPoolExecutor& pool, std::string s) {
  co_return co_await offload(pool, [&s] { return s.size(); });
}

}  // namespace closureParameters

#ifdef COEXEC_RUN_FORMS
#include <catch2/catch.hpp>

#include "CoroutineTestSupport.h"
#include "coexec/SyncWait.h"

TEST_CASE("where GCC 12 refuses a Task parameter that takes over an owning lambda, the forms run correctly",
          "[gcc-bug][forms]") {
  coexec::ThreadPoolExecutor pool(coexec::test::taggedPool("forms", 2, 2, coexec::WorkQueue::bounded(16)));
  const std::string text(300, 'p');  // long: on the heap, so ASan would see a double free
  CHECK(coexec::syncWait(closureParameters::awaitOffloadOfOwningLambda(pool, text)) == 300);
  CHECK(coexec::syncWait(closureParameters::awaitForwardingOfOwningLambda(pool, text)) == 301);
  CHECK(coexec::syncWait(closureParameters::awaitOffloadOfSharedCapture(pool, text)) == 302);
  CHECK(coexec::syncWait(closureParameters::awaitGenericCoroutineLambda(text)) == 303);
  CHECK(coexec::syncWait(closureParameters::awaitOffloadOfMovedLambda(pool, text)) == 304);
  CHECK(coexec::syncWait(closureParameters::awaitForwardingOfNamedLambda(pool, text)) == 300);
  CHECK(coexec::syncWait(closureParameters::awaitOffloadOfReferenceCapture(pool, text)) == 300);
  pool.close();
  CHECK(pool.stats().completedTaskCount == 6);
}
#endif
