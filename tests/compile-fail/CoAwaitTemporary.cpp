// Built by the CTest test compileFail.coAwaitTemporary, never linked. On GCC
// 12 and older each line marked `expect-error` must fail with coexec's
// static_assert that names the fix, and nothing else may fail; on other
// compilers the whole file must compile (the temporary forms are allowed).
//
// clang-format off
// expect-message: coexec: GCC 12 miscompiles temporaries in a co_await expression; name the Future first: auto f = pool.submit(...); co_await f;
// clang-format on
//
// Each form awaits a Future of a different result type: the refusal is one
// instantiation per Future<R>, reported once per translation unit.

#include "coexec/Future.h"

#include <string>
#include <utility>

#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

// A lambda temporary with a capture that owns memory: the heap-corrupting form.
coexec::Task<std::string> awaitSubmitOfCapturingLambda(coexec::ThreadPoolExecutor& pool, std::string s) {
  co_return co_await pool.submit([s] { return s; });  // expect-error
}

// A capture-less lambda: harmless in itself, refused all the same.
coexec::Task<int> awaitSubmitOfCapturelessLambda(coexec::ThreadPoolExecutor& pool) {
  co_return co_await pool.submit([] { return 1; });  // expect-error
}

// A named Future moved into the co_await: an rvalue, refused too.
coexec::Task<long> awaitMovedFuture(coexec::ThreadPoolExecutor& pool) {
  coexec::Future<long> future = pool.submit([] { return 2L; });
  co_return co_await std::move(future);  // expect-error
}

// The safe form compiles everywhere.
coexec::Task<double> awaitNamedFuture(coexec::ThreadPoolExecutor& pool) {
  coexec::Future<double> future = pool.submit([] { return 3.0; });
  co_return co_await future;
}
