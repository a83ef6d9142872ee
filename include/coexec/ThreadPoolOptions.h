// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "coexec/Clock.h"
#include "coexec/RejectionPolicy.h"
#include "coexec/WorkQueue.h"
#include "coexec/detail/StandardLibrary.h"

namespace coexec {

/// What hooks and the uncaught-exception handler learn about the task at hand.
/// The views are valid for the duration of the call.
struct TaskInfo {
  std::string_view poolName;    ///< ThreadPoolOptions::name
  std::string_view threadName;  ///< "<name>-<n>", n counting from 1 (not truncated)
  bool hasFuture = false;       ///< true for submit(), false for execute()
  int priority = 0;             ///< the priority the task was submitted with
  /// The task's name (TaskOptions::name); empty for an unnamed task. Valid
  /// until the process exits.
  std::string_view taskName{};
  /// True only in a report of the uncaught-exception handler for a failure
  /// nobody read: a submitted task failed and its result was never consumed
  /// (see ThreadPoolOptions::reportUnobservedFailures). `threadName` is then
  /// the pool thread that ran the task, not the thread making the report.
  bool unobserved = false;
};

/// Callbacks around every task a pool thread runs (not around caller-run or
/// user-run tasks). Each may be empty.
///
/// - `beforeExecute(info)`: on the pool thread, before the task. If it throws,
///   the task does not run, its Future reports that exception (an `execute`
///   task's goes to the uncaught handler), afterExecute is not called and the
///   task counts as failed. The worker survives. The hook's error stands even
///   if a cancel reached the task as it started: its Future reports it, and
///   reports it unread (reportUnobservedFailures).
/// - `afterExecute(info, error)`: on the pool thread, after the task; `error`
///   is what the task threw, null on success. If it throws, the exception is
///   printed and dropped; the worker survives.
/// - `terminated()`: exactly once, on the thread that completes termination
///   (the last worker to exit, the thread calling shutdown() or shutdownNow()
///   on a pool with no threads, or the thread on which the pool's last
///   coroutine task finishes). Inside it, isShutdown() is true and isTerminated() false.
///   If it throws, the exception is printed and dropped; the pool terminates.
///   A coroutine that resumes onto the pool while the hook runs continues on
///   the thread that resumed it (no thread is started for a pool about to
///   terminate), as it would once the pool has terminated.
struct Hooks {
  std::function<void(const TaskInfo&)> beforeExecute{};                     ///< before each task (see above)
  std::function<void(const TaskInfo&, std::exception_ptr)> afterExecute{};  ///< after each task (see above)
  std::function<void()> terminated{};  ///< once, as the pool terminates (see above)
};

/// Creates a pool thread: start a thread that runs `body` and return it. The
/// name is "<pool name>-<n>". The factory may set affinity, stack size or
/// priority. If it throws, or returns a thread that is not joinable, the pool
/// did not get a thread: the task goes on to the next routing step and the
/// factory's exception reaches the uncaught handler. Work that the pool
/// accepted while it has no thread (a queued task with core 0 or after every
/// thread timed out, or timer work that became due) is not left waiting for
/// a later submission when the factory fails: the pool calls the factory
/// again on its clock, after 1 ms and then twice as long each time, up to
/// 1 s, until a thread starts (on a ManualClock, as advance() passes those
/// times). A `body` the pool did not
/// keep (the factory started it and then threw, or detached its thread)
/// returns at once without touching the pool, so such a thread ends on its
/// own; the pool never runs tasks on a thread it cannot join.
/// \note The factory runs under the pool's lock: it must not call the pool.
/// \note On libstdc++ this header only declares std::thread
/// (detail/StandardLibrary.h): code that writes a factory includes <thread>.
using ThreadFactory = std::function<std::thread(std::string threadName, std::function<void()> body)>;

/// Receives exceptions nobody else can: those of `execute()` tasks, of a
/// throwing beforeExecute on an `execute()` task or on a run of a periodic
/// schedule, of each run of a periodic schedule that throws (once per
/// failed run, before the schedule's handle settles), of a failing thread
/// factory, and (with `info.unobserved` set) the failures of submitted tasks
/// whose result nobody read (ThreadPoolOptions::reportUnobservedFailures).
/// Runs on the thread that caught the exception; an unobserved failure's
/// report runs on the thread that dropped the task's last reference (see
/// reportUnobservedFailures), never under a lock of the pool. If it throws,
/// the exception is printed and dropped. It may outlive the pool: a Future
/// dropped after the pool's destruction still reports through it.
using UncaughtExceptionHandler = std::function<void(std::exception_ptr error, const TaskInfo& info)>;

/// The configuration of a ThreadPoolExecutor. An aggregate: name the fields
/// that differ from their defaults, the rest keep them, e.g.
/// `ThreadPoolExecutor pool({.name = "app", .corePoolSize = 4});` (4 threads:
/// maximumPoolSize defaults to corePoolSize)
/// (every field has a default member initializer, so designated initializers
/// draw no -Wmissing-field-initializers warning).
///
/// Thread safety: a plain value; the pool constructor takes its own copy.
struct ThreadPoolOptions {
  /// Thread-name prefix, used in thread names and every diagnostic. Default
  /// "coexec". Linux shows at most 15 characters of a thread name.
  std::string name = "coexec";
  /// Threads kept even when idle (unless allowCoreThreadTimeOut). Default 1;
  /// 0 is valid (threads are started on demand and all time out). With
  /// maximumPoolSize left unset, it is also the upper bound:
  /// `{.corePoolSize = 4}` is a pool of 4 threads.
  std::size_t corePoolSize = 1;
  /// Upper bound on threads. Unset (the default) = corePoolSize, or 1 when
  /// corePoolSize is 0; so `{}` is a pool of one thread and
  /// `{.corePoolSize = 4}` one of four. A value set must be >= 1 and
  /// >= corePoolSize: an explicit 0, or one below corePoolSize, throws
  /// std::invalid_argument. Set it above corePoolSize for threads that start
  /// only when the queue is full (see ThreadPoolExecutor).
  std::optional<std::size_t> maximumPoolSize{};
  /// How long a thread above corePoolSize (or any thread, with
  /// allowCoreThreadTimeOut) stays idle before it exits. Default 60 s; must
  /// be >= 0; 0 means surplus threads exit as soon as they find no work.
  std::chrono::nanoseconds keepAliveTime = std::chrono::seconds(60);
  /// Applies keepAliveTime to core threads too. Default false.
  bool allowCoreThreadTimeOut = false;
  /// Default bounded(1024).
  WorkQueue workQueue = WorkQueue::bounded(1024);
  /// Default abort().
  RejectionPolicy rejectionPolicy = RejectionPolicy::abort();
  /// Empty (the default) = threads named "<name>-<n>" with default attributes.
  ThreadFactory threadFactory{};
  /// Default: none.
  Hooks hooks{};
  /// Empty (the default) = print the error with the pool and thread name to
  /// stderr.
  UncaughtExceptionHandler uncaughtExceptionHandler{};
  /// Where the pool reads the time: the deadlines of schedule(),
  /// scheduleAtFixedRate() and scheduleWithFixedDelay(), sleepFor() and
  /// sleepUntil() in its coroutines, and keepAliveTime. Null (the default) =
  /// the steady clock (steadyClock()). A ManualClock makes all of these move
  /// only when a test advances it (see docs/time.md). The clock must outlive
  /// the pool, and every ScheduledFuture or PeriodicHandle whose delay() is
  /// still read.
  Clock* clock = nullptr;
  /// After shutdown(), one-shot tasks from schedule() whose delay has not yet
  /// passed still run when it does, and the pool terminates only after them.
  /// false: shutdown() cancels them (their Futures report
  /// OperationCancelled). Default true (Java's default). shutdownNow() always
  /// cancels them.
  bool runDelayedTasksAfterShutdown = true;
  /// After shutdown(), periodic schedules go on (and the pool terminates
  /// only once each has been cancelled or has ended). false (the default,
  /// Java's): shutdown() ends them after the run in progress, if any; their
  /// handles report OperationCancelled. shutdownNow() always ends them.
  bool continuePeriodicTasksAfterShutdown = false;
  /// A submitted task (submit(), schedule(), a caller-run task under
  /// callerRuns()) that fails with an exception of its own (not
  /// OperationCancelled) and whose result is never read (no get(),
  /// co_await, or combinator consuming it) is reported once to the
  /// uncaught-exception handler, with TaskInfo::unobserved set, when the
  /// last holder of its result lets go of it: the Future's destructor if it
  /// outlives the task's run, else the pool thread that ran the task (the
  /// Future was dropped first). A TaskGroup's unjoined first failure is
  /// reported the same way. A cancelled task (one whose Future reports
  /// OperationCancelled), a rejected or dropped one
  /// (RejectedExecution, BrokenPromise: the policy chose that) and a result
  /// that was read are never reported. Default true; false turns these
  /// reports off (other uncaught exceptions are still reported).
  bool reportUnobservedFailures = true;
  /// Records each task's queue wait and run time in histograms
  /// (PoolStats::queueWait and runTime, ThreadPoolExecutor::latency()), on
  /// the pool's clock (a ManualClock pool records virtual time). Queue wait
  /// runs from admission (a timer task: its due time) to the start on a pool
  /// thread, run time from that start to the end of the task's body
  /// (beforeExecute included; not the settlement, nor afterExecute). A
  /// coroutine task's run time is the sum of its segments: from each start
  /// or resumption to its next coexec co_await that suspends, or its end,
  /// wherever they run (another pool, an io_context); the time it spends
  /// suspended is not counted, nor are the segments that end at, or start
  /// from, a foreign awaitable (one not coexec's: see docs/production.md).
  /// Recorded: the tasks the pool's threads run, including those a join
  /// runs where it is awaited; not recorded: tasks a caller runs
  /// (callerRuns(), PendingTask::run()).
  ///
  /// Each worker records into its own histograms (20 KiB a thread) with
  /// plain stores, no lock and no read-modify-write (a coroutine task that
  /// finishes on a thread not the pool's records under a mutex of the pool);
  /// stats() merges them. The cost is three clock reads per task, and two
  /// per coexec co_await that may suspend a coroutine task: default false,
  /// because on trivial tasks that is far more than the 5 % a default may
  /// cost (docs/production.md gives the figures).
  bool recordLatency = false;
};

}  // namespace coexec
