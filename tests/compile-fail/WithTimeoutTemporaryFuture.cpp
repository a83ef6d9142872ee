// Built by the CTest test compileFail.withTimeoutTemporaryFuture, never
// linked. On GCC 12 and older each line marked `expect-error` must fail with
// coexec's static_assert that names the fix, and nothing else may fail; on
// other compilers the whole file must compile (the temporary forms are
// allowed there).
//
// clang-format off
// expect-message: coexec: GCC 12 miscompiles temporaries in a co_await expression; name the withTimeout first: auto timed = withTimeout(pool.submit(...), d); co_await timed;
// clang-format on
//
// Refused: `co_await withTimeout(F, d)` where the result owns its Future (F
// a Future temporary, whose lambda GCC 12 destroys twice, or std::move(f)).
// Each refused form awaits a Future of a different result type: the
// refusal is one instantiation per type, reported once per translation unit.

#include "coexec/WithTimeout.h"

#include <chrono>
#include <string>
#include <utility>

#include "coexec/Future.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using namespace std::chrono_literals;

// A lambda temporary with a capture that owns memory: the heap-corrupting form.
coexec::Task<std::string> awaitTimedSubmit(coexec::ThreadPoolExecutor& pool, std::string s) {
  co_return co_await coexec::withTimeout(pool.submit([s] { return s; }), 50ms);  // expect-error
}

// A named Future moved into the expression: an owning result, refused too.
coexec::Task<long> awaitTimedMovedFuture(coexec::ThreadPoolExecutor& pool) {
  coexec::Future<long> future = pool.submit([] { return 2L; });
  co_return co_await coexec::withTimeout(std::move(future), 50ms);  // expect-error
}

// The safe forms compile everywhere: the result named first (owning or not),
// a borrowed named Future in the temporary form, and a Task.
coexec::Task<double> awaitNamedTimed(coexec::ThreadPoolExecutor& pool, std::string s) {
  auto timed = coexec::withTimeout(pool.submit([s] { return static_cast<double>(s.size()); }), 50ms);
  co_return co_await timed;
}

coexec::Task<float> awaitBorrowedTemporary(coexec::ThreadPoolExecutor& pool) {
  coexec::Future<float> future = pool.submit([] { return 1.0F; });
  co_return co_await coexec::withTimeout(future, 50ms);
}

coexec::Task<short> child() { co_return 1; }

coexec::Task<short> awaitTimedTask() {
  auto timed = coexec::withTimeout(child(), 50ms);
  const short one = co_await timed;
  co_return static_cast<short>(one + co_await coexec::withTimeout(child(), 50ms));
}
