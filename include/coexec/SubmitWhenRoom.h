// SPDX-License-Identifier: BSL-1.0
#pragma once

// The awaitable of ThreadPoolExecutor::submitWhenRoom(): backpressure that
// suspends a producer coroutine while the pool has no room, instead of
// refusing its task or blocking its thread (docs/executor.md,
// "Backpressure").

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <optional>
#include <utility>

#include "coexec/CancellationToken.h"
#include "coexec/Clock.h"
#include "coexec/Export.h"
#include "coexec/Future.h"
#include "coexec/PendingTask.h"
#include "coexec/detail/Diagnostics.h"
#include "coexec/detail/ResumePoint.h"
#include "coexec/detail/StandardLibrary.h"
#include "coexec/detail/TaskPromise.h"
#include "coexec/detail/RunSegments.h"

namespace coexec {

class ThreadPoolExecutor;

namespace detail {

class PoolImpl;
class Room;

/// A producer waiting for room in a pool: the part of the awaitable that
/// does not depend on the task's result type (RoomWait.cpp). While it
/// waits it is a node of the pool's FIFO of waiting producers, which the
/// pool serves from its head each time room may have appeared (a task left
/// the queue, a thread became idle or exited, the sizes changed): it admits
/// the head's task there, and resumes the producer; a head whose task finds
/// no room stays the head. Exactly one party ends a wait (the pool serving
/// or shutting down, the timeout, the producer's cancellation), under the
/// pool's lock; see RoomWait.cpp for how it hands the coroutine back.
class COEXEC_EXPORT RoomWaiter {
 public:
  RoomWaiter(const RoomWaiter&) = delete;
  RoomWaiter& operator=(const RoomWaiter&) = delete;

 protected:
  /// `link`: the token to link the task to (submitWhenRoom(f, token)), or
  /// null; `timed`: wait at most `timeout` on the pool's clock.
  RoomWaiter(ThreadPoolExecutor& pool, PendingTask task, const CancellationToken* link, Clock::duration timeout,
             bool timed)
      : pool_(&pool), task_(std::move(task)), timeout_(timeout), timed_(timed) {
    if (link != nullptr) {
      link_ = *link;
      linked_ = true;
    }
  }
  ~RoomWaiter();

  /// await_suspend(): admits the task at once if there is room (and no
  /// producer waits before this one), else suspends the coroutine in the
  /// pool's FIFO. False if it did not suspend. \throws std::bad_alloc;
  /// std::logic_error when awaited a second time.
  bool suspend(std::coroutine_handle<> awaiting, TaskContext* context);
  /// await_resume() before the Future is handed out: makes the coroutine's
  /// task current again and throws what ended the wait, if not admission.
  void resumed();

 private:
  friend class coexec::detail::PoolImpl;
  friend class coexec::detail::Room;

  enum class Outcome : std::uint8_t { waiting, admitted, cancelled, timedOut, shutDown };
  static constexpr std::uint8_t kSuspended = 1;  // suspend() is done arming
  static constexpr std::uint8_t kServed = 2;     // the wait has ended (outcome_ set)

  /// The producer's token was cancelled (the registration's callback).
  void onProducerCancelled() noexcept;
  /// For the party that ended the wait, outside the pool's lock: hands the
  /// coroutine back (or leaves it to suspend(), which has not suspended
  /// yet). `fromCallback`: called by onProducerCancelled(), whose
  /// registration must not be destroyed from inside itself.
  void finish(bool fromCallback) noexcept;
  /// A task that is not admitted: settled as cancelled (its links
  /// released), counted nowhere. Never throws.
  void dropTask() noexcept;

