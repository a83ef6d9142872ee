// SPDX-License-Identifier: BSL-1.0
// beast_server: an HTTP/1.1 server on Boost.Beast and Boost.Asio coroutines
// that hands CPU work to a bounded coexec::ThreadPoolExecutor and awaits the
// result back on its io_context with coexec::basio::asyncWait, as
// examples/offload_server does on standalone Asio (docs/asio.md, "Boost.Asio
// and Boost.Beast"). Endpoints:
//
//   GET /work?n=N   counts the primes below N (1 <= N <= 50000000) on the
//                   pool: 200 with the count; 503 with Retry-After: 1 at once
//                   when the pool refuses the job (its queue is full)
//   GET /metrics    the pool's statistics in the Prometheus text format
//                   (coexec::writePrometheus), then the server's responses
//   GET /healthz    200 "ok"
//   with --gate:    GET /hold runs a job that holds its pool thread until
//                   GET /release, and /metrics adds beast_server_held_jobs;
//                   what the test uses to fill the pool
//   anything else:  404; not GET: 405; a malformed request or a bad N: 400
//
// Usage: beast_server [--port P] [--threads T] [--queue Q] [--gate]
// It prints `listening on 127.0.0.1:<port>` (port 0: any free port) and, on
// SIGINT or SIGTERM, stops accepting, finishes the requests in progress,
// shuts the pool down and prints `final: <pool stats>`.
// tests/integration/beast_server_test.sh drives it with curl.

#include <charconv>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <fmt/format.h>

#include <coexec/Prometheus.h>
#include <coexec/boost_asio.h>
#include <coexec/coexec.h>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

constexpr std::uint64_t kMaxN = 50'000'000;
constexpr auto kIdleTimeout = std::chrono::seconds(30);

struct Settings {
  unsigned short port = 0;
  std::size_t threads = 2;
  std::size_t queue = 8;
  bool gate = false;
};

/// The primes below `n`, by trial division: CPU work for the pool.
std::uint64_t countPrimesBelow(std::uint64_t n) {
  std::uint64_t count = 0;
  for (std::uint64_t k = 2; k < n; ++k) {
    bool prime = true;
    for (std::uint64_t d = 2; d * d <= k; ++d) {
      if (k % d == 0) {
        prime = false;
        break;
      }
    }
    count += prime ? 1 : 0;
  }
  return count;
}

/// What /hold jobs wait for on the pool, until /release opens it (for good).
class Gate {
 public:
  void wait() {
    std::unique_lock lock(mutex_);
    ++held_;
    opened_.wait(lock, [this] { return open_; });
    --held_;
  }
  /// The jobs waiting now: running on the pool, held.
  [[nodiscard]] int held() {
    std::lock_guard lock(mutex_);
    return held_;
  }
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;  // guarded by mutex_
  int held_ = 0;       // guarded by mutex_
};

/// The server: one io_context thread runs the acceptor and every
/// connection's coroutine; CPU work goes to `pool`.
class Server {
 public:
  Server(asio::io_context& io, coexec::ThreadPoolExecutor& pool, const Settings& settings)
      : io_(io),
        pool_(pool),
        settings_(settings),
        acceptor_(io, {asio::ip::make_address("127.0.0.1"), settings.port}) {}

  [[nodiscard]] unsigned short port() const { return acceptor_.local_endpoint().port(); }

  void start() { asio::co_spawn(io_, accept(), asio::detached); }

  /// No new connections; idle ones are closed, busy ones after their answer.
  void stop() {
    stopping_ = true;
    acceptor_.close();
    for (beast::tcp_stream* stream : reading_) {
      stream->cancel();
    }
    gate_.open();  // held jobs finish, so that the pool can drain
  }

  [[nodiscard]] std::uint64_t responses() const { return ok_ + rejected_ + badRequests_ + otherErrors_; }

