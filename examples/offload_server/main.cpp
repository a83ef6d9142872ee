// SPDX-License-Identifier: BSL-1.0
// offload_server: an HTTP/1.1 server on Asio coroutines that hands CPU work
// (counting primes) to a bounded coexec::ThreadPoolExecutor and awaits the
// result back on its io_context; `demo` shows what bounded admission does
// under overload. See docs/offload-server.md.

#include <csignal>
#include <cstdio>
#include <exception>

#include <asio/signal_set.hpp>

#include <fmt/format.h>

#include <coexec/coexec.h>

#include "CommandLine.h"
#include "Demo.h"
#include "HttpServer.h"

namespace {

// Serves until SIGINT or SIGTERM, then: no new connections, requests in
// progress finish, the pool drains and terminates, one final stats line.
int serve(const offload::ServeSettings& settings) {
  coexec::ThreadPoolOptions poolOptions;
  poolOptions.name = "offload";
  poolOptions.corePoolSize = settings.threads;
  poolOptions.maximumPoolSize = settings.threads;
  poolOptions.workQueue =
      settings.unbounded ? coexec::WorkQueue::unbounded() : coexec::WorkQueue::bounded(settings.queue);
  poolOptions.rejectionPolicy = coexec::RejectionPolicy::abort();
  poolOptions.recordLatency = true;  // queue wait and run time on /metrics (docs/production.md)
  coexec::ThreadPoolExecutor pool(poolOptions);

  offload::HttpServer server(pool, settings.server);
  asio::signal_set signals(server.ioContext(), SIGINT, SIGTERM);
  signals.async_wait([&server](const std::error_code& ec, int signal) {
    if (ec) return;
    fmt::print("received {}: no new connections; finishing the requests in progress\n",
               signal == SIGINT ? "SIGINT" : "SIGTERM");
    std::fflush(stdout);
    server.stop();
  });
  server.start();
  fmt::print("listening on {}:{}\n", settings.server.address, server.port());
  fmt::print("pool: {}\n", pool.stats());
  std::fflush(stdout);

  server.wait();
  pool.shutdown();
  if (!pool.awaitTermination(std::chrono::seconds(60))) {
    fmt::print(stderr, "offload_server: the pool did not terminate within 60 s\n");
    return 1;
  }
  fmt::print("final: {}; responses {}, rejected {}\n", pool.stats(), server.metrics().totalResponses(),
             server.metrics().rejected());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const offload::Command command = offload::parseCommandLine(argc, argv);
    switch (command.kind) {
      case offload::Command::Kind::help: fmt::print("{}", offload::usage()); return 0;
      case offload::Command::Kind::serve: return serve(command.serve);
      case offload::Command::Kind::demo: return offload::runDemo();
    }
  } catch (const offload::CommandLineError& error) {
    fmt::print(stderr, "offload_server: {}\n\n{}", error.what(), offload::usage());
    return 2;
  } catch (const std::exception& error) {
    fmt::print(stderr, "offload_server: {}\n", error.what());
    return 1;
  }
  return 1;
}