  ThreadPoolExecutor* pool_;
  PendingTask task_;
  CancellationToken link_;
  bool linked_ = false;
  const Clock::duration timeout_;
  const bool timed_;
  CancellationToken producerToken_;  // the awaiting coroutine's task's token
  // Guarded by the pool's mutex while the wait lasts:
  RoomWaiter* prev_ = nullptr;
  RoomWaiter* next_ = nullptr;
  bool queued_ = false;  // in the pool's FIFO
  Outcome outcome_ = Outcome::waiting;
  Clock::time_point deadline_{};
  std::uint32_t timerSlot_ = 0;  // the timeout's TimerId (generation 0: none)
  std::uint32_t timerGeneration_ = 0;
  RoomWaiter* nextEnded_ = nullptr;  // a list of waits ended together, finished after the lock
  std::exception_ptr error_;         // outcome_ shutDown: the RejectedExecution
  TaskCore* producerTask_ = nullptr;  // made current again on resumption
  bool suspended_ = false;
  bool awaited_ = false;  // suspend() ran: a second await is refused
  ResumePoint parked_;
  std::atomic<std::uint8_t> state_{0};
  // Last, so destroyed first: its destructor waits for a callback running on
  // another thread, which reads the fields above.
  std::optional<CancellationRegistration> registration_;
};

/// What `pool.submitWhenRoom(f...)` returns: awaited once, it gives the
/// task's `Future<R>` once the task is admitted. The contract of
/// ThreadPoolExecutor::submitWhenRoom(), whole:
///
/// - `co_await`: if the pool has room and no producer waits, the task is
///   admitted at once as submit() admits it (steps 1-3), on the awaiting
///   thread, and the coroutine goes on without suspending. Otherwise the
///   coroutine suspends, its thread free, at the back of the pool's FIFO of
///   waiting producers. Each time room may appear (a task leaves a queue, a
///   thread becomes idle or exits, setCorePoolSize(), setMaximumPoolSize(),
///   purge()), the pool admits the first producer's task on the thread that
///   made room and then resumes that producer, posted to the scheduler it
///   was running on (the pool it runs on, syncWait()'s loop, an Asio
///   executor). A head whose room a plain submit() took stays the head. The
///   rejection policy is never called.
/// - Ends without admission (the task never runs; the Future is not handed
///   out): OperationCancelled if the awaiting coroutine's task is cancelled
///   (before or while it waits); TimeoutError when `timeout` (the
///   `(f, timeout)` overload) passes on the pool's clock first (a timeout
///   already over gives one try); RejectedExecution if the pool is shut
///   down, or shutdown()/shutdownNow() comes while it waits. A task linked to
///   a token (`(f, token, priority)`) that is cancelled meanwhile is not
///   admitted: the Future returned reports OperationCancelled, as submit(f,
///   token) with a cancelled token.
/// - Counting (PoolStats): a waiting producer counts in waitingProducers,
///   its task in nothing; admitted after waiting, in taskCount and
///   waitedForRoomCount; refused by a shutdown, in rejectedCount; a timeout
///   or a cancellation, in nothing.
/// - GCC 12: `Owning` says the callable was a temporary that is not
///   trivially destructible, which GCC 12 destroys twice inside a co_await
///   expression: there, awaiting this as a temporary does not compile. Name
///   it first: `auto room = pool.submitWhenRoom([s] {...}); auto f =
///   co_await room;`. A trivially destructible callable (`[&]`) may be
///   awaited as a temporary everywhere.
/// - Neither copyable nor movable (the pool's FIFO refers to it while it
///   waits). Dropped without being awaited, it submits nothing (its task is
///   released unrun, counted nowhere). \throws std::bad_alloc from the
///   `co_await` (the producer's token, the timer), before anything is
///   admitted.
///
/// Thread safety: one coroutine awaits it; the pool ends the wait from any
/// thread.
template <class R, bool Owning>
class [[nodiscard]] SubmitWhenRoomAwaitable final : public RoomWaiter {
 public:
  SubmitWhenRoomAwaitable(ThreadPoolExecutor& pool, PendingTask task, Future<R> future,
                          const CancellationToken* link, Clock::duration timeout, bool timed)
      : RoomWaiter(pool, std::move(task), link, timeout, timed), future_(std::move(future)) {}

  /// What `co_await` uses: forwards to the awaitable, which stays where it
  /// is (the pool's FIFO refers to it).
  class Awaiter {
   public:
    explicit Awaiter(SubmitWhenRoomAwaitable& self) noexcept : self_(&self) {}
    [[nodiscard]] bool await_ready() const noexcept { return false; }
    template <class Promise>
    bool await_suspend(std::coroutine_handle<Promise> awaiting) {
      TaskContext* const context = taskContextOf(awaiting);
      task_ = taskOf(context);
      return suspendingSegment(task_, [&] { return self_->suspend(awaiting, context); });
    }
    /// The task's Future. \throws OperationCancelled, TimeoutError or
    /// RejectedExecution when the wait ended without admission.
    Future<R> await_resume() {
      segmentGoesOn(task_);  // in a new run segment (detail/RunSegments.h)
      self_->resumed();
      return std::move(self_->future_);
    }

   private:
    SubmitWhenRoomAwaitable* self_;
    detail::TaskCore* task_ = nullptr;  // the producer's task, once await_suspend ran
  };

  /// Awaiting a named one is allowed everywhere.
  Awaiter operator co_await() & noexcept { return Awaiter(*this); }
#if COEXEC_GCC_CO_AWAIT_TEMPORARY_BUG
  /// On GCC 12, refused when the callable handed over was a temporary that
  /// is not trivially destructible (see the class comment). A template, so
  /// that the error is this static_assert at the user's `co_await`.
  template <class Self = SubmitWhenRoomAwaitable>
  Awaiter operator co_await() && noexcept {
    if constexpr (Owning) {
      static_assert(kAlwaysFalse<Self>,
                    "coexec: GCC 12 miscompiles temporaries in a co_await expression; name the awaitable first: "
                    "auto room = pool.submitWhenRoom(...); auto future = co_await room;  (refused because the "
                    "callable handed over inside this co_await expression is not trivially destructible: GCC 12 "
                    "destroys its captures twice; see docs/coroutines.md)");
    }
    return Awaiter(*this);
  }
#else
  Awaiter operator co_await() && noexcept { return Awaiter(*this); }
#endif

 private:
  Future<R> future_;
};

}  // namespace detail
}  // namespace coexec