 private:
  asio::awaitable<void> accept() {
    while (!stopping_) {
      boost::system::error_code ec;
      tcp::socket socket = co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;  // closed by stop()
      asio::co_spawn(io_, session(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> session(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    bool open = true;
    while (open && !stopping_) {
      Request request;
      boost::system::error_code ec;
      stream.expires_after(kIdleTimeout);
      reading_.insert(&stream);
      co_await http::async_read(stream, buffer, request, asio::redirect_error(asio::use_awaitable, ec));
      reading_.erase(&stream);
      stream.expires_never();
      if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
          ec == asio::error::connection_reset) {
        break;
      }
      Response response;
      if (ec) {  // not HTTP/1.1 that Beast can parse: 400, and the connection is closed
        response = text(http::status::bad_request, 11, fmt::format("bad request: {}\n", ec.message()));
        response.keep_alive(false);
      } else {
        response = co_await answer(request);
        response.keep_alive(request.keep_alive() && !stopping_);
      }
      count(response.result());
      open = response.keep_alive();
      co_await http::async_write(stream, response, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
    }
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  asio::awaitable<Response> answer(const Request& request) {
    const unsigned version = request.version();
    if (request.method() != http::verb::get) {
      Response response = text(http::status::method_not_allowed, version, "only GET\n");
      response.set(http::field::allow, "GET");
      co_return response;
    }
    const std::string_view target = request.target();
    const std::string_view path = target.substr(0, target.find('?'));
    if (path == "/work") {
      std::uint64_t n = 0;
      if (!parseN(target, n)) {
        co_return text(http::status::bad_request, version, fmt::format("n must be an integer in [1, {}]\n", kMaxN));
      }
      co_return co_await offload(version, [n] { return fmt::format("{}\n", countPrimesBelow(n)); });
    }
    if (path == "/metrics") co_return metrics(version);
    if (path == "/healthz") co_return text(http::status::ok, version, "ok\n");
    if (settings_.gate && path == "/hold") {
      co_return co_await offload(version, [this] {
        gate_.wait();
        return std::string("released\n");
      });
    }
    if (settings_.gate && path == "/release") {
      gate_.open();
      co_return text(http::status::ok, version, "released\n");
    }
    co_return text(http::status::not_found, version, "not found\n");
  }

  /// Runs `job` on the pool and answers with what it returns; 503 at once if
  /// the pool refuses it.
  template <class Job>
  asio::awaitable<Response> offload(unsigned version, Job job) {
    coexec::Future<std::string> future;
    try {
      future = pool_.submit(std::move(job));  // named first (the GCC 12 rule, docs/asio.md)
    } catch (const coexec::RejectedExecution&) {
      Response response = text(http::status::service_unavailable, version, "busy: the pool's queue is full\n");
      response.set(http::field::retry_after, "1");
      co_return response;
    }
    // Suspends this connection's coroutine, not the io thread; resumes here.
    std::string body = co_await coexec::basio::asyncWait(future, asio::use_awaitable);
    co_return text(http::status::ok, version, std::move(body));
  }

  [[nodiscard]] Response metrics(unsigned version) {
    std::string body;
    coexec::writePrometheus(body, pool_.stats());
    body += "# HELP beast_server_responses_total Responses sent, by status class.\n";
    body += "# TYPE beast_server_responses_total counter\n";
    body += fmt::format("beast_server_responses_total{{code=\"200\"}} {}\n", ok_);
    body += fmt::format("beast_server_responses_total{{code=\"400\"}} {}\n", badRequests_);
    body += fmt::format("beast_server_responses_total{{code=\"503\"}} {}\n", rejected_);
    body += fmt::format("beast_server_responses_total{{code=\"other\"}} {}\n", otherErrors_);
    if (settings_.gate) {
      body += "# HELP beast_server_held_jobs /hold jobs running on the pool, waiting for /release.\n";
      body += "# TYPE beast_server_held_jobs gauge\n";
      body += fmt::format("beast_server_held_jobs {}\n", gate_.held());
    }
    Response response = text(http::status::ok, version, std::move(body));
    response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    return response;
  }

  static bool parseN(std::string_view target, std::uint64_t& n) {
    const std::size_t at = target.find("?n=");
    if (at == std::string_view::npos) return false;
    const std::string_view digits = target.substr(at + 3);
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    return error == std::errc() && end == digits.data() + digits.size() && n >= 1 && n <= kMaxN;
  }

  static Response text(http::status status, unsigned version, std::string body) {
    Response response(status, version);
    response.set(http::field::server, "coexec-beast-example");
    response.set(http::field::content_type, "text/plain; charset=utf-8");
    response.body() = std::move(body);
    response.prepare_payload();
    return response;
  }

  void count(http::status status) {
    switch (status) {
      case http::status::ok: ++ok_; break;
      case http::status::bad_request: ++badRequests_; break;
      case http::status::service_unavailable: ++rejected_; break;
      default: ++otherErrors_; break;
    }
  }

  asio::io_context& io_;
  coexec::ThreadPoolExecutor& pool_;
  Settings settings_;
  tcp::acceptor acceptor_;
  Gate gate_;
  // The io thread's alone (every coroutine runs there):
  std::set<beast::tcp_stream*> reading_;  // sessions waiting for a request, which stop() cancels
  bool stopping_ = false;
  std::uint64_t ok_ = 0, rejected_ = 0, badRequests_ = 0, otherErrors_ = 0;
};

bool parseSettings(int argc, char** argv, Settings& settings) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--gate") {
      settings.gate = true;
      continue;
    }
    if (i + 1 == argc) return false;
    const std::string_view value = argv[++i];
    std::uint64_t number = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (error != std::errc() || end != value.data() + value.size()) return false;
    if (arg == "--port" && number <= 65535) {
      settings.port = static_cast<unsigned short>(number);
    } else if (arg == "--threads" && number >= 1 && number <= 256) {
      settings.threads = number;
    } else if (arg == "--queue" && number >= 1 && number <= 100000) {
      settings.queue = number;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  if (!parseSettings(argc, argv, settings)) {
    fmt::print(stderr, "usage: beast_server [--port P] [--threads 1..256] [--queue 1..100000] [--gate]\n");
    return 2;
  }
  try {
    coexec::ThreadPoolOptions options;
    options.name = "beast";
    options.corePoolSize = settings.threads;
    options.maximumPoolSize = settings.threads;
    options.workQueue = coexec::WorkQueue::bounded(settings.queue);
    options.rejectionPolicy = coexec::RejectionPolicy::abort();  // a full pool refuses: 503
    coexec::ThreadPoolExecutor pool(options);

    asio::io_context io;
    Server server(io, pool, settings);
    asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&server](const boost::system::error_code& ec, int) {
      if (!ec) server.stop();
    });
    server.start();
    fmt::print("listening on 127.0.0.1:{}\n", server.port());
    std::fflush(stdout);
    io.run();  // until every connection has ended after stop()

    pool.shutdown();
    if (!pool.awaitTermination(std::chrono::seconds(60))) {
      fmt::print(stderr, "beast_server: the pool did not terminate within 60 s\n");
      return 1;
    }
    fmt::print("final: {}; responses {}\n", pool.stats(), server.responses());
    return 0;
  } catch (const std::exception& error) {
    fmt::print(stderr, "beast_server: {}\n", error.what());
    return 1;
  }
}
