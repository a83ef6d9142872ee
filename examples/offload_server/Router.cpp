// SPDX-License-Identifier: BSL-1.0
#include "Router.h"

#include <charconv>
#include <exception>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include <coexec/Errors.h>

#include "Offload.h"
#include "Primes.h"

namespace offload {
namespace {

using Clock = std::chrono::steady_clock;

HttpResponse methodNotAllowed() {
  HttpResponse response = HttpResponse::text(405, "Method not allowed: use GET or HEAD.");
  response.headers.push_back({"Allow", "GET, HEAD"});
  return response;
}

double milliseconds(std::chrono::nanoseconds d) { return std::chrono::duration<double, std::milli>(d).count(); }

/// The most times one /work request may repeat its count (`repeat`).
constexpr std::uint64_t kMaxRepeat = 1000;

/// Parses the decimal query parameter `name` into `value` (left as it is when
/// the parameter is absent); an error text for a 400 otherwise, empty if it
/// is fine.
std::string parseNumber(std::string_view query, std::string_view name, std::uint64_t low, std::uint64_t high,
                        std::uint64_t& value) {
  const QueryParameter parameter = findQueryParameter(query, name);
  if (!parameter.found) return {};
  const std::string& text = parameter.value;
  std::uint64_t parsed = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (parameter.malformed || text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size()) {
    return fmt::format("Parameter {} must be a decimal number.", name);
  }
  if (ec == std::errc::result_out_of_range || parsed < low || parsed > high) {
    return fmt::format("Parameter {} must be between {} and {}.", name, low, high);
  }
  value = parsed;
  return {};
}

}  // namespace

asio::awaitable<HttpResponse> Router::handle(const HttpRequest& request) {
  const bool known = request.path == "/work" || request.path == "/metrics" || request.path == "/healthz";
  if (!known) co_return HttpResponse::text(404, fmt::format("No resource at {}.", request.path));
  if (request.method != "GET" && request.method != "HEAD") co_return methodNotAllowed();
  if (request.path == "/healthz") co_return HttpResponse::text(200, "ok");
  if (request.path == "/metrics") {
    HttpResponse response;
    response.contentType = "text/plain; version=0.0.4; charset=utf-8";
    response.body = metrics_.renderPrometheus(pool_.stats());
    co_return response;
  }
  HttpResponse response = co_await work(request);
  co_return response;
}

asio::awaitable<HttpResponse> Router::work(const HttpRequest& request) {
  if (!findQueryParameter(request.query, "n").found) {
    co_return HttpResponse::text(400, "Missing parameter n: use /work?n=N.");
  }
  std::uint64_t n = 0;
  if (std::string error = parseNumber(request.query, "n", 1, kMaxPrimeLimit, n); !error.empty()) {
    co_return HttpResponse::text(400, error);
  }
  // A heavier job: the same count, `repeat` times (load and shutdown tests
  // that need a job to outlast their checks in an optimized build too).
  std::uint64_t repeat = 1;
  if (std::string error = parseNumber(request.query, "repeat", 1, kMaxRepeat, repeat); !error.empty()) {
    co_return HttpResponse::text(400, error);
  }

  const Clock::time_point submitted = Clock::now();
  // Captures only trivially destructible values (see docs/coroutines.md,
  // "GCC 12 bugs and the safe forms").
  const auto job = [n, repeat, submitted](const coexec::CancellationToken& token) {
    const Clock::time_point started = Clock::now();
    WorkResult result;
    for (std::uint64_t i = 0; i < repeat; ++i)
      result.primes = countPrimesBelow(n, token);  // throws OperationCancelled once the token is
    result.queued = started - submitted;
    result.compute = Clock::now() - started;
    return result;
  };
  // The catch blocks only record what happened: a coroutine may not
  // co_return from a handler on every compiler.
  int failure = 0;
  std::string failureText;
  try {
    const WorkResult result = co_await offload(pool_, job);
    HttpResponse response;
    response.contentType = "application/json";
    response.body = fmt::format(R"({{"n":{},"primes":{},"queue_ms":{:.3f},"compute_ms":{:.3f}}})"
                                "\n",
                                n, result.primes, milliseconds(result.queued), milliseconds(result.compute));
    co_return response;
  } catch (const coexec::RejectedExecution&) {
    metrics_.countRejected();
    failure = 503;
  } catch (const coexec::OperationCancelled&) {
    failure = 503;  // shutdownNow() stopped the job: the client may retry elsewhere
  } catch (const std::exception& error) {
    failure = 500;
    failureText = fmt::format("The job failed: {}", error.what());
  }
  if (failure == 500) co_return HttpResponse::text(500, failureText);
  HttpResponse response = HttpResponse::text(503, "The server is at capacity; retry in a second.");
  response.headers.push_back({"Retry-After", "1"});
  co_return response;
}

}  // namespace offload
