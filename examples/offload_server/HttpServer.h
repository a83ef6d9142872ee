// SPDX-License-Identifier: BSL-1.0
#pragma once

// The HTTP/1.1 server: an acceptor and its connections on an io_context run
// by one or more threads, handing /work to a coexec pool (Router).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>

#include <coexec/ThreadPoolExecutor.h>

#include "HttpRequestParser.h"
#include "Router.h"
#include "ServerMetrics.h"

namespace offload {

class HttpConnection;

/// How the server listens and how long it waits for clients.
struct ServerOptions {
  /// The address to listen on. Default loopback.
  std::string address = "127.0.0.1";
  /// 0 (the default): the kernel picks a free port (see HttpServer::port()).
  std::uint16_t port = 0;
  /// Threads running the io_context. Default 1; must be >= 1.
  std::size_t ioThreads = 1;
  /// The time a client has to send a whole request (headers and body), from
  /// its first byte. Past it: 408 and the connection is closed. Default 5 s.
  std::chrono::milliseconds headerTimeout{5000};
  /// How long a keep-alive connection may wait for its next request before
  /// the server closes it (silently). Default 30 s.
  std::chrono::milliseconds idleTimeout{30000};
  /// The time a client has to read a response. Default 10 s.
  std::chrono::milliseconds writeTimeout{10000};
  HttpLimits limits{};
};

/// An HTTP/1.1 server with keep-alive that offloads /work to `pool` (see
/// Router for the endpoints and status codes, docs/offload-server.md).
///
/// Lifecycle: the constructor binds and listens (clients may connect; no
/// request is read before start()). start() runs the io threads. stop()
/// begins a graceful shutdown: the acceptor closes, idle connections close,
/// requests already being read or handled finish (their pool work included)
/// and are answered with `Connection: close`. wait() blocks until then. The
/// pool is the caller's: shut it down after wait().
///
/// Thread safety: start(), stop(), wait(), port() and metrics() may be called
/// from any thread; stop() also from an io thread (a signal handler posted
/// there).
class HttpServer {
 public:
  /// Binds and listens on options.address:options.port. Never blocks.
  /// \throws std::system_error if the address cannot be bound;
  /// std::invalid_argument if options.ioThreads is 0.
  HttpServer(coexec::ThreadPoolExecutor& pool, ServerOptions options);
  /// stop(), then wait().
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// The port the server listens on (the one picked, for port 0). Never blocks.
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }

  /// Starts the io threads and the accept loop. Never blocks. Call once.
  void start();

  /// Begins the graceful shutdown described above. Never blocks; idempotent.
  void stop();

  /// Blocks until every connection has ended and the io threads have
  /// returned. Returns at once if start() was never called.
  /// \note Must not be called from an io thread (it would wait for itself).
  void wait();

  /// The io_context the server runs on (to add a signal_set to it).
  [[nodiscard]] asio::io_context& ioContext() noexcept { return io_; }
  [[nodiscard]] const ServerMetrics& metrics() const noexcept { return metrics_; }
  [[nodiscard]] const ServerOptions& options() const noexcept { return options_; }

 private:
  friend class HttpConnection;

  asio::awaitable<void> acceptLoop();
  /// Called by a connection when it starts / ends (on its strand).
  void add(const std::shared_ptr<HttpConnection>& connection);
  void remove(std::uint64_t id);
  [[nodiscard]] bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }

  ServerOptions options_;
  ServerMetrics metrics_;
  Router router_;
  HttpRequestParser parser_;
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};  // set once by stop()
  std::vector<std::thread> threads_;
  std::mutex mutex_;  // guards connections_
  std::unordered_map<std::uint64_t, std::weak_ptr<HttpConnection>> connections_;
};

}  // namespace offload
