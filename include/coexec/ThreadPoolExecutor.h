// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "coexec/Clock.h"
#include "coexec/Errors.h"
#include "coexec/Export.h"
#include "coexec/Future.h"
#include "coexec/PendingTask.h"
#include "coexec/PeriodicHandle.h"
#include "coexec/PoolStats.h"
#include "coexec/RejectionPolicy.h"
#include "coexec/ScheduledFuture.h"
#include "coexec/SubmitWhenRoom.h"
#include "coexec/Task.h"
#include "coexec/TaskOptions.h"
#include "coexec/ThreadDump.h"
#include "coexec/ThreadPoolOptions.h"
#include "coexec/WorkQueue.h"
#include "coexec/detail/CoroutineTask.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/ResultCore.h"
#include "coexec/detail/StandardLibrary.h"
#include "coexec/detail/TerminationAwaiter.h"
#include "coexec/detail/Time.h"

namespace coexec {

namespace detail {
class PoolImpl;
class ResumeOnAwaiter;
class TimerService;
struct CombinatorAccess;
struct LaneAccess;
template <class Range, bool Any>
class InvokeAwaitable;

class PeriodicBody;
}  // namespace detail

/// A thread pool with the admission semantics of Java's ThreadPoolExecutor.
///
/// Admission: a new task from `execute()` / `submit()`
///  1. starts a new core thread if fewer than corePoolSize threads run
///     (even if others are idle);
///  2. else is offered to the work queue;
///  3. if the queue refuses it (full, or synchronous() with no idle thread)
///     and fewer than maximumPoolSize threads run, starts an extra thread;
///  4. else goes to the rejection policy (submitWhenRoom(): waits for room).
/// After shutdown every new task goes to the rejection policy.
///
/// A task submitted from one of the pool's own threads (with a bounded() or
/// unbounded() queue, and at least corePoolSize threads) goes to that
/// thread's local queue instead of the shared one: run newest first by its
/// owner, stolen oldest first by idle threads. The capacity of bounded(n)
/// counts local and shared tasks together; when it is reached, such a task
/// takes the routing above. See docs/executor.md.
///
/// Threads: submissions to a bounded() or unbounded() queue take no lock
/// while the pool has corePoolSize threads, and make no system call while a
/// worker is awake; an idle worker spins ~20 us, then parks (no CPU). See
/// docs/performance.md.
///
/// Nothing is lost: every admitted task ends completed, failed, cancelled,
/// discarded (discardOldest's victims) or returned by shutdownNow(); every
/// rejected one is counted and its Future, if any, settles. See PoolStats for
/// the ledger the counters keep.
///
/// Releasing tasks: a plain callable is destroyed, with its captures, on the
/// thread that ran it as soon as it returns, before its Future settles. A
/// coroutine task is released when its coroutine finishes, on the thread that
/// finished it and before its Future settles: first the coroutine frame (with
/// a submitted Task's parameters), then the callable (with a lambda
/// coroutine's captures, which the frame uses until it is destroyed). So once
/// get() returns or `co_await` resumes, nothing the task captured is alive,
/// whether the Future is kept or dropped, and no later work on the pool is
/// needed to free it; the Future holds only the result (a result returned by
/// reference must not refer to a capture). A task that settles without
/// starting (cancelled while queued, discarded, rejected, returned by
/// shutdownNow() and dropped, or failed by a throwing beforeExecute hook)
/// keeps its callable until its last reference goes: its Future's, and the
/// queue's until a thread skips it or purge() removes it.
///
/// Lifecycle: RUNNING --shutdown()--> SHUTDOWN --(queue empty, no threads)-->
/// TERMINATED, or RUNNING/SHUTDOWN --shutdownNow()--> STOP --(no threads)-->
/// TERMINATED. SHUTDOWN refuses new tasks and runs the queued ones; STOP
/// refuses new tasks, returns the queued ones unrun and requests cancellation
/// of the running ones (cooperative: a task sees it through its
/// CancellationToken). The `terminated` hook runs once on entering TERMINATED.
/// A coroutine suspended on the pool without being one of its tasks (one that
/// hopped on with resumeOn(), or that a caller-run policy or
/// PendingTask::run() started on one of its threads) holds the pool from
/// TERMINATED as its own suspended tasks do, until it resumes (see resumeOn()).
/// A coroutine task that callerRuns() or newThreadRuns() runs outside the
/// pool's threads holds the pool from TERMINATED, wherever it goes on after
/// its first suspension, until it has finished and its task state is
/// released (see RejectionPolicy).
/// The destructor is close(): shutdown() then wait for TERMINATED.
///
/// Thread safety: every member function may be called from any thread,
/// concurrently. Calls that wait for the pool (close(), awaitTermination())
/// throw std::logic_error when called from one of the pool's own threads,
/// where they could never succeed; the destructor, which cannot throw, prints
/// the error and aborts.
class COEXEC_EXPORT ThreadPoolExecutor {
 public:
  /// Never blocks; starts no thread (threads start with the first tasks or
  /// prestartCoreThread()).
  /// An unset maximumPoolSize is corePoolSize (at least 1).
  /// \throws std::invalid_argument naming the field and its value if
  /// maximumPoolSize == 0, corePoolSize > maximumPoolSize, keepAliveTime < 0
  /// or the name is empty.
  explicit ThreadPoolExecutor(ThreadPoolOptions options);
  /// The Java-style constructor; the name is "coexec". Throws as above.
  ThreadPoolExecutor(std::size_t corePoolSize, std::size_t maximumPoolSize, std::chrono::nanoseconds keepAliveTime,
                     WorkQueue workQueue, RejectionPolicy rejectionPolicy = RejectionPolicy::abort());
  ThreadPoolExecutor(const ThreadPoolExecutor&) = delete;
  ThreadPoolExecutor& operator=(const ThreadPoolExecutor&) = delete;
  /// Blocks: close(). Called from one of the pool's own threads it cannot wait
  /// for itself; it prints the error and aborts the program.
  ~ThreadPoolExecutor();

