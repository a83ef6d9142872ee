// SPDX-License-Identifier: BSL-1.0
#include "HttpConnection.h"

#include <array>
#include <exception>
#include <system_error>
#include <utility>

#include <asio/buffer.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <fmt/format.h>

#include "HttpServer.h"

// Runs on the connection's strand: the coroutine, the timer's handler and
// stop() never overlap, so the members need no lock. The timer cancels the
// socket's pending operation when a phase overruns its time; a generation
// number tells a stale expiry (queued before the timer was re-armed) from
// the current one.

namespace offload {
namespace {

constexpr std::chrono::milliseconds kLingerTime{1000};
constexpr std::size_t kLingerBytes = 1 << 20;

}  // namespace

HttpConnection::HttpConnection(HttpServer& server, asio::ip::tcp::socket socket, std::uint64_t id)
    : server_(server), socket_(std::move(socket)), timer_(socket_.get_executor()), id_(id) {}

asio::awaitable<void> HttpConnection::run(std::shared_ptr<HttpConnection> self) {
  try {
    co_await self->serve();
  } catch (const std::exception& error) {
    fmt::print(stderr, "offload_server: connection {} ended by an error: {}\n", self->id_, error.what());
  }
  ++self->timerGeneration_;
  self->timer_.cancel();
  std::error_code ignored;
  self->socket_.close(ignored);
  self->server_.remove(self->id_);
  self->server_.metrics_.connectionClosed();
}

void HttpConnection::stop() {
  stopping_ = true;
  if (phase_ != Phase::idle || !buffer_.empty()) return;
  std::error_code ec;
  if (socket_.available(ec) == 0 || ec) socket_.cancel(ec);
}

asio::awaitable<void> HttpConnection::serve() {
  const ServerOptions& options = server_.options();
  while (true) {
    if (buffer_.empty()) {
      std::error_code ec;
      const bool pending = socket_.available(ec) > 0 && !ec;
      if ((stopping_ || server_.stopping()) && !pending) co_return;
      enter(Phase::idle, options.idleTimeout);
    } else {
      enter(Phase::reading, options.headerTimeout);  // pipelined bytes: a request has begun
    }

    HttpParseResult parsed = server_.parser_.parse(buffer_);
    while (parsed.kind == HttpParseResult::Kind::needMore) {
      if (!co_await readMore()) {
        if (!timedOut_ || buffer_.empty()) co_return;  // closed by the client, an error, idle, or stop()
        // A request begun and not finished in time (slowloris).
        server_.metrics_.countResponse(408);
        HttpResponse response = HttpResponse::text(408, "The request was not completed in time.");
        if (co_await write(response, false, false)) co_await lingeringClose();
        co_return;
      }
      if (phase_ == Phase::idle) enter(Phase::reading, options.headerTimeout);  // the first byte: clock starts
      parsed = server_.parser_.parse(buffer_);
    }

    if (parsed.kind == HttpParseResult::Kind::error) {
      server_.metrics_.countResponse(parsed.status);
      HttpResponse response = HttpResponse::text(parsed.status, parsed.reason);
      if (co_await write(response, false, false)) co_await lingeringClose();
      co_return;
    }

    buffer_.erase(0, parsed.consumed);
    const HttpRequest& request = parsed.request;
    enter(Phase::handling, std::chrono::milliseconds::zero());
    server_.metrics_.requestStarted();
    HttpResponse response = co_await server_.router_.handle(request);
    server_.metrics_.requestFinished();
    server_.metrics_.countResponse(response.status);
    const bool keepAlive = request.keepAlive && !response.close && !stopping_ && !server_.stopping();
    if (!co_await write(response, keepAlive, request.method == "HEAD")) co_return;
    if (!keepAlive) {
      co_await lingeringClose();
      co_return;
    }
  }
}

asio::awaitable<bool> HttpConnection::readMore() {
  std::array<char, 8192> chunk;
  std::error_code ec;
  const std::size_t n =
      co_await socket_.async_read_some(asio::buffer(chunk), asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return false;
  buffer_.append(chunk.data(), n);
  // The deadline may have passed after the read completed and before this
  // ran: the timer's cancel() then found nothing to cancel, and nothing
  // would time the next read out. The request is late all the same.
  co_return !timedOut_;
}

asio::awaitable<bool> HttpConnection::write(const HttpResponse& response, bool keepAlive, bool headOnly) {
  enter(Phase::writing, server_.options().writeTimeout);
  const std::string bytes = serialize(response, keepAlive, headOnly);
  std::error_code ec;
  co_await asio::async_write(socket_, asio::buffer(bytes), asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec;
}

asio::awaitable<void> HttpConnection::lingeringClose() {
  std::error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  if (ec) co_return;
  enter(Phase::writing, kLingerTime);
  std::array<char, 4096> chunk;
  std::size_t drained = 0;
  while (drained < kLingerBytes) {
    const std::size_t n =
        co_await socket_.async_read_some(asio::buffer(chunk), asio::redirect_error(asio::use_awaitable, ec));
    if (ec || timedOut_) break;  // as in readMore(): a deadline that passed just after a read
    drained += n;
  }
}

void HttpConnection::enter(Phase phase, std::chrono::milliseconds timeout) {
  phase_ = phase;
  timedOut_ = false;
  const std::uint64_t generation = ++timerGeneration_;
  if (timeout == std::chrono::milliseconds::zero()) {
    timer_.cancel();
    return;
  }
  timer_.expires_after(timeout);
  timer_.async_wait([self = shared_from_this(), generation](std::error_code ec) {
    if (ec || generation != self->timerGeneration_) return;  // cancelled, or re-armed since
    self->timedOut_ = true;
    std::error_code ignored;
    self->socket_.cancel(ignored);
  });
}

}  // namespace offload
