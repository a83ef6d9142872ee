// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <coroutine>
#include <cstdint>

#include "coexec/Export.h"
#include "coexec/Task.h"
#include "coexec/detail/ResumePoint.h"
#include "coexec/detail/Scheduler.h"
#include "coexec/detail/RunSegments.h"
#include "coexec/detail/StandardLibrary.h"

namespace coexec::detail {

class PoolImpl;

/// What `co_await pool.whenTerminated()` and `co_await
/// pool.whenTerminated(timeout)` evaluate to (TerminationAwaiter<false> and
/// <true>): waiting for a pool to be TERMINATED without holding a thread.
///
/// - Suspends the awaiting coroutine until the pool is TERMINATED, and
///   resumes it once the pool has entered that state (after the `terminated`
///   hook has run); at once, without suspending, if the pool is TERMINATED
///   already. shutdown() and shutdownNow() lead there as for
///   awaitTermination(); nothing else does (a pool that is never shut down
///   never resumes its awaiters, unless they have a timeout).
/// - With a timeout: returns true if the pool terminated, false if `timeout`
///   passed first on the pool's clock (ThreadPoolOptions::clock: on a
///   ManualClock the awaiter resumes inside the ManualClock::advance() call
///   that reaches the deadline). The deadline is the clock's now() plus
///   `timeout`, read when the coroutine awaits. A zero or negative timeout
///   polls: it never suspends. Exactly one of the termination and the timer
///   resumes the coroutine, once; when both come together, the answer is
///   true if the pool terminated before the timer's callback got to the
///   awaiter.
/// - Where it resumes: on the scheduler the coroutine was running on when it
///   awaited (a pool's threads, or the thread of syncWait()), posted there:
///   never inline inside the call that terminates the pool; after a timeout,
///   inline if the timer's thread belongs to that scheduler, else posted. A
///   coroutine running on no scheduler (resumed directly by foreign code)
///   resumes on the thread that terminates the pool (or fires the timer),
///   inside that call.
/// - Never blocks a thread. The awaiting coroutine holds nothing of the pool
///   and does not keep it from terminating; once the pool is TERMINATED no
///   awaiter refers to it, and close() (the destructor) returns only after
///   every awaiter has been handed to its scheduler, so the pool may be
///   destroyed as soon as the awaiters resume.
///
/// \throws std::logic_error (from the `co_await`, without suspending) if the
/// awaiting coroutine runs on a thread of the pool itself, or is a coroutine
/// task of the pool (wherever it runs now): suspended, it would hold the pool
/// from terminating (see "Lifecycle" in ThreadPoolExecutor.h), as
/// awaitTermination() there would block it. \throws std::bad_alloc or
/// std::system_error if the timer cannot be armed (the pool's timer thread
/// starts with its first timer).
///
/// Safe to await as a temporary (`co_await pool.whenTerminated()`) or named
/// (`auto terminated = pool.whenTerminated(5s); bool done = co_await
/// terminated;`), on every compiler: it is built by a constructor and holds
/// no callable. Awaited once; neither copyable nor movable (the pool and the
/// timer refer to it while it waits).
///
/// Thread safety: one coroutine awaits it; the pool may terminate, and the
/// timer fire, on any thread concurrently with the await.
class COEXEC_EXPORT TerminationWait {
 public:
  TerminationWait(const TerminationWait&) = delete;
  TerminationWait& operator=(const TerminationWait&) = delete;

  /// Always false: the pool's state is read under its lock in await_suspend.
  [[nodiscard]] bool await_ready() const noexcept { return false; }
  /// False (go on without suspending) if the pool is TERMINATED already or
  /// the timeout is zero or negative. \throws as the class says.
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> awaiting) {
    task_ = taskOf(taskContextOf(awaiting));
    return suspendingSegment(task_, [&] { return suspend(awaiting); });
  }

 protected:
  TerminationWait(PoolImpl& pool, bool timed, std::chrono::nanoseconds timeout) noexcept
      : pool_(&pool), timeout_(timeout), timed_(timed) {}
  ~TerminationWait() = default;
  /// For await_resume(): true if the pool terminated. Makes the coroutine's
  /// task the thread's current task again, if it suspended (out of line: it
  /// writes a thread-local, whose address clang may cache across the
  /// suspension in code inlined into the coroutine).
  bool resumed() const noexcept;

 private:
  friend class PoolImpl;
  bool suspend(std::coroutine_handle<> awaiting);
  static void onTimeout(void* self) noexcept;  // the timer's callback, on the firing thread

  PoolImpl* const pool_;
  const std::chrono::nanoseconds timeout_;
  const bool timed_;
  TaskCore* task_ = nullptr;  // the coroutine's task (see currentTask())
  // Written by await_suspend under the pool's mutex_ before the coroutine
  // can be resumed, then by the one party that resumes it (the pool's
  // termination, or the timer), before it resumes it.
  bool suspended_ = false;
  bool terminated_ = false;
  ResumePoint parked_;
  // The pool's list of awaiters, guarded by the pool's mutex_; `linked_`
  // while in it.
  TerminationWait* prev_ = nullptr;
  TerminationWait* next_ = nullptr;
  bool linked_ = false;
  bool hasTimer_ = false;  // the timer below was armed
  std::uint32_t timerSlot_ = 0;  // its TimerId
  std::uint32_t timerGeneration_ = 0;
};

/// The awaiter of whenTerminated() (`kTimed` false: `co_await` gives void)
/// and of whenTerminated(timeout) (`kTimed`: it gives a bool). See
/// TerminationWait.
template <bool kTimed>
class [[nodiscard]] TerminationAwaiter final : public TerminationWait {
 public:
  explicit TerminationAwaiter(PoolImpl& pool, std::chrono::nanoseconds timeout = {}) noexcept
      : TerminationWait(pool, kTimed, timeout) {}

  /// Nothing (kTimed false), or true if the pool terminated and false if the
  /// timeout passed first.
  auto await_resume() const noexcept {
    if constexpr (kTimed) {
      return resumed();
    } else {
      (void)resumed();
    }
  }
};

}  // namespace coexec::detail
