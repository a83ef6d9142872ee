// SPDX-License-Identifier: BSL-1.0
#pragma once

// What the server answers: /work (primes counted on the pool), /metrics and
// /healthz, and the status code for every request it cannot serve.

#include <chrono>
#include <cstdint>

#include <asio/awaitable.hpp>

#include <coexec/ThreadPoolExecutor.h>

#include "HttpRequestParser.h"
#include "HttpResponse.h"
#include "ServerMetrics.h"

namespace offload {

/// What a /work job reports back: the count, and where its time went.
struct WorkResult {
  std::uint64_t primes = 0;
  std::chrono::nanoseconds queued{0};   ///< from submit to the job's start on a pool thread
  std::chrono::nanoseconds compute{0};  ///< the job's own run time
};

/// Maps a request to its response.
///
/// | request | response |
/// |---|---|
/// | GET/HEAD /work?n=N, 1 <= N <= kMaxPrimeLimit | 200, JSON `{"n":N,"primes":P,"queue_ms":...,"compute_ms":...}` |
/// | /work, the pool refuses the job | 503, `Retry-After: 1`, at once |
/// | /work, n missing, not decimal, or out of range | 400 |
/// | GET/HEAD /metrics | 200, Prometheus text format |
/// | GET/HEAD /healthz | 200, "ok" |
/// | another method on those paths | 405 with `Allow: GET, HEAD` |
/// | another path | 404 |
///
/// Thread safety: handle() may run on several io threads at once.
class Router {
 public:
  /// Both must outlive the router.
  Router(coexec::ThreadPoolExecutor& pool, ServerMetrics& metrics) noexcept : pool_(pool), metrics_(metrics) {}

  /// The response to `request`. A /work request suspends the calling
  /// coroutine (never blocking its thread) until the pool has run the job;
  /// it resumes on the coroutine's own executor. Every other request
  /// completes without suspending. Never throws: a job that fails is a 500.
  [[nodiscard]] asio::awaitable<HttpResponse> handle(const HttpRequest& request);

 private:
  [[nodiscard]] asio::awaitable<HttpResponse> work(const HttpRequest& request);

  coexec::ThreadPoolExecutor& pool_;
  ServerMetrics& metrics_;
};

}  // namespace offload
