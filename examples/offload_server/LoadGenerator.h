// SPDX-License-Identifier: BSL-1.0
#pragma once

// An open-loop HTTP load generator on Asio coroutines: requests leave at a
// fixed rate whatever the responses do (as real clients do), over keep-alive
// connections, and each one's latency is measured from the moment it was
// due, so a slow server cannot hide its slowness by slowing the client
// (coordinated omission).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace offload {

/// One stretch of constant load.
struct LoadPhase {
  std::string name;
  double rate = 0;  ///< requests per second; > 0
  std::chrono::milliseconds duration{0};
};

/// What happened to the requests of one phase.
struct PhaseResult {
  std::uint64_t sent = 0;      ///< requests due in this phase (sent, or waiting for a connection)
  std::uint64_t ok = 0;        ///< 200 responses
  std::uint64_t rejected = 0;  ///< 503 responses
  std::uint64_t failed = 0;    ///< other statuses, connection errors
  /// 200 responses that arrived during this phase's time window, whatever
  /// phase sent them: the throughput the server kept up.
  std::uint64_t okDuringPhase = 0;
  std::vector<double> okLatencyMs;  ///< per 200 response, from when it was due
};

/// A live view, for a progress line.
struct LoadProgress {
  std::size_t phase = 0;  ///< index of the phase sending now (phases.size() while draining)
  std::uint64_t sent = 0;
  std::uint64_t ok = 0;
  std::uint64_t rejected = 0;
  std::uint64_t failed = 0;
  std::uint64_t outstanding = 0;  ///< due and not yet answered
  double recentP99Ms = 0;         ///< p99 of the 200s answered since the previous report
};

/// Drives one server with GET requests for a fixed target.
///
/// Thread safety: run() uses its own io_context on the calling thread; one
/// run() at a time per generator.
class LoadGenerator {
 public:
  /// `target` is the request path ("/work?n=1000"); at most
  /// `maxConnections` connections are open at once (a request due while all
  /// are busy waits for one, its latency counting from when it was due).
  LoadGenerator(std::uint16_t port, std::string target, std::size_t maxConnections);

  /// Runs the phases back to back, then waits for the responses still
  /// outstanding (up to `drainLimit`). Blocks until then. Calls `onProgress`
  /// on the calling thread every `progressInterval`. Returns one result per
  /// phase; `drainTime` receives how long the responses took to arrive
  /// after the last phase ended.
  /// \throws std::system_error if no connection to the server can be opened.
  std::vector<PhaseResult> run(const std::vector<LoadPhase>& phases, std::chrono::milliseconds progressInterval,
                               const std::function<void(const LoadProgress&)>& onProgress,
                               std::chrono::seconds drainLimit, std::chrono::duration<double>& drainTime);

 private:
  std::uint16_t port_;
  std::string request_;
  std::size_t maxConnections_;
};

/// The q-quantile (0..1) of `values` (sorted in place): nearest rank. 0 if empty.
double quantile(std::vector<double>& values, double q);

}  // namespace offload