  /// Runs `f()` (or `f(token)`) on the pool, fire-and-forget. `f` may also be a
  /// Task<void>, or a callable returning one: the coroutine starts on a pool
  /// thread, and the pool keeps the callable (and its captures) alive until the
  /// coroutine finishes, and releases it then (see "Releasing tasks"). A
  /// callable that returns an empty or already started Task fails with the
  /// error submit() throws for such a Task. Never blocks, except under block()
  /// and callerRuns() (see RejectionPolicy). An exception that escapes `f` (or
  /// the coroutine) on the pool goes to the uncaught-exception handler exactly
  /// once (an OperationCancelled is counted as a cancellation, not reported).
  /// \throws std::invalid_argument if `f` is an empty std::function, a null
  /// pointer or an empty Task. \throws std::logic_error if `f` is a Task that
  /// was already started (awaited, or run by syncWait). \throws
  /// RejectedExecution under abort() and block() (after its timeout, or after
  /// shutdown), and after shutdown under callerRuns(); what a caller-run `f` or
  /// a user policy throws.
  ///
  /// Called from inside a running task of any pool (a callable's body, or a
  /// coroutine task's chain), the new task is that task's child: cancelling
  /// the running task (its Future's cancel(), a token it is linked to,
  /// shutdownNow() of its pool if it has a token) cancels this one as
  /// Future::cancel() does, until either settles; if the running task is
  /// cancelled already, `f` never runs and the task counts as cancelled
  /// (docs/cancellation.md). Linking allocates nothing.
  template <class F>
  void execute(F&& f, int priority = 0);

  /// execute(), with the task linked to `token` exactly as submit(f, token)
  /// links it (a std::stop_token converts to one; see there: queued, it
  /// never runs; running, its token is cancelled; already cancelled, `f`
  /// never runs, nothing is admitted and it counts in taskCount and
  /// cancelledCount). Never blocks, except as execute() does. \throws what
  /// execute() throws; std::bad_alloc.
  template <class F>
  void execute(F&& f, const CancellationToken& token, int priority = 0);

