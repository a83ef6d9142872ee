#pragma once

#include <chrono>
#include <concepts>
#include <functional>
#include <string_view>
#include <type_traits>

#include "coexec/Export.h"

namespace coexec {

class PendingTask;
class ThreadPoolExecutor;

/// What a ThreadPoolExecutor does with a task it cannot admit: the pool is
/// shut down, or its queue is full and it already has maximumPoolSize threads.
///
/// | policy            | saturated pool                         | after shutdown                  |
/// |-------------------|----------------------------------------|---------------------------------|
/// | `abort()`         | throws RejectedExecution               | throws RejectedExecution        |
/// | `callerRuns()`    | runs the task in the submitting thread | Future: RejectedExecution; `execute` throws it |
/// | `discard()`       | drops it; Future: RejectedExecution    | same                            |
/// | `discardOldest()` | evicts the oldest queued task (its Future: RejectedExecution), retries | as discard() |
/// | `block(t)`        | the submitting thread waits up to t for room (woken as soon as a task leaves the shared or a local queue), then aborts | throws RejectedExecution |
/// | a callable        | `void(PendingTask&, ThreadPoolExecutor&)` decides | same |
///
/// A callable handler may run the task, move it away, or leave it; a task it
/// leaves is destroyed when it returns, so its Future reports BrokenPromise. An
/// exception the handler throws reaches the submitter. Every task that reaches
/// the policy counts in `PoolStats::rejectedCount`.
///
/// Thread safety: a policy is immutable; the pool calls it on the submitting
/// thread, without holding any pool lock.
class COEXEC_EXPORT RejectionPolicy {
 public:
  using Handler = std::function<void(PendingTask&, ThreadPoolExecutor&)>;

  /// Throws RejectedExecution (with a snapshot of the pool). The default.
  static RejectionPolicy abort();
  /// Runs the task in the submitting thread (which slows the producer down);
  /// after shutdown the task does not run (see the table).
  static RejectionPolicy callerRuns();
  /// Drops the task; its Future reports RejectedExecution.
  static RejectionPolicy discard();
  /// Evicts the oldest queued task (the queue's head: for `priority(n)`, the
  /// task that would run next), whose Future reports RejectedExecution and
  /// which counts in `discardedCount`, then submits the new task again. When
  /// the shared queue is empty and the places of bounded(n) are held by tasks
  /// the pool's own threads submitted (their local queues), the victim is the
  /// oldest task of the first worker's local queue that has one: local queues
  /// keep no order among themselves, so "oldest" is per worker there.
  static RejectionPolicy discardOldest();
  /// Blocks the submitting thread until the queue has room or `timeout`
  /// passes, then behaves as abort().
  /// \note A pool task that submits to its own saturated pool under block()
  ///       waits on its own pool: with every thread doing the same, nothing
  ///       frees room until the timeout. Keep the timeout short, or submit
  ///       from outside the pool.
  /// \throws std::invalid_argument if `timeout` is negative.
  static RejectionPolicy block(std::chrono::nanoseconds timeout);

  /// A user handler. \throws std::invalid_argument if `handler` is empty.
  template <class F>
  requires(std::invocable<F&, PendingTask&, ThreadPoolExecutor&> &&
           !std::same_as<std::remove_cvref_t<F>, RejectionPolicy>)
      RejectionPolicy(F&& handler)  // NOLINT(google-explicit-constructor): a callable is a policy
      : RejectionPolicy(Kind::custom, Handler(std::forward<F>(handler))) {}

  /// Applies the policy to `task` for `pool`, on the calling thread. Blocks
  /// only under block() (up to its timeout) or for as long as a caller-run task
  /// or a user handler runs. The pool calls this; tests and user handlers that
  /// delegate to a standard policy may call it too (it does not count a
  /// rejection; a policy that admits the task after all counts it in
  /// taskCount, and discardOldest counts its victim).
  /// \throws RejectedExecution under abort() and where the table says so;
  /// whatever a user handler or a caller-run `execute` task throws.
  void operator()(PendingTask& task, ThreadPoolExecutor& pool) const;

  /// "abort", "callerRuns", "discard", "discardOldest", "block" or "custom".
  [[nodiscard]] std::string_view name() const noexcept;

 private:
  enum class Kind : unsigned char { abort, callerRuns, discard, discardOldest, block, custom };
  RejectionPolicy(Kind kind, Handler handler, std::chrono::nanoseconds timeout = {});

  Kind kind_;
  Handler handler_;
  std::chrono::nanoseconds timeout_;
};

}  // namespace coexec
