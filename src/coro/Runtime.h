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
/// then settles it (TaskCore::settleRun with `beforeSettle`). Precondition:
/// tryStart() returned true and isCoroutine() is false. Never throws.
RunResult runAsCurrent(TaskCore& task, TaskCore::BeforeSettle beforeSettle = nullptr, void* arg = nullptr) noexcept;

/// Marks the calling thread as a worker of the pool `identity` (what
/// currentPoolIdentity() then returns) named `name` (which must outlive the
/// mark), until leavePoolThread(). Never throws.
void enterPoolThread(const void* identity, const std::string& name) noexcept;
/// Ends enterPoolThread()'s mark on the calling thread. Never throws.
void leavePoolThread() noexcept;
/// The name of the pool whose worker the calling thread is, or empty.
std::string_view currentPoolName() noexcept;

/// Prints an exception nobody else can take (a throwing hook or handler) to
/// stderr with its context. Never throws.
void printDropped(std::string_view what, std::string_view poolName, std::string_view threadName,
                  const std::exception_ptr& error) noexcept;

}  // namespace coexec::detail