  /// execute(f, options.priority) with the task named `options.name`, as
  /// submit(f, options) names it. \throws what execute() throws;
  /// std::bad_alloc if a new name cannot be stored.
  template <class F>
  void execute(F&& f, const TaskOptions& options);

  /// Runs `f()` (or `f(token)`: a callable taking a CancellationToken or a std::stop_token
  /// sees cancel() and shutdownNow()) on the pool and returns its Future. `f` may be
  /// a callable returning R, a callable returning Task<R> (the coroutine runs
  /// on the pool, which keeps the callable and its captures alive until the
  /// coroutine finishes: a lambda coroutine's captures cannot dangle; and
  /// releases them before the Future settles: see "Releasing tasks"), or a
  /// Task<R> itself (passed as an rvalue). All go through the same admission. A
  /// callable that returns an empty or already started Task fails the Future
  /// with the error this function throws for such a Task. `co_await` the
  /// Future, or wait on it from a plain thread. A coroutine task counts in
  /// taskCount once; while suspended it is not active, and its resumptions are
  /// continuations, not new tasks. Never blocks, except under block() and
  /// callerRuns(). The callable's exception goes to the Future. `priority`
  /// orders tasks in a priority() queue (higher first) and is ignored by the
  /// other queues.
  /// \throws std::invalid_argument if `f` is an empty std::function, a null
  /// pointer or an empty Task. \throws std::logic_error if `f` is a Task that
  /// was already started (awaited, or run by syncWait): starting it again would
  /// resume a finished coroutine. \throws RejectedExecution under abort() and
  /// block() (after its timeout, or after shutdown); the other policies settle
  /// the Future instead (see RejectionPolicy); what a user policy throws.
  ///
  /// Called from inside a running task of any pool, the new task is that
  /// task's child, as for execute(): cancelling the running task cancels
  /// this one (its Future then reports OperationCancelled); cancelling this
  /// one never cancels the running task.
  ///
  /// Returns a `Future<R>`, or, when `f` is a callable rvalue whose type is
  /// not trivially destructible (a lambda whose capture owns memory, a
  /// std::function), a type derived from it (detail::OwningCallableFuture)
  /// that is a Future<R> in every way (it binds to `Future<R>&` and converts
  /// to `Future<R>`) except that on GCC 12 it cannot be awaited as a
  /// temporary: there `co_await pool.submit([s] {...})` destroys the
  /// lambda's captures twice, so it does not compile (name the Future first);
  /// `co_await pool.submit([&] {...})` is accepted everywhere
  /// (docs/coroutines.md, "GCC 12 bugs and the safe forms"). The same holds
  /// for every submit() overload and for schedule().
  template <class F>
  [[nodiscard]] auto submit(F&& f, int priority = 0);

  /// submit(), with the task's cancellation also linked to `token` (a
  /// std::stop_token converts to one: a stop request cancels the task; the
  /// registration is released when the task settles):
  /// cancelling `token` cancels the task as its Future's cancel() does
  /// (queued: it never runs and the Future settles with OperationCancelled
  /// at once; running or suspended: its own token is cancelled, and the
  /// Future reports OperationCancelled when it ends), until the task
  /// settles, when the link is released. If `token` is already cancelled,
  /// `f` never runs, the Future reports OperationCancelled, nothing is
  /// admitted (no rejection policy, also after shutdown) and the task counts
  /// in taskCount and cancelledCount, not in rejectedCount. A token that can
  /// never be cancelled costs nothing. Never blocks, except as submit()
  /// does; the token's callback that cancels the task runs on the thread
  /// that cancels the token.
  /// \throws what submit() throws; std::bad_alloc if the link cannot be
  /// made.
  template <class F>
  [[nodiscard]] auto submit(F&& f, const CancellationToken& token, int priority = 0);

