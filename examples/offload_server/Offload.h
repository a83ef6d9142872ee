#pragma once

// offload(pool, job): the one place where the server hands CPU work to the
// coexec pool and gets the result back on its io_context.

#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include <asio/awaitable.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <coexec/CancellationToken.h>
#include <coexec/ThreadPoolExecutor.h>

namespace offload {

namespace detail {

// STAND-IN for coexec::asyncWait (include/coexec/asio.h, branch asio-bridge,
// not merged yet): the pool task stores its outcome here and posts a wake-up
// to the awaiting coroutine's executor, whose steady_timer stands for the
// completion. Replace with `co_await coexec::asyncWait(future, use_awaitable)`.
template <class R>
struct OffloadState {
  explicit OffloadState(asio::any_io_executor executor) : wakeUp(std::move(executor)) {}
  asio::steady_timer wakeUp;  // never expires: cancel() is the signal
  bool done = false;          // set on wakeUp's executor, read there
  std::optional<R> value;     // written by the pool task before the wake-up is posted
  std::exception_ptr error;
};

}  // namespace detail

/// Submits `job` to `pool` and suspends the calling coroutine until it has
/// run; returns its result, or rethrows what it threw. `job` is a callable
/// taking a `const coexec::CancellationToken&` (cancelled by shutdownNow()).
/// Never blocks a thread: the coroutine resumes on its own executor (the
/// io_context strand it was running on), not on the pool.
/// \throws coexec::RejectedExecution at once, without suspending, if the pool
/// refuses the job (bounded queue full under abort(), or shut down).
template <class Job, class R = std::invoke_result_t<Job&, const coexec::CancellationToken&>>
asio::awaitable<R> offload(coexec::ThreadPoolExecutor& pool, Job job) {
  static_assert(!std::is_void_v<R> && std::is_default_constructible_v<R>, "offload: job must return a value");
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  auto state = std::make_shared<detail::OffloadState<R>>(executor);
  state->wakeUp.expires_at(asio::steady_timer::time_point::max());
  coexec::Future<R> future = pool.submit([state, job = std::move(job)](const coexec::CancellationToken& token) {
    try {
      state->value.emplace(job(token));
    } catch (...) {
      state->error = std::current_exception();
    }
    // The wake-up runs on the coroutine's executor, as the coroutine does.
    asio::post(state->wakeUp.get_executor(), [state] {
      state->done = true;
      state->wakeUp.cancel();
    });
    return R{};
  });
  // `done` and the wait below run on the same strand: the wake-up cannot
  // slip in between the check and the start of the wait.
  std::error_code ignored;
  while (!state->done)
    co_await state->wakeUp.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  if (state->error) std::rethrow_exception(state->error);
  co_return std::move(*state->value);
}

}  // namespace offload
