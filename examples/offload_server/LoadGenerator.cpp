// SPDX-License-Identifier: BSL-1.0
#include "LoadGenerator.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <deque>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>

#include <asio/buffer.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <fmt/format.h>

// Everything runs on one thread (the io_context's only one): the scheduler,
// the connections and the progress reports share the Run's fields without
// locks.

namespace offload {
namespace {

using Clock = std::chrono::steady_clock;
using asio::ip::tcp;

struct Due {
  std::size_t phase = 0;
  Clock::time_point at;
};

struct Connection {
  explicit Connection(asio::io_context& io) : socket(io) {}
  tcp::socket socket;
  std::string buffer;
  bool used = false;  // has carried a request: the server may have closed it meanwhile
};

// The outcome of one request on one connection.
struct Exchange {
  int status = 0;         // 0: the connection failed
  bool received = false;  // some bytes of a response arrived
  bool close = false;     // the server said Connection: close
};

std::optional<std::size_t> contentLength(std::string_view head) {
  constexpr std::string_view kName = "\r\ncontent-length:";
  for (std::size_t i = 0; i + kName.size() <= head.size(); ++i) {
    bool match = true;
    for (std::size_t j = 0; j < kName.size() && match; ++j) {
      char c = head[i + j];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      match = c == kName[j];
    }
    if (!match) continue;
    std::size_t at = i + kName.size();
    while (at < head.size() && head[at] == ' ')
      ++at;
    std::size_t length = 0;
    const auto [end, ec] = std::from_chars(head.data() + at, head.data() + head.size(), length);
    if (ec != std::errc() || end == head.data() + at) return std::nullopt;
    return length;
  }
  return std::nullopt;
}

class Run {
 public:
  Run(std::uint16_t port, const std::string& request, std::size_t maxConnections, const std::vector<LoadPhase>& phases)
      : endpoint_(asio::ip::make_address("127.0.0.1"), port),
        request_(request),
        maxConnections_(maxConnections),
        phases_(phases),
        results_(phases.size()) {}

  std::vector<PhaseResult> run(std::chrono::milliseconds interval,
                               const std::function<void(const LoadProgress&)>& onProgress,
                               std::chrono::seconds drainLimit, std::chrono::duration<double>& drainTime) {
    asio::co_spawn(io_, schedule(drainLimit), asio::detached);
    asio::co_spawn(io_, report(interval, onProgress), asio::detached);
    io_.run();
    drainTime = lastResponse_ > sendingEnd_ ? lastResponse_ - sendingEnd_ : Clock::duration::zero();
    return std::move(results_);
  }