  /// submit(f, options.priority) with the task named `options.name` (see
  /// TaskOptions): `auto f = pool.submit(work, {.name = "resize"});`. The
  /// name shows in dumpThreads() while the task runs and in
  /// TaskInfo::taskName (hooks, and the report of a failure nobody read).
  /// Never blocks, except as submit() does.
  /// \throws what submit() throws; std::bad_alloc if a new name cannot be
  /// stored.
  template <class F>
  [[nodiscard]] auto submit(F&& f, const TaskOptions& options);

  /// Runs `f` on the pool once `delay` has passed on the pool's clock
  /// (ThreadPoolOptions::clock) and returns its ScheduledFuture (for a
  /// callable rvalue that is not trivially destructible, a type derived from
  /// it that GCC 12 refuses to await as a temporary, as submit() does). `f` is
  /// anything submit() takes (a callable, one taking a CancellationToken, a
  /// callable returning a Task, a Task). A zero or negative delay makes the
  /// task due at once (through the same path); a delay too large for the
  /// clock saturates (the task never becomes due).
  ///
  /// While it waits, the task holds no place of the work queue (bounded(n)
  /// counts it nowhere), counts in no queue size and in no counter but
  /// PoolStats::scheduledCount, and uses no thread. When it becomes due it is
  /// admitted like a continuation: never rejected, even on a saturated pool
  /// with abort(); it counts in taskCount then (once), and runs on a pool
  /// thread like any task (hooks, counters, its Future). Cancelling the
  /// Future before then removes the timer at once.
  /// Never blocks (takes the pool's lock briefly). On a ManualClock the task
  /// becomes due inside the ManualClock::advance() call that reaches its
  /// deadline (see docs/time.md).
  /// \throws std::invalid_argument for an empty callable or an empty Task;
  /// std::logic_error for a Task already started; RejectedExecution after
  /// shutdown() or shutdownNow() (whatever the rejection policy: a task due
  /// later cannot be run by the caller now; counted in rejectedCount);
  /// std::bad_alloc; std::system_error if the pool's timer thread cannot
  /// start.
  template <class F, class Rep, class Period>
  [[nodiscard]] auto schedule(F&& f, std::chrono::duration<Rep, Period> delay);

  /// Runs `f()` (or `f(token)`) on the pool periodically: first when
  /// `initialDelay` has passed on the pool's clock, then at initialDelay + k *
  /// period. Returns the schedule's PeriodicHandle. `f` is a callable; its
  /// result, if any, is ignored (a coroutine is not accepted: start one from
  /// `f` with submit()). Its token is cancelled by cancel() and shutdownNow().
  ///
  /// Rules (docs/time.md):
  /// - Runs never overlap: the next run is considered only when a run has
  ///   returned. If a run ends after the time the next one was due, the next
  ///   run starts at once (late), and the schedule then goes on at the next
  ///   point of the original grid (initialDelay + k * period) after that
  ///   start: periods missed meanwhile are skipped, never replayed in a
  ///   burst.
  /// - A run that throws: its error goes to the uncaught-exception handler
  ///   once (before the handle settles); afterExecute sees it too; then the
  ///   schedule ends with that error (the handle rethrows it), or, with
  ///   `options.continueOnError`, goes on. A run that throws
  ///   OperationCancelled ends the schedule: not reported, counted in
  ///   cancelledCount, and the handle throws OperationCancelled (or, after
  ///   cancel(), returns and counts as completed).
  /// - The whole schedule counts once in taskCount, when it first becomes
  ///   due, and once in completedTaskCount (cancel()), failedCount (an
  ///   error ended it) or cancelledCount (the pool ended it) when it ends;
  ///   the runs themselves count in no counter of the pool (runCount() on
  ///   the handle counts them). A run is admitted like a continuation: never
  ///   rejected. Hooks run around each run.
  /// - After shutdown() the schedule ends (a run in progress, or already due
  ///   and queued, still runs; none is started after it), unless
  ///   ThreadPoolOptions::continuePeriodicTasksAfterShutdown; shutdownNow()
  ///   ends it at once (the token of a run in progress is cancelled, a queued
  ///   run is dropped).
  /// Never blocks.
  /// \throws std::invalid_argument if `period` is zero or negative, or `f` is
  /// an empty callable; RejectedExecution after shutdown (whatever the
  /// rejection policy; counted in rejectedCount); std::bad_alloc;
  /// std::system_error if the pool's timer thread cannot start.
  template <class F, class Rep1, class Period1, class Rep2, class Period2>
  PeriodicHandle scheduleAtFixedRate(F&& f, std::chrono::duration<Rep1, Period1> initialDelay,
                                     std::chrono::duration<Rep2, Period2> period, PeriodicOptions options = {});

