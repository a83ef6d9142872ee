// SPDX-License-Identifier: BSL-1.0
#pragma once

// The command line of offload_server: `serve` with its options, or `demo`.

#include <cstddef>
#include <stdexcept>
#include <string>

#include "HttpServer.h"

namespace offload {

/// A command line that cannot be run; what() says what is wrong.
class CommandLineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// `serve`'s settings.
struct ServeSettings {
  ServerOptions server;     ///< --port, --io-threads, --header-timeout-ms, --idle-timeout-ms
  std::size_t threads = 0;  ///< --threads: pool threads (core = max). Default: the number of cores
  std::size_t queue = 64;   ///< --queue: bounded queue capacity. Default 64
  bool unbounded = false;   ///< --unbounded: WorkQueue::unbounded() instead
};

/// What to run.
struct Command {
  enum class Kind { serve, demo, help };
  Kind kind = Kind::help;
  ServeSettings serve;
};

/// Parses argv. Never blocks.
/// \throws CommandLineError naming the bad argument and what is expected.
Command parseCommandLine(int argc, const char* const* argv);

/// The usage text.
std::string usage();

}  // namespace offload
