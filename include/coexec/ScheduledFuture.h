// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <utility>

#include "coexec/Clock.h"
#include "coexec/Future.h"

namespace coexec {

class ThreadPoolExecutor;

/// The Future of a task given to ThreadPoolExecutor::schedule(): a Future<R>
/// (every member of Future works, and it binds to `Future<R>&`) that also
/// knows when the task is due.
///
/// cancel() before the task is due removes its timer at once (its memory is
/// freed then, not at the deadline) and the Future settles with
/// OperationCancelled; the task never counts in the pool's taskCount.
///
/// Thread safety: as Future (one consumer; cancel(), isDone(), delay() from
/// any thread).
template <class R>
class [[nodiscard]] ScheduledFuture : public Future<R> {
 public:
  /// An empty ScheduledFuture (`valid() == false`).
  ScheduledFuture() noexcept = default;

  /// The time left until the task is due, read on the pool's clock: positive
  /// while it waits, zero or negative once due (whether it has run yet or
  /// not). Never blocks; never throws. Precondition: valid(), and the pool's
  /// clock is alive (ThreadPoolOptions::clock).
  [[nodiscard]] Clock::duration delay() const noexcept { return deadline_ - clock_->now(); }

  /// When the task is due, on the pool's clock. Never blocks; never throws.
  [[nodiscard]] Clock::time_point deadline() const noexcept { return deadline_; }

 private:
  friend class ThreadPoolExecutor;
  ScheduledFuture(Future<R>&& future, Clock::time_point deadline, const Clock& clock) noexcept
      : Future<R>(std::move(future)), deadline_(deadline), clock_(&clock) {}

  Clock::time_point deadline_{};
  const Clock* clock_ = nullptr;
};

}  // namespace coexec