  /// Runs `f()` (or `f(token)`) on the pool periodically: first when
  /// `initialDelay` has passed on the pool's clock, then each time `delay`
  /// after the previous run returned. Otherwise as scheduleAtFixedRate()
  /// (errors, counting, shutdown, what it throws: `delay` zero or negative
  /// throws std::invalid_argument naming it).
  template <class F, class Rep1, class Period1, class Rep2, class Period2>
  PeriodicHandle scheduleWithFixedDelay(F&& f, std::chrono::duration<Rep1, Period1> initialDelay,
                                        std::chrono::duration<Rep2, Period2> delay, PeriodicOptions options = {});

  /// The clock the pool reads time from (ThreadPoolOptions::clock, or
  /// steadyClock()). Never blocks; never throws.
  [[nodiscard]] Clock& clock() const noexcept;

  /// Like execute(), but never calls the rejection policy: returns false
  /// (and counts nothing) if the task would be rejected. From inside a
  /// running task the new one is its child, as for execute() (true, and
  /// counted as cancelled, if that task is cancelled already). Never blocks.
  /// \throws std::invalid_argument for an empty callable or an empty Task;
  /// std::logic_error for a Task that was already started.
  template <class F>
  [[nodiscard]] bool tryExecute(F&& f, int priority = 0);

  /// `Future<R> f = co_await pool.submitWhenRoom(work);`: submit() for a
  /// producer coroutine. Where submit() would call the rejection policy for
  /// lack of room, the coroutine suspends instead (its thread free) until
  /// the task is admitted, as submit() admits it; the policy is never called.
  /// Waiting producers are served first come, first served, each woken only
  /// once its task is admitted. Overloads as submit(), and `(f, timeout)`
  /// (on the pool's clock). The wait ends without admission, nothing run or
  /// counted, by OperationCancelled (the coroutine's task cancelled),
  /// TimeoutError, or RejectedExecution (shutdown()/shutdownNow(), or shut
  /// down already; counted in rejectedCount). Nothing happens until awaited.
  /// \throws at the call what submit() throws for `f`. The full contract
  /// (where it resumes, counting, the GCC 12 rule): detail::RoomWaiter and
  /// SubmitWhenRoomAwaitable in coexec/SubmitWhenRoom.h.
  template <class F>
  [[nodiscard]] auto submitWhenRoom(F&& f, int priority = 0);
  /// submitWhenRoom() for submit(f, token, priority): once admitted, the task is linked to `token`.
  template <class F>
  [[nodiscard]] auto submitWhenRoom(F&& f, const CancellationToken& token, int priority = 0);
  /// submitWhenRoom() for submit(f, options).
  template <class F>
  [[nodiscard]] auto submitWhenRoom(F&& f, const TaskOptions& options);
  /// submitWhenRoom(f), waiting at most `timeout` (pool's clock), then TimeoutError; nothing run or counted.
  template <class F, class Rep, class Period>
  [[nodiscard]] auto submitWhenRoom(F&& f, std::chrono::duration<Rep, Period> timeout);

