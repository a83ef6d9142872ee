#include "Router.h"

#include <charconv>
#include <exception>
#include <string>

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
  const QueryParameter parameter = findQueryParameter(request.query, "n");
  if (!parameter.found) co_return HttpResponse::text(400, "Missing parameter n: use /work?n=N.");
  std::uint64_t n = 0;
  const std::string& text = parameter.value;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (parameter.malformed || text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size()) {
    co_return HttpResponse::text(400, "Parameter n must be a decimal number.");
  }
  if (ec == std::errc::result_out_of_range || n < 1 || n > kMaxPrimeLimit) {
    co_return HttpResponse::text(400, fmt::format("Parameter n must be between 1 and {}.", kMaxPrimeLimit));
  }

  const Clock::time_point submitted = Clock::now();
  // Captures only trivially destructible values (see docs/coroutines.md,
  // "GCC 12 bugs and the safe forms").
  const auto job = [n, submitted](const coexec::CancellationToken& token) {
    const Clock::time_point started = Clock::now();
    WorkResult result;
    result.primes = countPrimesBelow(n, token);
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
