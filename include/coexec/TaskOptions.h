// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <string_view>

namespace coexec {

/// Per-task options for `submit(f, options)` and `execute(f, options)`:
/// `pool.submit(f, {.name = "resize-image", .priority = 2})`.
///
/// Thread safety: a plain value; the pool copies what it keeps.
struct TaskOptions {
  /// A name for the task, shown by ThreadPoolExecutor::dumpThreads() while it
  /// runs and in TaskInfo::taskName (hooks, the uncaught-exception handler).
  /// Copied, once per distinct name, into a process-wide table that lives
  /// until the process exits, so the string need not outlive the call; a
  /// task stores only a 32-bit index into it. Name kinds of work
  /// ("resize-image"), not requests: the table keeps at most
  /// kMaxTaskNames distinct names, after which new names show as
  /// "(too many task names)". Empty (the default): unnamed, which costs
  /// nothing.
  std::string_view name{};
  /// As the `priority` argument of submit(): orders a priority() queue,
  /// higher first; ignored by other queues. Default 0.
  int priority = 0;

  /// How many distinct task names the process-wide table keeps.
  static constexpr unsigned kMaxTaskNames = 4096;
};

}  // namespace coexec
