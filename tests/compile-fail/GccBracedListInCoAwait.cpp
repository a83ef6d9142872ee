// SPDX-License-Identifier: BSL-1.0
// Built by the CTest test compileFail.gccBracedListInCoAwait, never linked:
// a GCC 12 bug that tests/GccCoroutineBugsTest.cpp relies on and that no
// coexec code is involved in. GCC 12 does not compile a braced list
// (std::initializer_list) inside a co_await expression: the coroutine
// marked `expect-error` fails with GCC's own error. So `co_await
// pool.invokeAll(std::vector<std::function<int()>>{[s] {...}})`, whose lambda
// temporaries GCC 12 would destroy twice, cannot be written there either.
// Other compilers must compile the file. If a GCC 12 update compiles it, the
// test fails: revisit the refusals (detail/OwningCallableFuture.h).
//
// expect-message: array used as initializer

#include <coroutine>
#include <cstddef>
#include <exception>
#include <vector>

namespace braced {

struct Ready {
  explicit Ready(std::size_t n) : n(n) {}
  bool await_ready() const noexcept { return true; }
  void await_suspend(std::coroutine_handle<> /*awaiting*/) const noexcept {}
  std::size_t await_resume() const noexcept { return n; }
  std::size_t n;
};

Ready sizeOf(const std::vector<int>& values) { return Ready(values.size()); }

struct Coroutine {
  struct promise_type {
    Coroutine get_return_object() { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { std::terminate(); }
  };
};

// GCC 12 reports the error at the end of the coroutine's body.
Coroutine awaitWithBracedList(std::size_t& out) {
  out = co_await sizeOf(std::vector<int>{1, 2, 3});
}  // expect-error

}  // namespace braced