 private:
  asio::awaitable<void> schedule(std::chrono::seconds drainLimit) {
    asio::steady_timer timer(io_);
    Clock::time_point phaseStart = Clock::now();
    for (std::size_t i = 0; i < phases_.size(); ++i) {
      windows_.push_back(phaseStart);
      const Clock::time_point phaseEnd = phaseStart + phases_[i].duration;
      phase_ = i;
      for (std::uint64_t k = 0;; ++k) {
        const auto offset = std::chrono::duration<double>(static_cast<double>(k) / phases_[i].rate);
        const Clock::time_point due = phaseStart + std::chrono::duration_cast<Clock::duration>(offset);
        if (due >= phaseEnd) break;
        if (due > Clock::now()) {
          timer.expires_at(due);
          std::error_code ignored;
          co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
        }
        dispatch(Due{i, due});
      }
      phaseStart = phaseEnd;
    }
    sendingEnd_ = phaseStart;
    windows_.push_back(phaseStart);
    phase_ = phases_.size();
    while (outstanding_ > 0 && Clock::now() < sendingEnd_ + drainLimit) {
      timer.expires_after(std::chrono::milliseconds(5));
      std::error_code ignored;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
    finished_ = true;
    io_.stop();  // abandons requests still outstanding after drainLimit
  }

  void dispatch(const Due& due) {
    ++results_[due.phase].sent;
    ++sent_;
    ++outstanding_;
    if (!idle_.empty()) {
      std::shared_ptr<Connection> connection = std::move(idle_.back());
      idle_.pop_back();
      asio::co_spawn(io_, serve(std::move(connection), due), asio::detached);
    } else if (connections_ < maxConnections_) {
      ++connections_;
      asio::co_spawn(io_, serve(std::make_shared<Connection>(io_), due), asio::detached);
    } else {
      waiting_.push_back(due);
    }
  }

  // Carries requests on one connection: `first`, then any that wait.
  asio::awaitable<void> serve(std::shared_ptr<Connection> connection, Due first) {
    Due due = first;
    while (true) {
      Exchange result = co_await exchange(*connection);
      if (result.status == 0 && connection->used && !result.received) {
        // A keep-alive connection the server had closed: once more, fresh.
        connection->socket = tcp::socket(io_);
        connection->buffer.clear();
        connection->used = false;
        result = co_await exchange(*connection);
      }
      connection->used = true;
      record(due, result.status);
      if (result.status == 0 || result.close) {
        std::error_code ignored;
        connection->socket.close(ignored);
        connection->socket = tcp::socket(io_);
        connection->buffer.clear();
        connection->used = false;
      }
      if (waiting_.empty() || finished_) break;
      due = waiting_.front();
      waiting_.pop_front();
    }
    idle_.push_back(std::move(connection));
  }

  asio::awaitable<Exchange> exchange(Connection& connection) {
    Exchange result;
    std::error_code ec;
    if (!connection.socket.is_open()) {
      co_await connection.socket.async_connect(endpoint_, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return result;
      connection.socket.set_option(tcp::no_delay(true), ec);
    }
    co_await asio::async_write(connection.socket, asio::buffer(request_),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return result;
    std::array<char, 4096> chunk;
    std::size_t headEnd = std::string::npos;
    std::optional<std::size_t> length;
    while (true) {
      if (headEnd == std::string::npos) {
        headEnd = connection.buffer.find("\r\n\r\n");
        if (headEnd != std::string::npos) {
          headEnd += 4;
          length = contentLength(std::string_view(connection.buffer).substr(0, headEnd));
          if (!length) co_return result;  // this server always sends Content-Length
        }
      }
      if (headEnd != std::string::npos && connection.buffer.size() >= headEnd + *length) break;
      const std::size_t n = co_await connection.socket.async_read_some(asio::buffer(chunk),
                                                                       asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return result;
      result.received = true;
      connection.buffer.append(chunk.data(), n);
    }
    const std::string_view head = std::string_view(connection.buffer).substr(0, headEnd);
    int status = 0;
    if (head.size() > 12 && head.substr(0, 9) == "HTTP/1.1 ")
      std::from_chars(head.data() + 9, head.data() + 12, status);
    result.status = status;
    result.close = head.find("\r\nConnection: close\r\n") != std::string_view::npos;
    connection.buffer.erase(0, headEnd + *length);
    co_return result;
  }

  void record(const Due& due, int status) {
    --outstanding_;
    const Clock::time_point now = Clock::now();
    lastResponse_ = now;
    PhaseResult& result = results_[due.phase];
    if (status == 200) {
      ++result.ok;
      ++ok_;
      const double latency = std::chrono::duration<double, std::milli>(now - due.at).count();
      result.okLatencyMs.push_back(latency);
      recent_.push_back(latency);
      // The window the response arrived in (the last one has no end yet
      // while it is sending; after the last phase, none).
      for (std::size_t i = 0; i < windows_.size() && i < results_.size(); ++i) {
        if (now >= windows_[i] && (i + 1 == windows_.size() || now < windows_[i + 1])) {
          ++results_[i].okDuringPhase;
          break;
        }
      }
    } else if (status == 503) {
      ++result.rejected;
      ++rejected_;
    } else {
      ++result.failed;
      ++failed_;
    }
  }

  asio::awaitable<void> report(std::chrono::milliseconds interval,
                               std::function<void(const LoadProgress&)> onProgress) {
    asio::steady_timer timer(io_);
    while (!finished_) {
      timer.expires_after(interval);
      std::error_code ignored;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
      LoadProgress progress;
      progress.phase = phase_;
      progress.sent = sent_;
      progress.ok = ok_;
      progress.rejected = rejected_;
      progress.failed = failed_;
      progress.outstanding = outstanding_;
      progress.recentP99Ms = quantile(recent_, 0.99);
      recent_.clear();
      if (onProgress) onProgress(progress);
    }
  }

  asio::io_context io_;
  tcp::endpoint endpoint_;
  const std::string& request_;
  std::size_t maxConnections_;
  const std::vector<LoadPhase>& phases_;
  std::vector<PhaseResult> results_;
  std::vector<Clock::time_point> windows_;  // phase i's window: [windows_[i], windows_[i + 1])
  std::size_t phase_ = 0;
  bool finished_ = false;
  Clock::time_point sendingEnd_{};
  Clock::time_point lastResponse_{};
  std::size_t connections_ = 0;
  std::vector<std::shared_ptr<Connection>> idle_;
  std::deque<Due> waiting_;
  std::uint64_t sent_ = 0, ok_ = 0, rejected_ = 0, failed_ = 0, outstanding_ = 0;
  std::vector<double> recent_;
};

}  // namespace

LoadGenerator::LoadGenerator(std::uint16_t port, std::string target, std::size_t maxConnections)
    : port_(port),
      request_(fmt::format("GET {} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n", target, port)),
      maxConnections_(maxConnections) {}

std::vector<PhaseResult> LoadGenerator::run(const std::vector<LoadPhase>& phases,
                                            std::chrono::milliseconds progressInterval,
                                            const std::function<void(const LoadProgress&)>& onProgress,
                                            std::chrono::seconds drainLimit, std::chrono::duration<double>& drainTime) {
  Run run(port_, request_, maxConnections_, phases);
  return run.run(progressInterval, onProgress, drainLimit, drainTime);
}

double quantile(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace offload