  /// `co_await pool.invokeAll(tasks)`, `invokeAll(tasks, timeout)`,
  /// `invokeAny(tasks)`, `invokeAny(tasks, timeout)`: run every task of a
  /// range on this pool and return every result (invokeAll) or the first
  /// success (invokeAny). Defined, with their full contracts, in
  /// <coexec/InvokeAll.h>: a file that calls them includes it (or
  /// <coexec/coexec.h>).
  template <class Range>
  [[nodiscard]] detail::InvokeAwaitable<Range, false> invokeAll(Range&& tasks);
  template <class Range, class Rep, class Period>
  [[nodiscard]] detail::InvokeAwaitable<Range, false> invokeAll(Range&& tasks,
                                                                std::chrono::duration<Rep, Period> timeout);
  template <class Range>
  [[nodiscard]] detail::InvokeAwaitable<Range, true> invokeAny(Range&& tasks);
  template <class Range, class Rep, class Period>
  [[nodiscard]] detail::InvokeAwaitable<Range, true> invokeAny(Range&& tasks,
                                                               std::chrono::duration<Rep, Period> timeout);

  /// Starts an orderly shutdown: no new tasks; queued and running ones
  /// finish. Scheduled one-shot tasks still run when due, unless
  /// ThreadPoolOptions::runDelayedTasksAfterShutdown is false (then their
  /// Futures report OperationCancelled); periodic schedules end (their
  /// handles report OperationCancelled; a run in progress, or already due,
  /// still runs), unless continuePeriodicTasksAfterShutdown is true. Never
  /// blocks (use awaitTermination() to wait). If the pool has no thread, no
  /// queued task and no timer it must still run, it terminates inside this
  /// call. Does nothing after the first call or after shutdownNow(). See
  /// "Lifecycle" and docs/time.md.
  void shutdown();

  /// Stops: no new tasks; returns the queued tasks that never started, in
  /// queue order; requests cancellation of the running ones (through their
  /// CancellationToken; a task that ignores it runs to the end), and with it
  /// of the work each of those submitted (its children, on any pool, are
  /// cancelled as by Future::cancel(); a returned task that was such a child
  /// comes back cancelled: isCancelled()). Never blocks
  /// for the tasks. The returned tasks are the caller's: run them, or drop
  /// them (their Futures then report BrokenPromise). A task that a pool
  /// thread forks onto its local queue at the very moment of the call is
  /// either returned or run by that thread, like a task a worker had just
  /// dequeued; such a task, and one handed to a waking worker or taken from
  /// a queue just before the call, starts with its token already cancelled.
  /// Every pending timer is cancelled: scheduled tasks not yet due settle
  /// with OperationCancelled and are not returned; one-shot tasks already
  /// due but not started are returned after the queued ones; periodic
  /// schedules end (their handles report OperationCancelled; the token of a
  /// run in progress is cancelled). Returns promptly whatever the deadlines.
  /// See "Lifecycle".
  std::vector<PendingTask> shutdownNow();

  /// Blocks until the pool is TERMINATED or `timeout` passes; true if
  /// terminated. A zero or negative timeout polls.
  /// \throws std::logic_error if called from one of this pool's threads.
  bool awaitTermination(std::chrono::nanoseconds timeout);
  /// `co_await pool.whenTerminated()` resumes the coroutine on its scheduler
  /// once the pool is TERMINATED; never blocks. \throws std::logic_error on a
  /// thread or in a coroutine task of this pool. See detail::TerminationWait.
  [[nodiscard]] detail::TerminationAwaiter<false> whenTerminated() noexcept;
  /// As whenTerminated(); gives awaitTermination()'s bool (on the pool's clock).
  [[nodiscard]] detail::TerminationAwaiter<true> whenTerminated(std::chrono::nanoseconds timeout) noexcept;

  /// shutdown(), then blocks until TERMINATED and joins every thread. A
  /// coroutine task of this pool that finishes on another thread (after a
  /// resumeOn hop, say) is waited for until that thread is done with the
  /// pool, so the pool may be destroyed as soon as close() returns.
  /// \throws std::logic_error if called from one of this pool's threads.
  void close();

  [[nodiscard]] bool isShutdown() const;     ///< true from shutdown()/shutdownNow() on
  [[nodiscard]] bool isTerminating() const;  ///< shut down but not yet terminated
  [[nodiscard]] bool isTerminated() const;   ///< true once TERMINATED: every task ended, every thread exited

