// SPDX-License-Identifier: BSL-1.0
#pragma once

// Where a pool's uncaught exceptions go: the handler (or stderr), shared by
// the pool and by every armed report of an unobserved failure, so that a
// Future dropped after the pool is gone still reports through the handler
// the pool was built with. Immutable after construction: no lock.

#include <exception>
#include <string>
#include <string_view>

#include "coexec/ThreadPoolOptions.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/TaskCore.h"

namespace coexec::detail {

class UncaughtSink final : public RefCounted {
 public:
  UncaughtSink(std::string poolName, UncaughtExceptionHandler handler, bool reportUnobserved)
      : poolName_(std::move(poolName)), handler_(std::move(handler)), reportUnobserved_(reportUnobserved) {}

  /// Hands `error` to the handler (or prints it) on the calling thread; a
  /// report with `info.unobserved` is dropped when reportUnobservedFailures
  /// is off. Never throws: a throwing handler's exception is printed.
  void report(const std::exception_ptr& error, const TaskInfo& info) const noexcept;

  /// Arms `task` (a submitted task that has just failed on `threadName`;
  /// the caller holds a reference) to report its failure if nobody reads it
  /// (TaskCore::armUnobservedReport). Does nothing when the option is off or
  /// the result was consumed already (a combinator's continuation took it
  /// as the task settled). Never throws: without memory for the report the
  /// task is not armed, and that is printed.
  void armIfUnread(TaskCore& task, std::string_view threadName) noexcept;

  [[nodiscard]] const std::string& poolName() const noexcept { return poolName_; }

 private:
  const std::string poolName_;
  const UncaughtExceptionHandler handler_;
  const bool reportUnobserved_;
};

}  // namespace coexec::detail
