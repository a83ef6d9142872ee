// SPDX-License-Identifier: BSL-1.0
#include "CommandLine.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <string_view>
#include <thread>

#include <fmt/format.h>

namespace offload {
namespace {

std::uint64_t parseNumber(std::string_view option, std::string_view text, std::uint64_t min, std::uint64_t max) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    throw CommandLineError(fmt::format("{} takes a whole number from {} to {}, not '{}'", option, min, max, text));
  }
  return value;
}

}  // namespace

std::string usage() {
  return "usage:\n"
         "  offload_server serve [--port P] [--threads T] [--queue N | --unbounded] [--io-threads K]\n"
         "                       [--header-timeout-ms M] [--idle-timeout-ms M]\n"
         "  offload_server demo\n"
         "\n"
         "serve   runs the HTTP server on 127.0.0.1 until SIGINT or SIGTERM, then shuts down gracefully.\n"
         "        --port P               port to listen on; 0 (the default) picks a free one\n"
         "        --threads T            pool threads (default: the number of cores)\n"
         "        --queue N              bounded pool queue of N tasks (default 64); 503 when full\n"
         "        --unbounded            an unbounded pool queue instead (never 503, latency grows)\n"
         "        --io-threads K         threads running the io_context (default 1)\n"
         "        --header-timeout-ms M  time a client has to send a whole request (default 5000)\n"
         "        --idle-timeout-ms M    time a keep-alive connection may stay idle (default 30000)\n"
         "demo    runs the server in-process against its own load generator, bounded pool queue\n"
         "        versus unbounded, and prints a side-by-side table (under a minute)\n"
         "endpoints: GET /work?n=N (primes below N), GET /metrics (Prometheus), GET /healthz\n";
}

Command parseCommandLine(int argc, const char* const* argv) {
  Command command;
  if (argc < 2) throw CommandLineError("missing command: serve or demo");
  const std::string_view verb = argv[1];
  if (verb == "--help" || verb == "-h" || verb == "help") return command;
  if (verb == "demo") {
    if (argc > 2) throw CommandLineError(fmt::format("demo takes no options, got '{}'", argv[2]));
    command.kind = Command::Kind::demo;
    return command;
  }
  if (verb != "serve") throw CommandLineError(fmt::format("unknown command '{}': use serve or demo", verb));

  command.kind = Command::Kind::serve;
  ServeSettings& settings = command.serve;
  settings.threads = std::max(1u, std::thread::hardware_concurrency());
  bool queueGiven = false;
  for (int i = 2; i < argc; ++i) {
    const std::string_view option = argv[i];
    if (option == "--unbounded") {
      settings.unbounded = true;
      continue;
    }
    if (option == "--help" || option == "-h") {
      command.kind = Command::Kind::help;
      return command;
    }
    const bool known = option == "--port" || option == "--threads" || option == "--queue" || option == "--io-threads" ||
                       option == "--header-timeout-ms" || option == "--idle-timeout-ms";
    if (!known) throw CommandLineError(fmt::format("unknown option '{}'", option));
    if (i + 1 >= argc) throw CommandLineError(fmt::format("{} needs a value", option));
    const std::string_view value = argv[++i];
    if (option == "--port") {
      settings.server.port = static_cast<std::uint16_t>(parseNumber(option, value, 0, 65535));
    } else if (option == "--threads") {
      settings.threads = parseNumber(option, value, 1, 1024);
    } else if (option == "--queue") {
      settings.queue = parseNumber(option, value, 1, 1'000'000);
      queueGiven = true;
    } else if (option == "--io-threads") {
      settings.server.ioThreads = parseNumber(option, value, 1, 64);
    } else if (option == "--header-timeout-ms") {
      settings.server.headerTimeout = std::chrono::milliseconds(parseNumber(option, value, 1, 3'600'000));
    } else {
      settings.server.idleTimeout = std::chrono::milliseconds(parseNumber(option, value, 1, 3'600'000));
    }
  }
  if (queueGiven && settings.unbounded) throw CommandLineError("--queue and --unbounded exclude each other");
  return command;
}

}  // namespace offload