  /// Starts one idle core thread if fewer than corePoolSize run; true if it
  /// started one. Never blocks. Starts nothing once the pool is shut down.
  bool prestartCoreThread();
  /// Starts idle core threads up to corePoolSize; returns how many it started
  /// (0 once the pool is shut down).
  std::size_t prestartAllCoreThreads();

  /// Never blocks. Raising it starts threads for tasks already queued;
  /// lowering it makes surplus threads subject to keepAliveTime, like extra
  /// threads. \throws std::invalid_argument if above maximumPoolSize.
  void setCorePoolSize(std::size_t corePoolSize);
  /// Never blocks. Lowering it makes surplus threads exit as soon as they are
  /// idle (running tasks are not interrupted).
  /// \throws std::invalid_argument if 0 or below corePoolSize.
  void setMaximumPoolSize(std::size_t maximumPoolSize);
  /// Never blocks. Idle threads re-arm with the new value.
  /// \throws std::invalid_argument if negative.
  void setKeepAliveTime(std::chrono::nanoseconds keepAliveTime);
  /// Never blocks. Turning it on lets idle core threads time out.
  void allowCoreThreadTimeOut(bool value);

  // The settings in force; none blocks for longer than the pool's lock.
  [[nodiscard]] std::size_t corePoolSize() const;              ///< the options' or the last setCorePoolSize()'s
  [[nodiscard]] std::size_t maximumPoolSize() const;           ///< the options' or the last setMaximumPoolSize()'s
  [[nodiscard]] std::chrono::nanoseconds keepAliveTime() const;  ///< the options' or the last setKeepAliveTime()'s
  [[nodiscard]] bool allowsCoreThreadTimeOut() const;  ///< whether idle core threads time out
  [[nodiscard]] std::string_view name() const noexcept;  ///< ThreadPoolOptions::name, its threads' name prefix
  [[nodiscard]] const WorkQueue& workQueue() const noexcept;  ///< the work queue the pool was built with
  [[nodiscard]] const RejectionPolicy& rejectionPolicy() const noexcept;  ///< the policy the pool was built with

  /// Removes cancelled tasks from the work queue (they would otherwise hold
  /// their slot until a thread skips them) and returns how many. O(queue).
  std::size_t purge();

  /// A snapshot of sizes, counters and (ThreadPoolOptions::recordLatency)
  /// latency; PoolStats says which figures are one instant's. Never blocks for
  /// long (takes the pool's lock, as admission's slow path and parking do).
  /// O(threads): it sums per-worker counters (and histograms, 10 us a thread).
  [[nodiscard]] PoolStats stats() const;
  /// The queue-wait and run-time histograms over the pool's lifetime, for
  /// exporters (empty unless ThreadPoolOptions::recordLatency). Locks and
  /// costs as stats(). \throws std::bad_alloc.
  [[nodiscard]] PoolLatency latency() const;

  /// What each pool thread is doing: its name, its state (idle, running,
  /// parked), the task it runs (name, and age on a coarse clock of a few
  /// milliseconds' resolution) and its local queue length, with the pool's
  /// stats(); formats with fmt (one line per thread). For diagnostics: a
  /// stuck task shows as a thread RUNNING the same task for a long time.
  /// Never blocks for long (takes the pool's lock, as stats() does); reads
  /// each worker without stopping it. Allocates the dump. O(threads).
  /// \throws std::bad_alloc.
  [[nodiscard]] ThreadDump dumpThreads() const;

 private:
  friend class RejectionPolicy;
  friend class detail::ResumeOnAwaiter;
  friend class detail::RoomWaiter;  // submitWhenRoom()
  friend struct detail::CombinatorAccess;  // the combinators (InvokeAll, WhenAll, AsCompleted, TaskGroup)
  friend struct detail::LaneAccess;        // SerialExecutor and KeyedExecutor (detail/LaneAccess.h)

