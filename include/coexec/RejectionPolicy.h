// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <concepts>
#include <cstddef>
#include <string_view>
#include <type_traits>

#include "coexec/Export.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/StandardLibrary.h"

namespace coexec {

class PendingTask;
class ThreadPoolExecutor;
namespace detail {
class RejectionReporter;
}

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
/// | `abortWithReport(sink)` | as abort(), after writing a diagnostic report (at most one per interval) to `sink` | same |
/// | `newThreadRuns(n)` | runs the task on a temporary thread, at most n alive at once; beyond, as abort() | throws RejectedExecution |
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
  /// A user policy's callable: called with the rejected task and the pool (see
  /// the constructor from a callable).
  using Handler = std::function<void(PendingTask&, ThreadPoolExecutor&)>;

  /// Throws RejectedExecution (with a snapshot of the pool). The default.
  static RejectionPolicy abort();
  /// Runs the task in the submitting thread (which slows the producer down);
  /// after shutdown the task does not run (see the table). A coroutine task
  /// runs there until it first suspends and goes on wherever it resumes; the
  /// pool does not terminate until it has finished and its state is
  /// released: shutdown() lets it finish, awaitTermination() and close()
  /// wait for it, and shutdownNow() does not cancel it (it was never
  /// admitted).
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

  /// Where abortWithReport() writes its report: one call per report, with
  /// the whole text (several lines, no trailing newline).
  using ReportSink = std::function<void(std::string_view report)>;
  /// How often abortWithReport() writes at most one report, by default.
  static constexpr std::chrono::seconds kDefaultReportInterval{1};

  /// Throws RejectedExecution like abort(), and first writes one diagnostic
  /// report to `sink`: the RejectedExecution message, then the pool's
  /// dumpThreads() (its stats line, and per thread its state, the task it
  /// runs, that task's name and for how long it has run), so that an
  /// overload shows who holds the threads. Rate-limited: at most one report
  /// per `interval` on the pool's clock (ThreadPoolOptions::clock); the
  /// rejections in between are counted, and the next report says how many
  /// were not reported. Runs on the submitting thread; the sink is called
  /// without any lock of the pool held (it may call stats() or
  /// dumpThreads()); an exception it throws is printed to stderr and
  /// dropped (the task is still rejected). Writing a report costs a
  /// dumpThreads() (the pool's lock, O(threads)) and a string; the
  /// rejections it suppresses cost one mutex and a clock read each.
  /// \throws std::invalid_argument if `sink` is empty or `interval` is
  /// negative.
  static RejectionPolicy abortWithReport(ReportSink sink, std::chrono::nanoseconds interval = kDefaultReportInterval);
  /// abortWithReport() writing each report to stderr (one fmt::print, with
  /// a trailing newline).
  static RejectionPolicy abortWithReport();

  /// Runs the rejected task on a new temporary thread, named
  /// "<pool name>-tmp-<k>" (k counts from 1 per pool), with at most
  /// `maxTemporaryThreads` of them alive at once; beyond that, and after
  /// shutdown, behaves as abort(). The submitter does not wait for the task.
  /// Each task so run counts in `PoolStats::rejectedCount` (it reached the
  /// policy) and in `PoolStats::temporaryThreadRuns`, not in `taskCount`;
  /// `ThreadDump::temporaryThreads` shows how many run now. No hook runs
  /// around it (as for callerRuns()). A submitted task's Future settles as
  /// usual; an `execute()` task's exception goes to the uncaught-exception
  /// handler; a coroutine task runs on the temporary thread until it first
  /// suspends and goes on wherever it resumes. The pool does not terminate
  /// while a temporary thread runs, nor while a coroutine task one started
  /// has not finished (and released its state): shutdown() lets them
  /// finish, awaitTermination() and close() wait for them, and shutdownNow()
  /// does not cancel them (their tasks were never admitted).
  /// \note The hazard: this runs work outside the pool's bounds, the very
  ///       thing maximumPoolSize and the queue exist to prevent: under a
  ///       sustained overload it adds up to `maxTemporaryThreads` threads
  ///       (each a stack and a context switch) exactly when the machine is
  ///       busiest, and the producers never slow down. callerRuns() is
  ///       usually better: it runs the task on the producer, which then
  ///       cannot produce more until it is done (back-pressure, and no new
  ///       thread). Use newThreadRuns() for short bursts where the producer
  ///       must not block (an event loop), with a small cap.
  /// \throws std::invalid_argument if `maxTemporaryThreads` is 0.
  static RejectionPolicy newThreadRuns(std::size_t maxTemporaryThreads);

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
  /// \throws std::invalid_argument if `task` is empty (nothing is applied);
  /// RejectedExecution under abort() and where the table says so; whatever a
  /// user handler or a caller-run `execute` task throws.
  void operator()(PendingTask& task, ThreadPoolExecutor& pool) const;

  /// "abort", "callerRuns", "discard", "discardOldest", "block",
  /// "abortWithReport", "newThreadRuns" or "custom".
  [[nodiscard]] std::string_view name() const noexcept;

 private:
  enum class Kind : unsigned char {
    abort,
    callerRuns,
    discard,
    discardOldest,
    block,
    abortWithReport,
    newThreadRuns,
    custom
  };
  RejectionPolicy(Kind kind, Handler handler, std::chrono::nanoseconds timeout = {});

  Kind kind_;
  Handler handler_;
  std::chrono::nanoseconds timeout_;     // block(): the wait; abortWithReport(): the report interval
  std::size_t maxTemporaryThreads_ = 0;  // newThreadRuns()
  // abortWithReport(): the sink and the rate limit, shared by the copies of
  // the policy (a pool keeps a copy of its options' policy). A
  // detail::RejectionReporter, held by its base so that copying a policy
  // needs no definition of it.
  detail::Ref<detail::RefCounted> reporter_;
};

}  // namespace coexec
