// SPDX-License-Identifier: BSL-1.0
#pragma once

// Death tests for Catch2 v2, which has none: a test runs its own executable
// again on one hidden test case (the "child", tagged "[.]" so that neither a
// plain run nor CTest's discovery picks it up), captures what the child
// writes, and checks how it ended (a signal, such as SIGABRT from
// std::abort(), std::terminate() or a failed assert()).
//
// The child case does its fatal work only when isDeathChild() is true, so
// running hidden tests by hand does not kill the run; it first turns core
// dumps off. A child that does not die within kLong is killed, and the
// test that started it fails with what it wrote.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "TestSupport.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX declares it nowhere in a header

namespace coexec::test {

/// Set (to "1") in the environment of a child started by runDeathChild().
inline constexpr const char* kDeathChildVariable = "COEXEC_DEATH_CHILD";

/// True in a process started by runDeathChild(). A hidden child test case
/// returns at once when this is false.
[[nodiscard]] inline bool isDeathChild() {
  const char* value = std::getenv(kDeathChildVariable);
  return value != nullptr && std::string_view(value) == "1";
}

/// In a child, before its fatal work: no core file for the expected abort,
/// and SIGABRT back to its default action. Catch2's own handler would
/// otherwise run first and allocate inside the signal, which
/// ThreadSanitizer reports ("signal-unsafe call inside of a signal") and,
/// with halt_on_error, turns into an exit instead of the abort.
inline void prepareDeathChild() {
  const rlimit none{0, 0};
  (void)setrlimit(RLIMIT_CORE, &none);
  (void)std::signal(SIGABRT, SIG_DFL);
}

/// How a child process ended and what it wrote (stdout and stderr together).
struct ChildOutcome {
  bool signalled = false;  ///< ended by a signal (then `signal` says which)
  int signal = 0;
  int exitCode = -1;    ///< when it exited normally
  bool killed = false;  ///< it ran past kLong and was killed
  std::string output;
};

/// Runs this test executable on the one test case named `testName` (a
/// hidden child case) with kDeathChildVariable set, and returns how it ended.
/// Blocks until the child has ended (at most kLong, then it is killed).
inline ChildOutcome runDeathChild(const std::string& testName) {
  const auto check = [](int error, const char* what) {
    if (error != 0) throw std::system_error(error, std::generic_category(), what);
  };
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
  posix_spawn_file_actions_t actions;
  check(posix_spawn_file_actions_init(&actions), "posix_spawn_file_actions_init");
  (void)posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  (void)posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);

  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, kDeathChildVariable, std::strlen(kDeathChildVariable)) != 0) {
      environment.emplace_back(*entry);
    }
  }
  // Built by append, not `std::string(...) + "=1"`: GCC 12 at -O1 under TSan
  // (tests' precompiled header) warns falsely that operator+'s move reads
  // past the temporary (-Warray-bounds).
  std::string marker(kDeathChildVariable);
  marker.append("=1");
  environment.push_back(std::move(marker));
  std::vector<char*> envp;
  for (std::string& entry : environment)
    envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::string executable = "/proc/self/exe";
  std::string name = testName;
  std::vector<char*> argv{executable.data(), name.data(), nullptr};

  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, executable.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (spawned != 0) {
    close(fds[0]);
    check(spawned, "posix_spawn");
  }

  ChildOutcome outcome;
  const auto deadline = std::chrono::steady_clock::now() + kLong;
  char buffer[4096];
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      kill(pid, SIGKILL);
      outcome.killed = true;
      break;
    }
    pollfd readable{fds[0], POLLIN, 0};
    const int ready = poll(&readable, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // timed out: the deadline check above kills it
    const ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child (and whatever inherited the pipe) is gone
    outcome.output.append(buffer, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    outcome.signalled = true;
    outcome.signal = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    outcome.exitCode = WEXITSTATUS(status);
  }
  return outcome;
}

/// Runs the child case `testName` and checks that it was ended by SIGABRT
/// (std::abort(), std::terminate(), a failed assert()) after writing
/// `expected` (a part of its output). Returns the output.
inline std::string requireAbortsWith(const std::string& testName, std::string_view expected) {
  const ChildOutcome outcome = runDeathChild(testName);
  INFO("the child '" << testName << "' wrote:\n" << outcome.output);
  REQUIRE_FALSE(outcome.killed);
  REQUIRE(outcome.signalled);
  CHECK(outcome.signal == SIGABRT);
  CHECK_THAT(outcome.output, Catch::Matchers::Contains(std::string(expected)));
  return outcome.output;
}

}  // namespace coexec::test