  template <bool HasFuture, class F>
  static PendingTask makeTask(F&& f, int priority, const char* operation);
  static PendingTask adoptTask(detail::TaskCore* core) noexcept;
  [[noreturn]] static void throwEmptyCallable(const char* operation);
  /// The scope that names `operation` in an error message: "ThreadPoolExecutor::"
  /// for the pool's own operations ("submit"), none for a qualified one that
  /// names its own class ("TaskGroup::spawn", "SerialExecutor::submit").
  static constexpr std::string_view scopeOf(std::string_view operation) noexcept;
  static void nameTask(PendingTask& task, std::string_view name);

  template <class F>
  static detail::Ref<detail::PeriodicBody> makePeriodicBody(F&& f, const char* operation);
  template <class Rep, class Period>
  static Clock::duration positiveInterval(std::chrono::duration<Rep, Period> d, const char* operation,
                                          const char* what);
  [[noreturn]] static void throwNotPositive(const char* operation, const char* what, double seconds);
  /// Arms the timer of a task from schedule() (`now`: the clock's time the
  /// deadline was computed from); returns its deadline.
  Clock::time_point scheduleTask(PendingTask& task, Clock::time_point deadline, Clock::time_point now);
  PeriodicHandle schedulePeriodic(detail::Ref<detail::PeriodicBody> body, Clock::time_point first,
                                  Clock::time_point now, Clock::duration interval, bool fixedRate,
                                  PeriodicOptions options);

  /// New work: links `task` to the calling thread's current task and to
  /// `token` (linkToCaller), then admits it, or hands it to the policy.
  void admit(PendingTask task, const CancellationToken* token = nullptr);
  /// admit() without the links (a resumeOn hop: the coroutine going on, not
  /// a child of it).
  void admitUnlinked(PendingTask task);
  /// Links a new task to the current task (if any, and cancellable) and to
  /// `token` (if not null). False if either is cancelled already: the task
  /// has then settled as cancelled and is counted (taskCount,
  /// cancelledCount) without admission. \throws std::bad_alloc.
  bool linkToCaller(PendingTask& task, const CancellationToken* token);
  /// Admission without the policy: takes `task` and returns true, or leaves it
  /// (counting a rejection if asked: admit() is this plus the policy).
  bool tryAdmit(PendingTask& task, bool countRejection = false);
  // For RejectionPolicy:
  RejectedExecution rejection(const PendingTask& task) const;
  bool evictOldest();
  bool offerWithin(PendingTask& task, std::chrono::nanoseconds timeout);

  // The Future of `task`, which no other thread sees yet (made before admission).
  template <class R>
  static Future<R> unpublishedFutureOf(PendingTask& task) noexcept;
  // For the combinators, through detail::CombinatorAccess.
  template <class R>
  static detail::Ref<detail::ResultCore<R>> resultCoreOf(const PendingTask& task) noexcept;
  template <class R>
  static detail::ResultCore<R>* coreOf(const Future<R>& future) noexcept;
  template <class R>
  static Future<R> futureOf(detail::Ref<detail::ResultCore<R>> core) noexcept;
  /// The timer service of this pool, on its clock. Never blocks.
  detail::TimerService& timerService() noexcept;
  /// \throws RejectedExecution if the pool is shut down, naming `operation`;
  /// the `tasks` it refuses count in `rejectedCount` (as a `schedule*` after
  /// shutdown does), whatever the policy. Takes the pool's lock only then.
  void throwIfShutdown(const char* operation, std::size_t tasks);
  /// Hands `error` to the uncaught-exception handler (or prints it), on the
  /// calling thread; `unobserved`: a failure nobody read (TaskInfo::unobserved,
  /// dropped when reportUnobservedFailures is off). Never throws.
  void reportUncaught(const std::exception_ptr& error, bool unobserved = false) noexcept;
  /// The identity of this pool (as TaskCore::owner records it).
  [[nodiscard]] const void* identity() const noexcept;

  detail::PoolImpl* const impl_;  // owned: made by the constructor, deleted by the destructor
};

}  // namespace coexec

#include "coexec/detail/ThreadPoolExecutorImpl.h"
