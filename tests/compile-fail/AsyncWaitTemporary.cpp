// SPDX-License-Identifier: BSL-1.0
// Built by the CTest test compileFail.asyncWaitTemporary, never linked
// there. On GCC 12 and older each line marked `expect-error` must fail with
// coexec's static_assert that names the fix, and nothing else may fail; on
// other compilers the whole file must compile, and compileForms.* runs
// every form (COEXEC_RUN_FORMS) and checks its result.
//
// Refused on GCC 12, whatever the completion token: asyncWait taking over the
// Future of a submission of a lambda temporary whose capture owns memory.
// Inside a co_await expression GCC 12 destroys that lambda's captures twice
// (`co_await asyncWait(pool.submit([s] {...}), use_awaitable)` freed `s`'s
// copy twice), and asyncWait cannot tell whether it is inside one, so the
// use_future and callback forms, which are not awaited, are refused too.
// The accepted forms (`[&]` and capture-less lambdas, with each token) run on
// every compiler in AsioAwaitableFormsTest.
//
// clang-format off
// expect-message: coexec: GCC 12 miscompiles temporaries in a co_await expression; name the Future first: auto f = pool.submit(...); co_await asyncWait(f, use_awaitable);
// clang-format on
//
// Each refused line is a different instantiation (token or result type).
// Built for both Asio flavours (COEXEC_TEST_BOOST_ASIO: tests/AsioFlavour.h).

#if COEXEC_TEST_BOOST_ASIO
#include "coexec/boost_asio.h"
#else
#include "coexec/asio.h"
#endif

#include <cstddef>
#include <exception>
#include <future>
#include <string>
#include <utility>

#include "AsioFlavour.h"
#include "coexec/ThreadPoolExecutor.h"

namespace asyncWaitForms {

namespace bridge = coexec::test::bridge;

// The form a new user writes first: the double free this refusal closes.
asio::awaitable<std::size_t> awaitableOfOwningSubmit(coexec::ThreadPoolExecutor& pool, std::string label) {
  std::size_t n = co_await bridge::asyncWait(pool.submit([label] { return label.size(); }), asio::use_awaitable);  // expect-error
  co_return n;
}

asio::awaitable<std::string> deferredOfOwningSubmit(coexec::ThreadPoolExecutor& pool, std::string label) {
  co_return co_await bridge::asyncWait(pool.submit([label] { return label; }), asio::experimental::deferred)(asio::use_awaitable);  // expect-error
}

std::future<long> futureOfOwningSubmit(coexec::ThreadPoolExecutor& pool, std::string label) {
  return bridge::asyncWait(pool.submit([label] { return static_cast<long>(label.size()); }), asio::use_future);  // expect-error
}

void callbackOfOwningSubmit(coexec::ThreadPoolExecutor& pool, asio::io_context& io, std::string label, int& out) {
  bridge::asyncWait(pool.submit([label] { return static_cast<int>(label.size()); }),  // expect-error
                    asio::bind_executor(io, [&out](std::exception_ptr, int n) { out = n; }));
}

// The safe form compiles everywhere: the Future named first.
asio::awaitable<std::size_t> awaitableOfNamedFuture(coexec::ThreadPoolExecutor& pool, std::string label) {
  auto f = pool.submit([label] { return label.size(); });
  std::size_t n = co_await bridge::asyncWait(f, asio::use_awaitable);
  co_return n;
}

}  // namespace asyncWaitForms

#ifdef COEXEC_RUN_FORMS
#include <catch2/catch.hpp>

#include "CoroutineTestSupport.h"

TEST_CASE("where GCC 12 refuses asyncWait of an owning lambda's Future temporary, every token's form runs correctly",
          "[gcc-bug][forms][asio]") {
  coexec::ThreadPoolExecutor pool(coexec::test::taggedPool("forms", 2, 2, coexec::WorkQueue::bounded(16)));
  const std::string text(300, 'a');
  asio::io_context io;
  std::size_t viaAwaitable = 0;
  std::string viaDeferred;
  std::size_t viaNamed = 0;
  int viaCallback = 0;
  asio::co_spawn(io, asyncWaitForms::awaitableOfOwningSubmit(pool, text), [&](std::exception_ptr e, std::size_t n) {
    CHECK(!e);
    viaAwaitable = n;
  });
  asio::co_spawn(io, asyncWaitForms::deferredOfOwningSubmit(pool, text), [&](std::exception_ptr e, std::string s) {
    CHECK(!e);
    viaDeferred = std::move(s);
  });
  asio::co_spawn(io, asyncWaitForms::awaitableOfNamedFuture(pool, text), [&](std::exception_ptr e, std::size_t n) {
    CHECK(!e);
    viaNamed = n;
  });
  asyncWaitForms::callbackOfOwningSubmit(pool, io, text, viaCallback);
  std::future<long> viaFuture = asyncWaitForms::futureOfOwningSubmit(pool, text);
  io.run();
  CHECK(viaAwaitable == 300);
  CHECK(viaDeferred == text);
  CHECK(viaNamed == 300);
  CHECK(viaCallback == 300);
  CHECK(viaFuture.get() == 300L);
  pool.close();
  CHECK(pool.stats().completedTaskCount == 5);
}
#endif
