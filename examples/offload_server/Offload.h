// SPDX-License-Identifier: BSL-1.0
#pragma once

// offload(pool, job): the one place where the server hands CPU work to the
// coexec pool and gets the result back on its io_context.

#include <type_traits>
#include <utility>

#include <asio/awaitable.hpp>
#include <asio/use_awaitable.hpp>

#include <coexec/asio.h>
#include <coexec/coexec.h>

namespace offload {

/// Submits `job` to `pool` and suspends the calling coroutine until it has
/// run; returns its result, or rethrows what it threw. `job` is a callable
/// taking a `const coexec::CancellationToken&` (cancelled by shutdownNow()).
/// Never blocks a thread: the coroutine resumes on its own executor (the
/// io_context strand it was running on; coexec::asyncWait posts it there),
/// never on a pool thread.
/// \throws coexec::RejectedExecution at once, without suspending, if the pool
/// refuses the job (its bounded queue is full under abort(), or it is shut
/// down); coexec::OperationCancelled if the job was cancelled.
template <class Job, class R = std::invoke_result_t<Job&, const coexec::CancellationToken&>>
asio::awaitable<R> offload(coexec::ThreadPoolExecutor& pool, Job job) {
  // The named form: the Future is a named object, and the co_await
  // expression builds no lambda (docs/coroutines.md, "GCC 12 bugs and the
  // safe forms").
  coexec::Future<R> future = pool.submit(std::move(job));
  R result = co_await coexec::asyncWait(future, asio::use_awaitable);
  co_return result;
}

}  // namespace offload
