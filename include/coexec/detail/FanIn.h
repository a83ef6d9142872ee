// SPDX-License-Identifier: BSL-1.0
#pragma once

// The join state of the combinators that wait for a set of children
// (invokeAll, invokeAny, whenAll, whenAny): the awaiter derives from FanIn,
// so the state lives in the awaiting coroutine's frame and costs no
// allocation. See FanIn.cpp for the protocol.

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <type_traits>
#include <variant>

#include "coexec/CancellationToken.h"
#include "coexec/Clock.h"
#include "coexec/Export.h"
#include "coexec/detail/ResumePoint.h"
#include "coexec/detail/RunSegments.h"
#include "coexec/detail/Scheduler.h"
#include "coexec/Task.h"

namespace coexec {
class ThreadPoolExecutor;
}

namespace coexec::detail {

/// A child's value as a combinator keeps it and returns it: std::monostate
/// for void.
template <class R>
using StoredValue = std::conditional_t<std::is_void_v<R>, std::monostate, R>;

/// What a child ended with: a value (std::monostate for void) or an error.
template <class R>
struct ChildResult {
  std::optional<StoredValue<R>> value;
  std::exception_ptr error;

  /// Stores what `get()` returns, or what it throws; true if it threw.
  template <class Get>
  bool store(Get&& get) noexcept {
    try {
      if constexpr (std::is_void_v<R>) {
        get();
        value.emplace();
      } else {
        value.emplace(get());
      }
      return false;
    } catch (...) {
      error = std::current_exception();
      return true;
    }
  }
};

/// Which child's end makes the others be cancelled.
enum class StopRule : std::uint8_t {
  onFailure,     ///< invokeAll, whenAll: the first child that fails
  onSuccess,     ///< invokeAny: the first child that succeeds
  onCompletion,  ///< whenAny: the first child that settles, either way
};

/// Why the children were told to stop. The first reason wins; later ones
/// are ignored.
enum class StopReason : std::uint8_t {
  none,             ///< nothing stopped them: every child ran its course
  childFailed,      ///< stopIndex() failed first (StopRule::onFailure)
  childSucceeded,   ///< stopIndex() succeeded first (StopRule::onSuccess)
  childCompleted,   ///< stopIndex() settled first (StopRule::onCompletion)
  timedOut,         ///< the deadline passed with a child unsettled
  parentCancelled,  ///< the awaiting coroutine's task was cancelled
  refused,          ///< a child could not be started (refusal() says why)
};

/// What beginArming() does when the awaiting task's token is cancelled
/// already.
enum class IfParentCancelled : std::uint8_t {
  /// Arm nothing: beginArming() returns false. For a combinator whose
  /// children have not started (invokeAll, invokeAny start their own).
  startNothing,
  /// Arm as usual, stopped with parentCancelled: the children that run
  /// already (whenAll's and whenAny's Futures) are cancelled and waited for,
  /// the others never start.
  stopChildren,
};

/// The state a combinator's children settle into while the awaiting
/// coroutine is suspended: how many are left, why they were stopped, the
/// timeout, the awaiting coroutine's token, and where to resume it. The
/// derived awaiter owns the children and their results; it arms FanIn in
/// await_suspend (beginArming, reserveChildren, armTimeout, finishArming
/// with the number of reserved children that never started), each started
/// child calls childSettled() once, and the awaiter
/// reads the outcome in await_resume (endWait first).
///
/// Structured: the coroutine is resumed only once every child counted by
/// reserveChildren() and started has settled, the timer can no longer fire and no cancellation
/// callback is cancelling children.
///
/// It is also the TaskContext of the Task children a combinator runs inline
/// (whenAll, whenAny): they run under a token of its own, cancelled with the
/// other children (prepareTaskChildren()).
///
/// Thread safety: arming and await_resume on the awaiting coroutine's
/// thread; childSettled() and the callbacks on any thread.
class COEXEC_EXPORT FanIn : private TaskContext {
 public:
  FanIn(const FanIn&) = delete;
  FanIn& operator=(const FanIn&) = delete;

  /// For the children, on any thread: a child counted by reserveChildren() has
  /// settled, `failed` or not, and its result is stored. Called once per
  /// child; may resume the coroutine (inline when this thread belongs to its
  /// executor), so the caller must touch nothing of the awaiter afterwards.
  void childSettled(bool failed, std::size_t index) noexcept;

 protected:
  explicit FanIn(StopRule rule) noexcept : rule_(rule) {}
  ~FanIn();

  // ---- arming: in await_suspend, on the awaiting coroutine's thread ---------

