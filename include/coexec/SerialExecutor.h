// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <coroutine>
#include <cstddef>

#include "coexec/CancellationToken.h"
#include "coexec/Export.h"
#include "coexec/Future.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/Ref.h"

namespace coexec {

namespace detail {
class LaneState;
class LaneHopAwaiter;
}  // namespace detail

/// A lane: runs its tasks on a ThreadPoolExecutor one at a time, in
/// submission order (FIFO), with no thread of its own. Java's "serial
/// executor" and Asio's strand, for coexec tasks.
///
/// One at a time: a task of the lane is handed to the pool only once the
/// previous one has settled. A callable task holds the lane while it runs; a
/// coroutine task (a callable returning a Task, or a Task) holds it from its
/// start until the coroutine finishes, across all its suspensions: its
/// co_awaits do not let the next task of the lane in. Different lanes on one
/// pool run in parallel. A task's Future settles (and a coroutine awaiting it
/// may resume, inline) before the next task of the lane is handed to the
/// pool.
///
/// Admission: each task goes through the pool's admission when its turn
/// comes, without the pool's rejection policy (the submitter has long
/// returned by then: nobody could run it, block or catch the error). If the
/// pool refuses it (saturated, or shut down), that task settles with
/// RejectedExecution (its Future reports it; an execute()d task's error goes
/// to the pool's uncaught-exception handler), the pool counts it in
/// rejectedCount, and the lane goes on with its next task: nothing is lost,
/// nothing is wedged. A task that the pool discards or that shutdownNow()
/// returns settles as the pool says (RejectedExecution, or BrokenPromise
/// once dropped; run by its new owner, it runs), and the lane goes on when
/// it has settled. A task counts in the pool's counters from its admission;
/// while it waits in the lane it counts nowhere but in queued().
///
/// Cancellation: a task's Future's cancel() settles the Future at once with
/// OperationCancelled. A task still waiting in the lane never runs; a running
/// one has its token cancelled (cooperative), and the lane waits for it to
/// return. What such a task ends with is unread: a failure of its own that
/// the cancel did not supersede (its beforeExecute hook threw, or it failed
/// just before the cancel) goes to the pool's uncaught-exception handler as
/// an unobserved failure (ThreadPoolOptions::reportUnobservedFailures). Work submitted to the lane from inside a running task is that
/// task's child, as with the pool's submit() (docs/cancellation.md).
///
/// Lifetime: the destructor blocks until every task already submitted has
/// settled (run, or refused by a shut-down pool); the lane's tasks are never
/// cancelled by it. The pool must outlive the SerialExecutor.
///
/// Thread safety: every member may be called from any thread, concurrently.
/// Order is the order in which submit()/execute() calls take the lane's lock:
/// calls from one thread are in program order.
///
/// \note A lane task that waits for a later task of its own lane (get(), or
/// co_await of its Future) never finishes: the later task waits for it.
/// Destroying a lane on a thread of its pool blocks that thread until the
/// lane has drained, which can deadlock a pool whose threads are all needed.
class COEXEC_EXPORT SerialExecutor {
 public:
  /// A lane on `pool`. Never blocks; allocates the lane's state.
  explicit SerialExecutor(ThreadPoolExecutor& pool);
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;
  /// Blocks until every task submitted to the lane has settled (see
  /// "Lifetime"). Called by the lane's own active task (a callable running on
  /// the lane, or a coroutine inside `co_await resumeOn(lane)` leaving the
  /// lane's scope), it returns at once: that task is the caller, and the tasks
  /// queued behind it start only once it leaves the lane, so the lane goes on
  /// without the SerialExecutor (it keeps their order) and the caller goes on
  /// too. \note Destroying the lane while a task that shutdownNow() returned
  /// is held unrun never returns.
  ~SerialExecutor();

  /// Queues `f` on the lane and returns its Future. `f` is anything
  /// ThreadPoolExecutor::submit() takes (a callable returning R, one taking a
  /// CancellationToken, a callable returning Task<R>, a Task<R>); R must not
  /// be a reference. It runs on a thread of the pool once every task
  /// submitted to the lane before it has settled. Never blocks: if the lane
  /// is idle, the calling thread hands `f` to the pool's admission (without
  /// its policy). Called from inside a running task, the new task is its
  /// child (cancelling the running task cancels it) and sees its TaskLocal
  /// bindings.
  /// \throws std::invalid_argument for an empty callable or Task;
  /// std::logic_error for a Task already started; std::bad_alloc. Never
  /// RejectedExecution: a refused task's Future reports it (see "Admission").
  /// \note The Future is of the type ThreadPoolExecutor::submit() returns for
  /// `f`: on GCC 12, `co_await lane.submit([s] {...})` of a lambda whose
  /// capture owns memory does not compile (name the Future first); `[&]` and
  /// capture-less lambdas are accepted everywhere (docs/coroutines.md).
  template <class F>
  [[nodiscard]] auto submit(F&& f);
  /// submit(), with the task also cancelled when `token` is (as the pool's
  /// submit(f, token)); a token already cancelled settles the Future with
  /// OperationCancelled at once and the task never joins the lane.
  template <class F>
  [[nodiscard]] auto submit(F&& f, const CancellationToken& token);

  /// As submit(), fire-and-forget: an exception that escapes `f` (other than
  /// OperationCancelled), and a refusal by the pool, go to the pool's
  /// uncaught-exception handler, once. Never blocks.
  /// \throws what submit() throws.
  template <class F>
  void execute(F&& f);
  /// execute(), with the task also cancelled when `token` is (as
  /// submit(f, token)). Never blocks. \throws what submit() throws.
  template <class F>
  void execute(F&& f, const CancellationToken& token);

  /// How many tasks wait in the lane for their turn (not counting the one
  /// that holds it). Never blocks for long (the lane's lock).
  [[nodiscard]] std::size_t queued() const;
  /// The pool the lane runs on.
  [[nodiscard]] ThreadPoolExecutor& pool() const noexcept;

 private:
  friend detail::LaneHopAwaiter resumeOn(SerialExecutor& lane) noexcept;
  template <bool HasFuture, class F>
  auto enqueue(F&& f, const CancellationToken* token, const char* operation);

  detail::Ref<detail::LaneState> state_;
};

/// `co_await resumeOn(lane)` continues the awaiting coroutine as a task of
/// `lane`: it waits its turn behind the tasks submitted before, then runs on
/// a thread of the lane's pool, holding the lane until its next suspension
/// (or its end). Code after its next co_await resumes where that awaiter
/// says (the pool, not the lane): hop again to go on in the lane.
///
/// From the coroutine task that holds the lane (a coroutine submitted to
/// it) it does not suspend: the task holds the lane until it finishes.
///
/// Never blocks a thread; never rejected by the policy: if the pool refuses
/// the hop when its turn comes (saturated, shut down), the co_await throws
/// RejectedExecution on the thread that refused it (the coroutine goes on
/// there); if the hop is returned by shutdownNow() and dropped, it throws
/// BrokenPromise on the thread that dropped it. A hop is not a child of the
/// coroutine's task: cancelling the task does not take it out of the lane.
/// \note `lane` (and its pool) must outlive the coroutine's stay on it.
[[nodiscard]] COEXEC_EXPORT detail::LaneHopAwaiter resumeOn(SerialExecutor& lane) noexcept;

}  // namespace coexec

#include "coexec/detail/Lane.h"
