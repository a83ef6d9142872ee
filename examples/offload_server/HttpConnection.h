// SPDX-License-Identifier: BSL-1.0
#pragma once

// One client connection: reads requests, answers them in order, enforces the
// header, idle and write timeouts, and takes part in graceful shutdown.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <asio/awaitable.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>

#include "HttpResponse.h"

namespace offload {

class HttpServer;

/// A connection's coroutine and the state its timer and the server's stop()
/// act on. Everything here runs on the socket's strand.
///
/// Thread safety: run() and stop() run on the connection's strand only
/// (stop() is posted there by the server).
class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  /// `socket` must have a strand as its executor. Never blocks.
  HttpConnection(HttpServer& server, asio::ip::tcp::socket socket, std::uint64_t id);

  /// Serves requests on `self` until the client closes, an error or timeout
  /// ends the connection, or the server stops. The coroutine owns `self`.
  /// Never throws.
  static asio::awaitable<void> run(std::shared_ptr<HttpConnection> self);

  /// Graceful shutdown: an idle connection (no byte of a next request
  /// received or waiting in the socket) closes now; otherwise the request in
  /// progress is finished and answered with `Connection: close`.
  void stop();

  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  /// The connection's strand.
  [[nodiscard]] asio::any_io_executor executor() { return socket_.get_executor(); }

 private:
  enum class Phase { idle, reading, handling, writing };

  asio::awaitable<void> serve();
  /// Reads more bytes into buffer_; false on EOF, error or timeout.
  asio::awaitable<bool> readMore();
  /// Writes `response`; false on error or timeout.
  asio::awaitable<bool> write(const HttpResponse& response, bool keepAlive, bool headOnly);
  /// After an error response: stop sending, and drain what the client still
  /// sends for a moment, so that closing does not reset the connection
  /// before the client has read the response.
  asio::awaitable<void> lingeringClose();
  /// Enters `phase` and (re)arms the timer for `timeout` (zero: no
  /// timeout): when it fires, the socket's pending operation is cancelled
  /// and timedOut_ is set.
  void enter(Phase phase, std::chrono::milliseconds timeout);

  HttpServer& server_;
  asio::ip::tcp::socket socket_;
  asio::steady_timer timer_;
  std::uint64_t id_;
  std::string buffer_;  // bytes received and not yet parsed into a request
  Phase phase_ = Phase::idle;
  bool timedOut_ = false;              // the timer fired in the current phase
  std::uint64_t timerGeneration_ = 0;  // bumped by each enter(): a stale expiry is ignored
  bool stopping_ = false;
};

}  // namespace offload
