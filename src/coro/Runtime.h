// SPDX-License-Identifier: BSL-1.0
#pragma once

// The coroutine runtime's entry points for the library's own files (its
// public part is detail/Scheduler.h). Defined in Coroutines.cpp.

#include <exception>
#include <string>
#include <string_view>

#include "coexec/detail/TaskCore.h"

namespace coexec::detail {

/// Runs the callable task `task` on the calling thread: its body as the
/// thread's current task (and only its body: the hooks and the settlement
/// that follow are not its code, and work submitted there is not its child),
/// then settles it (TaskCore::settleRun with `beforeSettle`, and `deferred`
/// for the continuation). Precondition: tryStart() returned true and
/// isCoroutine() is false. Never throws.
RunResult runAsCurrent(TaskCore& task, TaskCore::BeforeSettle beforeSettle = nullptr, void* arg = nullptr,
                       TaskCore::Deferred* deferred = nullptr) noexcept;

/// The executor of a thread that can run, where it is awaited, a task it
/// admitted and has not started yet (fork/join: joinInline()).
class Joiner {
 public:
  /// Runs `task` on the calling thread, inside the awaiter's co_await, if
  /// nothing has started it yet; otherwise does nothing. `task` is joinable
  /// and was admitted by this thread's executor (its owner is the thread's
  /// currentPoolIdentity()); the awaiter holds a reference to it; the
  /// thread has stack to spare (stackIsLow() is false). Called only on a
  /// thread marked with this joiner. Never throws.
  virtual void join(TaskCore& task) noexcept = 0;

 protected:
  ~Joiner() = default;
};

/// Marks the calling thread as a worker of the pool `identity` (what
/// currentPoolIdentity() then returns) named `name` (which must outlive the
/// mark), whose joinable tasks `joiner` runs where they are awaited, until
/// leavePoolThread(). Never throws.
void enterPoolThread(const void* identity, const std::string& name, Joiner& joiner) noexcept;
/// Ends enterPoolThread()'s mark on the calling thread. Never throws.
void leavePoolThread() noexcept;
/// The name of the pool whose worker the calling thread is, or empty.
std::string_view currentPoolName() noexcept;

/// Prints an exception nobody else can take (a throwing hook or handler) to
/// stderr with its context. Never throws.
void printDropped(std::string_view what, std::string_view poolName, std::string_view threadName,
                  const std::exception_ptr& error) noexcept;

}  // namespace coexec::detail
