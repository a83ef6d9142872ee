// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <utility>

#include "coexec/Export.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/TaskCore.h"

namespace coexec {

namespace detail {
struct PendingTaskAccess;
}  // namespace detail

/// A task that has not run: what a rejection policy receives and what
/// `ThreadPoolExecutor::shutdownNow()` returns.
///
/// Whoever holds a PendingTask decides its fate: `run()` it, hand it on, or
/// drop it. Destroying one that never ran completes its Future with
/// `BrokenPromise`, so nobody waits forever.
///
/// Thread safety: a PendingTask is a move-only handle owned by one thread at a
/// time; `run()` and the destructor race safely with `Future::cancel()`.
class COEXEC_EXPORT PendingTask {
 public:
  /// An empty handle (`valid() == false`).
  PendingTask() noexcept = default;
  /// Takes over `other`'s task; `other` is left empty. Never blocks.
  PendingTask(PendingTask&&) noexcept = default;
  /// Drops the task this handle held (its Future reports BrokenPromise if it
  /// never ran), then takes `other`'s.
  PendingTask& operator=(PendingTask&& other) noexcept {
    if (this != &other) {
      if (core_) abandonUnrun();
      core_ = std::move(other.core_);
    }
    return *this;
  }
  PendingTask(const PendingTask&) = delete;
  PendingTask& operator=(const PendingTask&) = delete;
  /// Never blocks. If the task never ran, its Future reports BrokenPromise.
  ~PendingTask() {
    if (core_) abandonUnrun();
  }

  /// Runs the task on the calling thread and empties the handle. Blocks for as
  /// long as the task runs; a coroutine task runs here until it first
  /// suspends, and goes on wherever it resumes. Does nothing if the task was
  /// cancelled meanwhile.
  /// No pool hook runs and no pool counter changes: the task runs outside any
  /// pool.
  /// \throws whatever the task threw, for a task given to `execute()` (there is
  /// no Future to carry it; a fire-and-forget coroutine's failure is printed to
  /// stderr instead); a `submit()`ted task's exception goes to its Future. \throws std::logic_error if the handle is
  /// empty.
  void run();

  /// True until the task is run, moved from or dropped.
  [[nodiscard]] bool valid() const noexcept { return static_cast<bool>(core_); }
  /// The priority the task was submitted with (0 by default).
  [[nodiscard]] int priority() const noexcept;
  /// True if a Future observes this task (it came from `submit()`), false for
  /// `execute()`.
  [[nodiscard]] bool hasFuture() const noexcept;
  /// True if the task was cancelled through its Future while pending: running
  /// it does nothing.
  [[nodiscard]] bool isCancelled() const;

 private:
  friend struct detail::PendingTaskAccess;
  explicit PendingTask(detail::Ref<detail::TaskCore> core) noexcept : core_(std::move(core)) {}
  /// Settles a task that never ran with BrokenPromise and empties the handle.
  void abandonUnrun() noexcept;
  detail::Ref<detail::TaskCore> core_;
};

namespace detail {

/// What an executor does with a PendingTask beyond its public API: make one
/// of a task it has not run, and reach the task it holds (to admit it, queue
/// it, run it or settle it). For coexec's executors only; never blocks,
/// never throws.
struct PendingTaskAccess {
  /// A handle holding `core`, a task that has not run.
  [[nodiscard]] static PendingTask make(Ref<TaskCore> core) noexcept { return PendingTask(std::move(core)); }
  /// The task `task` holds (null if it is empty); moving from it empties the handle.
  [[nodiscard]] static Ref<TaskCore>& core(PendingTask& task) noexcept { return task.core_; }
  [[nodiscard]] static const Ref<TaskCore>& core(const PendingTask& task) noexcept { return task.core_; }
};

}  // namespace detail
}  // namespace coexec
