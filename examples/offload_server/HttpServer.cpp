// SPDX-License-Identifier: BSL-1.0
#include "HttpServer.h"

#include <exception>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <asio/co_spawn.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>

#include <fmt/format.h>

#include "HttpConnection.h"

// The acceptor lives on a strand of its own: the accept loop and the close
// that stop() posts never overlap. Each connection lives on its own strand
// (HttpConnection.cpp). connections_ is guarded by mutex_: connections add
// and remove themselves from their strands, stop() walks it from any thread.

namespace offload {
namespace {

void reportFailure(std::string_view what, std::exception_ptr error) {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    fmt::print(stderr, "offload_server: {} failed: {}\n", what, e.what());
  }
}

}  // namespace

HttpServer::HttpServer(coexec::ThreadPoolExecutor& pool, ServerOptions options)
    : options_(std::move(options)),
      router_(pool, metrics_),
      parser_(options_.limits),
      acceptor_(asio::make_strand(io_)) {
  if (options_.ioThreads == 0) throw std::invalid_argument("HttpServer: ioThreads must be at least 1");
  const asio::ip::tcp::endpoint endpoint(asio::ip::make_address(options_.address), options_.port);
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(asio::socket_base::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen(asio::socket_base::max_listen_connections);
  port_ = acceptor_.local_endpoint().port();
}

HttpServer::~HttpServer() {
  stop();
  wait();
}

void HttpServer::start() {
  asio::co_spawn(acceptor_.get_executor(), acceptLoop(),
                 [](std::exception_ptr error) { reportFailure("the accept loop", error); });
  threads_.reserve(options_.ioThreads);
  for (std::size_t i = 0; i < options_.ioThreads; ++i)
    threads_.emplace_back([this] { io_.run(); });
}

void HttpServer::stop() {
  // Release: pairs with the acquire in stopping(), read by the connections
  // and the accept loop on other threads; the flag is all they need.
  if (stopping_.exchange(true, std::memory_order_acq_rel)) return;
  asio::post(acceptor_.get_executor(), [this] {
    std::error_code ignored;
    acceptor_.close(ignored);
  });
  std::vector<std::shared_ptr<HttpConnection>> live;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, weak] : connections_) {
      if (std::shared_ptr<HttpConnection> connection = weak.lock()) live.push_back(std::move(connection));
    }
  }
  for (const std::shared_ptr<HttpConnection>& connection : live) {
    asio::post(connection->executor(), [connection] { connection->stop(); });
  }
}

void HttpServer::wait() {
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

asio::awaitable<void> HttpServer::acceptLoop() {
  std::uint64_t accepted = 0;
  while (!stopping()) {
    std::error_code ec;
    auto strand = asio::make_strand(io_);
    asio::ip::tcp::socket socket =
        co_await acceptor_.async_accept(strand, asio::redirect_error(asio::use_awaitable, ec));
    if (stopping() || ec == asio::error::operation_aborted) break;
    if (ec) {
      // Out of file descriptors, say: wait a little instead of spinning.
      fmt::print(stderr, "offload_server: accept failed: {}\n", ec.message());
      asio::steady_timer pause(acceptor_.get_executor(), std::chrono::milliseconds(50));
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    socket.set_option(asio::ip::tcp::no_delay(true), ec);
    auto connection = std::make_shared<HttpConnection>(*this, std::move(socket), ++accepted);
    metrics_.connectionOpened();
    add(connection);
    asio::co_spawn(connection->executor(), HttpConnection::run(connection),
                   [](std::exception_ptr error) { reportFailure("a connection", error); });
  }
  std::error_code ignored;
  acceptor_.close(ignored);
}

void HttpServer::add(const std::shared_ptr<HttpConnection>& connection) {
  const std::lock_guard<std::mutex> lock(mutex_);
  connections_.emplace(connection->id(), connection);
}

void HttpServer::remove(std::uint64_t id) {
  const std::lock_guard<std::mutex> lock(mutex_);
  connections_.erase(id);
}

}  // namespace offload