  /// Records where `awaiting` resumes and its task's token (`parent`: its
  /// TaskContext, or null); `timed`: armTimeout() will be called. If that
  /// token is already cancelled, stopReason() is parentCancelled and, as
  /// `ifCancelled` says, either it returns false (start nothing, do not call
  /// finishArming(), and let await_suspend return false) or it arms as
  /// usual with the stop requested: stopping() is true, and finishArming()
  /// cancels the children counted meanwhile and waits for them.
  /// \throws std::bad_alloc if the task's token cannot be created.
  bool beginArming(std::coroutine_handle<> awaiting, TaskContext* parent, bool timed, IfParentCancelled ifCancelled);
  /// Creates the token the Task children run under (call before starting
  /// the first one). \throws std::bad_alloc.
  void prepareTaskChildren();
  /// The TaskContext for Task children.
  TaskContext* taskChildContext() noexcept { return this; }
  /// Counts the `n` children about to start, before any can settle: one
  /// atomic operation for all (the workers decrement the same counter).
  void reserveChildren(std::size_t n) noexcept {
    // relaxed: the children are published to other threads after this
    // (through a pool's queue, or run on this thread).
    holds_.fetch_add(n, std::memory_order_relaxed);
    if (timed_) children_.fetch_add(n, std::memory_order_relaxed);
  }
  /// True once a stop was requested or the awaiting task's token cancelled:
  /// start no more children.
  [[nodiscard]] bool stopping() const noexcept {
    return stop_.load(std::memory_order_acquire) != StopReason::none || parentToken_.isCancellationRequested();
  }
  /// A child could not be started: `error` will be the result; the others
  /// are stopped.
  void refuse(std::exception_ptr error) noexcept;
  /// Cancels the unsettled children at `deadline` on the clock of `pool`
  /// (its timer service), or at once if the clock has passed it.
  /// \throws std::bad_alloc, std::system_error.
  void armTimeout(ThreadPoolExecutor& pool, Clock::time_point deadline);
  /// Ends arming; `unstarted`: how many reserved children never started
  /// (a stop came first). Returns true if the coroutine stays suspended
  /// (another thread resumes it), false if every child has settled already
  /// (the awaiter goes on at once).
  bool finishArming(std::size_t unstarted) noexcept;

  // ---- the outcome: in await_resume -----------------------------------------

  /// Deregisters from the awaiting task's token; first thing in await_resume.
  void endWait() noexcept { registration_.reset(); }
  [[nodiscard]] StopReason stopReason() const noexcept { return stop_.load(std::memory_order_acquire); }
  /// The child that stopped the others (childFailed, childSucceeded,
  /// childCompleted).
  [[nodiscard]] std::size_t stopIndex() const noexcept { return stopIndex_; }
  /// Why a child could not be started, or null.
  [[nodiscard]] const std::exception_ptr& refusal() const noexcept { return refusal_; }

  /// Cancels every child that may still run. Called at most once, after
  /// arming, with a hold taken (the children and their slots are alive), on
  /// whichever thread stopped the others. Must not throw.
  virtual void cancelChildren() noexcept = 0;
  /// Cancels the token the Task children run under, if any.
  void cancelTaskChildren() noexcept {
    if (childSource_) childSource_->requestCancellation();
  }

 private:
  CancellationToken cancellationToken() override;  // TaskContext, for Task children

  bool stop(StopReason reason, std::size_t index) noexcept;
  bool tryHold() noexcept;
  void release(bool mayResumeInline) noexcept;
  void childrenDone() noexcept;
  void onParentCancelled() noexcept;
  static void onTimer(void* self) noexcept;

  // phase_: kArmed once arming is over (cancelChildren() may run), and
  // kCancelRequested once a stop asked for it; whoever sets the second bit
  // runs cancelChildren().
  static constexpr std::uint8_t kArmed = 1;
  static constexpr std::uint8_t kCancelRequested = 2;

  const StopRule rule_;
  bool timed_ = false;  // written by beginArming, before any child exists
  std::atomic<StopReason> stop_{StopReason::none};
  std::atomic<std::uint8_t> phase_{0};
  std::size_t stopIndex_ = 0;   // written by the stop's winner, read after the resumption
  std::exception_ptr refusal_;  // written while arming
  // Written while arming, read by whoever resumes or removes the timer.
  ResumePoint resumeAt_;
  TimerService* timerService_ = nullptr;
  std::uint32_t timerSlot_ = 0;
  std::uint32_t timerGeneration_ = 0;
  CancellationToken parentToken_;
  std::optional<CancellationSource> childSource_;
  // The counters every child decrements, kept 64 bytes away from the fields
  // above (which the arming thread reads for each child it starts) and from
  // the derived awaiter's (which the children read): no false sharing.
  // holds_: unsettled children, plus one for arming, one for a pending
  // timer, one per cancellation callback at work. The release that brings it
  // to zero resumes the coroutine. children_ (with a timeout only: without,
  // a child settles with one atomic operation): unsettled children plus one
  // for arming; the release that brings it to zero removes the timer.
  [[maybe_unused]] std::byte padBefore_[64];
  std::atomic<std::size_t> holds_{0};
  std::atomic<std::size_t> children_{0};
  [[maybe_unused]] std::byte padAfter_[64 - 2 * sizeof(std::size_t)];
  // Last, so destroyed first: its destructor waits for a callback running
  // on another thread.
  std::optional<CancellationRegistration> registration_;
};

/// The awaiter of a fan-in awaitable (InvokeAwaitable, WhenAwaitable): it
/// refers to the awaitable, which holds the state (a temporary awaitable lives
/// to the end of the full expression). The awaitable provides ready(),
/// start(awaiting, parentContext) and result(), and befriends this class.
template <class Awaitable>
class FanInAwaiter {
 public:
  explicit FanInAwaiter(Awaitable& awaitable) noexcept : awaitable_(&awaitable) {}
  bool await_ready() { return awaitable_->ready(); }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> awaiting) {
    TaskContext* const context = taskContextOf(awaiting);
    task_ = taskOf(context);
    return suspendingSegment(task_, [&] { return awaitable_->start(awaiting, context); });
  }
  typename Awaitable::Result await_resume() {
    setCurrentTask(task_);  // the coroutine goes on: its task's code again (see currentTask())
    segmentGoesOn(task_);   // in a new run segment (RunSegments.h)
    return awaitable_->result();
  }

 private:
  Awaitable* awaitable_;
  TaskCore* task_ = nullptr;  // the awaiting coroutine's task
};

/// Throws TimeoutError for a combinator whose deadline passed. Never returns.
[[noreturn]] COEXEC_EXPORT void throwCombinatorTimeout(const char* operation, Clock::duration timeout);

}  // namespace coexec::detail
