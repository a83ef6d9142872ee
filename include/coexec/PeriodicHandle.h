// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstdint>
#include <stdexcept>
#include <utility>

#include "coexec/Clock.h"
#include "coexec/Export.h"
#include "coexec/Future.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/StandardLibrary.h"

namespace coexec {

class ThreadPoolExecutor;

/// How a periodic schedule (scheduleAtFixedRate(), scheduleWithFixedDelay())
/// treats a run that throws. Every such error goes to the pool's
/// uncaught-exception handler, once, whatever the choice.
struct PeriodicOptions {
  /// false (the default): the schedule ends with that error, which its
  /// PeriodicHandle then rethrows. true: the schedule goes on as if the run
  /// had returned.
  bool continueOnError = false;
};

namespace detail {

/// The pool's side of a periodic schedule, as its handle sees it.
class COEXEC_EXPORT PeriodicControl : public RefCounted {
 public:
  /// See PeriodicHandle::cancel().
  virtual bool cancel() noexcept = 0;
  /// Runs started so far.
  [[nodiscard]] virtual std::uint64_t runCount() const noexcept = 0;
  /// When the next run is due (time_point::min() while a run is due or
  /// running, or once the schedule has ended).
  [[nodiscard]] virtual Clock::time_point nextRun() const noexcept = 0;
  [[nodiscard]] virtual const Clock& clock() const noexcept = 0;
};

}  // namespace detail

/// The handle of a periodic schedule: cancel it, ask about it, and wait for
/// its end (co_await it from a coroutine, or wait()/get() from a plain
/// thread).
///
/// A schedule ends in exactly one way, which its handle reports:
/// - cancel(): the handle completes normally (get() returns);
/// - a run threw and PeriodicOptions::continueOnError is false: get()
///   rethrows that error (which also reached the uncaught-exception handler);
/// - the pool ended it: shutdownNow(), or shutdown() when
///   ThreadPoolOptions::continuePeriodicTasksAfterShutdown is false: get()
///   throws OperationCancelled.
/// Dropping the handle does not cancel the schedule (it runs until the pool
/// ends it).
///
/// Thread safety: a move-only handle for one consumer of the end (get(),
/// `co_await`, which take it once); cancel(), isDone(), runCount() and
/// delay() may be called from any thread, concurrently.
class [[nodiscard]] PeriodicHandle {
 public:
  /// An empty handle (`valid() == false`).
  PeriodicHandle() noexcept = default;
  /// Takes over `other`'s schedule; `other` is left empty. Never blocks.
  PeriodicHandle(PeriodicHandle&&) noexcept = default;
  /// Drops this handle, as the destructor does (its schedule goes on), then
  /// takes over `other`'s; `other` is left empty. Never blocks.
  PeriodicHandle& operator=(PeriodicHandle&&) noexcept = default;
  PeriodicHandle(const PeriodicHandle&) = delete;
  PeriodicHandle& operator=(const PeriodicHandle&) = delete;
  /// Never blocks; the schedule goes on.
  ~PeriodicHandle() = default;

  /// Ends the schedule: no run starts after this call; a run in progress
  /// finishes (its token is cancelled), and the schedule ends when it
  /// returns (at once if none runs); the pending timer is removed at once.
  /// True if this call ended it, false if it had already ended or was being
  /// ended. Never blocks (token callbacks run on this thread). \throws
  /// std::logic_error if empty.
  bool cancel() { return control().cancel(); }

  /// True once the schedule has ended and no run of it is in progress.
  /// Never blocks. \throws std::logic_error if empty.
  [[nodiscard]] bool isDone() const { return done_.isDone(); }

  /// Blocks until the schedule has ended. \throws std::logic_error if empty,
  /// or if called from a thread of the schedule's pool (its next run could
  /// need that thread: `co_await` the handle instead).
  void wait() const { done_.wait(); }
  /// Blocks until the schedule has ended or `timeout` passes; true if it
  /// ended. \throws std::logic_error if empty.
  template <class Rep, class Period>
  bool waitFor(std::chrono::duration<Rep, Period> timeout) const {
    return done_.waitFor(timeout);
  }
  /// wait(), then returns if the schedule was cancelled, or throws how it
  /// ended otherwise (see the class comment). Takes the end once. \throws
  /// std::logic_error if empty, already taken, or from a pool thread as
  /// wait().
  void get() { done_.get(); }

  /// Suspends the awaiting coroutine until the schedule ends, then returns
  /// or throws as get(). Resumes on the executor the coroutine ran on. Await
  /// a named handle (`co_await handle;`), on every compiler: there is no
  /// rvalue overload (a schedule that runs until cancelled is not awaited
  /// where it is made).
  auto operator co_await() & { return done_.operator co_await(); }

  /// Runs started so far (a run counts when it starts). Never blocks.
  /// \throws std::logic_error if empty.
  [[nodiscard]] std::uint64_t runCount() const { return control().runCount(); }

  /// The time left until the next run is due, on the pool's clock; zero
  /// while a run is due or running and once the schedule has ended. Never
  /// blocks. \throws std::logic_error if empty.
  [[nodiscard]] Clock::duration delay() const {
    const Clock::time_point next = control().nextRun();
    if (next == Clock::time_point::min()) return Clock::duration::zero();
    const Clock::duration left = next - control().clock().now();
    return left > Clock::duration::zero() ? left : Clock::duration::zero();
  }

  /// False for a default-constructed or moved-from handle.
  [[nodiscard]] bool valid() const noexcept { return static_cast<bool>(control_); }

 private:
  friend class ThreadPoolExecutor;
  PeriodicHandle(detail::Ref<detail::PeriodicControl> control, Future<void>&& done) noexcept
      : control_(std::move(control)), done_(std::move(done)) {}

  detail::PeriodicControl& control() const {
    if (!control_) throw std::logic_error("coexec::PeriodicHandle: this handle is empty (default-constructed or moved from)");
    return *control_;
  }

  detail::Ref<detail::PeriodicControl> control_;
  Future<void> done_;
};

}  // namespace coexec
