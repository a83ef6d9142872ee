#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

#include "coexec/CancellationToken.h"
#include "coexec/Export.h"
#include "coexec/detail/FrameAllocator.h"
#include "coexec/detail/Ref.h"

namespace coexec::detail {

/// How a task that a pool thread ran ended, for the pool's counters.
enum class Outcome : std::uint8_t { completed, failed, cancelled };

struct RunResult {
  Outcome outcome = Outcome::completed;
  std::exception_ptr error;  ///< what the callable threw; null on success
};

/// True if `error` holds an OperationCancelled (or a type derived from it).
COEXEC_EXPORT bool isOperationCancelled(const std::exception_ptr& error) noexcept;

class TaskCore;

/// Told when a coroutine task started on a pool thread finishes (possibly on
/// another thread, possibly inside the start call), and when it creates its
/// token on demand.
class CoroutineObserver {
 public:
  virtual void coroutineFinished(TaskCore& task, const RunResult& result) noexcept = 0;
  /// The running coroutine of `task` has just created the task's token
  /// (TaskCore::createToken()), on the coroutine's thread: a pool tracks the
  /// task from now on, as it tracks tasks whose callable takes a token, so
  /// that shutdownNow() cancels it. Called before the coroutine gets the
  /// token; if it throws, it is called again on the next demand.
  /// \throws std::bad_alloc if the task cannot be recorded.
  virtual void coroutineTokenCreated(TaskCore& task) = 0;

 protected:
  ~CoroutineObserver() = default;
};

/// Told when a task that waits for its deadline (a pool's scheduled task) is
/// cancelled through its Future, so that its timer goes at once.
class QueuedCancelListener : public RefCounted {
 public:
  /// Called once, on the cancelling thread, after the task has settled as
  /// cancelled, outside any lock of the task's. Never throws.
  virtual void queuedTaskCancelled() noexcept = 0;
};

/// The state shared by a PendingTask (the runnable side), its Future (the
/// result side) and the pool. One allocation holds the callable, the result
/// and the synchronisation.
///
/// Stages: queued -> running -> done, or queued -> settling -> done
/// (cancelled, abandoned, rejected). The stage and the flags live in one
/// atomic word, so that starting, finishing, awaiting and taking the result
/// take no lock. Threads that block in wait() use one of a few process-wide
/// mutex/condition-variable pairs chosen by the task's address (a task with
/// no blocked waiter never touches one, and owns none).
class COEXEC_EXPORT TaskCore : public RefCounted, public Recycled {
 public:
  using Clock = std::chrono::steady_clock;
  /// Called once, outside any lock, on the thread that completes the task.
  using Continuation = void (*)(void* arg) noexcept;

  TaskCore(bool hasFuture, bool wantsToken, int priority);

  // ---- runnable side (the pool, PendingTask) --------------------------------
  //
  // The functions that settle a task (run, failRunning, abandon,
  // requestCancel, and a coroutine task's completion) must be called by a
  // thread that holds a reference to it: waiters and the continuation may
  // drop theirs as soon as it is done.

  /// queued -> running. False if the task has already settled (cancelled or
  /// abandoned): it must then not run.
  bool tryStart() noexcept;
  /// Runs the callable; precondition: tryStart() returned true and
  /// isCoroutine() is false. Publishes the result (or the exception) and
  /// returns the outcome. Never throws.
  RunResult run() noexcept;
  /// True for a task whose body is a coroutine (it may finish after the call
  /// that starts it returns).
  [[nodiscard]] virtual bool isCoroutine() const noexcept { return false; }
  /// Starts a coroutine task; precondition: tryStart() returned true, and the
  /// caller hands over one reference it holds (call it through
  /// Ref::detach()): the task keeps it until the coroutine has finished. The
  /// task publishes its result when the coroutine finishes and then tells
  /// `observer` (if any). Returns when the coroutine first suspends or
  /// finishes. Never throws.
  virtual void startCoroutine(CoroutineObserver* /*observer*/) noexcept {}
  /// running -> done with `error` without running the callable (a throwing
  /// beforeExecute hook).
  void failRunning(std::exception_ptr error) noexcept;
  /// queued -> done with `reason` (BrokenPromise, RejectedExecution). Does
  /// nothing if the task already started or settled.
  void abandon(std::exception_ptr reason) noexcept;
  /// Cancels: a queued task settles at once with OperationCancelled; a running
  /// one has its token cancelled and settles when its callable returns.
  /// Returns false if the task was already done. Runs token callbacks on the
  /// calling thread, outside the lock.
  bool requestCancel() noexcept;

  /// Cancels the task's token only (shutdownNow() on a running task), if it
  /// has one: the Future reports whatever the task then does. Runs token
  /// callbacks on the calling thread.
  void requestTokenCancellation() noexcept {
    // seq_cst: see createToken().
    if (tokenStage_.load(std::memory_order_seq_cst) == kTokenReady) source_->requestCancellation();
  }

  [[nodiscard]] bool hasFuture() const noexcept { return hasFuture_; }
  /// True if the task has a token: its callable takes a CancellationToken, or
  /// its coroutine created one (createToken()).
  [[nodiscard]] bool hasToken() const noexcept { return tokenStage_.load(std::memory_order_acquire) == kTokenReady; }
  [[nodiscard]] int priority() const noexcept { return priority_; }
  /// Why the pool is handing this task to its rejection policy; set by the
  /// pool before it calls the policy. Points to a string literal.
  const char* rejectReason = nullptr;
  /// The pool that admitted the task (an identity, see currentPoolIdentity());
  /// written before the task is published to any other thread.
  const void* owner = nullptr;
  /// Which of its pool's in-flight counters a started coroutine task counts
  /// in; written by the worker that starts it.
  std::uint32_t inFlightShard = 0;
  /// False for a run of a periodic schedule, which the pool counts once per
  /// schedule, not per run; written before the task is published.
  bool countsInStats = true;
  /// Told by requestCancel() when it cancels the task while queued; set
  /// before the task is published to another thread, then never changed.
  Ref<QueuedCancelListener> cancelListener;

  // ---- result side (Future) -------------------------------------------------

  void wait();
  /// False if the deadline passed first.
  bool waitUntil(Clock::time_point deadline);
  [[nodiscard]] bool isDone() const noexcept { return stageOf(state_.load(std::memory_order_acquire)) == kDone; }
  [[nodiscard]] bool isCancelled() const noexcept { return (state_.load(std::memory_order_acquire) & kCancelled) != 0; }
  /// Marks the result consumed and returns the stored error (null for a value).
  /// Precondition: done. \throws std::logic_error on a second consumption.
  std::exception_ptr consume();
  /// Registers `fn(arg)` to run when the task is done. Returns false (and
  /// registers nothing) if it is already done. At most one continuation.
  bool setContinuation(Continuation fn, void* arg);

 protected:
  /// Runs the callable and stores its value. Throws what the callable throws.
  virtual void invoke() = 0;
  /// Drops a stored value (the task was cancelled while running).
  virtual void discardValue() noexcept = 0;
  /// The task's token; a token that is never cancelled if it has none.
  [[nodiscard]] CancellationToken token() const noexcept;
  /// Gives a running task a token if it has none yet, for a coroutine that
  /// asks for it (a task allocates its CancellationSource only when its
  /// callable takes a token or something in its coroutine needs one). Returns
  /// true if this call created it. A cancellation requested before (the
  /// Future's cancel() while the task ran) cancels the new token at once.
  /// Called by the coroutine's thread; concurrent callers wait for the first.
  /// \throws std::bad_alloc.
  bool createToken();
  /// Publishes the end of a started task: `error` is what its body threw (null
  /// on success). Returns the outcome for the pool's counters.
  RunResult finish(std::exception_ptr error) noexcept;

 private:
  // state_: the stage in the low two bits, then flags. queued -> running
  // (tryStart), running -> done (finish, failRunning), queued -> settling ->
  // done (abandon, requestCancel). Only the thread that moved the task out of
  // `queued` writes error_, before it publishes `done` (release).
  static constexpr std::uint32_t kQueued = 0;
  static constexpr std::uint32_t kRunning = 1;
  static constexpr std::uint32_t kSettling = 2;
  static constexpr std::uint32_t kDone = 3;
  static constexpr std::uint32_t kStageMask = 3;
  static constexpr std::uint32_t kCancelled = 4;     // cancellation requested (or settled as cancelled)
  static constexpr std::uint32_t kContinuation = 8;  // continuation_ is set: the settler calls it
  static constexpr std::uint32_t kWaiters = 16;      // a thread may block in wait(): the settler notifies
  static constexpr std::uint32_t kConsumed = 32;     // the result was taken
  static constexpr std::uint32_t stageOf(std::uint32_t state) noexcept { return state & kStageMask; }

  /// Moves queued -> settling; false if the task is past `queued`. On true the
  /// caller owns error_ and must call publish().
  bool claimQueued(std::uint32_t extraFlags) noexcept;
  /// running or settling -> done, with error_ already written; calls the
  /// continuation and wakes blocked waiters.
  void publish(std::uint32_t previous) noexcept;
  /// Blocks until done or `deadline` (none if null).
  bool blockUntilDone(const Clock::time_point* deadline);

  std::atomic<std::uint32_t> state_{kQueued};
  std::exception_ptr error_;             // written by the settler before `done`, read after it
  Continuation continuation_ = nullptr;  // written before kContinuation is set, read by the settler
  void* continuationArg_ = nullptr;      // ditto
  // The token: tokenStage_ says whether source_ is constructed. kTokenReady
  // from the constructor for a callable taking a token; otherwise
  // kNoToken until createToken() moves it to kTokenCreating (the one thread
  // that constructs source_), then to kTokenReady. Nobody else touches
  // source_ before seeing kTokenReady; then it is const until destruction.
  static constexpr std::uint8_t kNoToken = 0;
  static constexpr std::uint8_t kTokenCreating = 1;
  static constexpr std::uint8_t kTokenReady = 2;
  std::optional<CancellationSource> source_;
  const bool hasFuture_;
  std::atomic<std::uint8_t> tokenStage_;
  const int priority_;
};

/// Storage for a task's value: an object, a reference, or nothing.
template <class R>
struct ValueSlot {
  template <class F, class... A>
  void emplaceFrom(F& f, A&&... args) {
    value.emplace(std::invoke(f, std::forward<A>(args)...));
  }
  R take() { return std::move(*value); }
  void reset() noexcept { value.reset(); }
  std::optional<R> value;
};

template <class R>
struct ValueSlot<R&> {
  template <class F, class... A>
  void emplaceFrom(F& f, A&&... args) {
    value = &std::invoke(f, std::forward<A>(args)...);
  }
  R& take() { return *value; }
  void reset() noexcept { value = nullptr; }
  R* value = nullptr;
};

template <>
struct ValueSlot<void> {
  template <class F, class... A>
  void emplaceFrom(F& f, A&&... args) {
    std::invoke(f, std::forward<A>(args)...);
  }
  void take() {}
  void reset() noexcept {}
};

/// A TaskCore with a typed result.
template <class R>
class ResultCore : public TaskCore {
 public:
  using TaskCore::TaskCore;
  /// Precondition: done. Returns the value or rethrows the task's exception.
  /// \throws std::logic_error on a second consumption.
  R takeResult() {
    if (std::exception_ptr error = consume()) std::rethrow_exception(error);
    return slot_.take();
  }

 protected:
  void discardValue() noexcept override { slot_.reset(); }
  ValueSlot<R> slot_;
};

template <class T>
struct IsStdFunction : std::false_type {};
template <class S>
struct IsStdFunction<std::function<S>> : std::true_type {};

/// True for a null function pointer or an empty std::function; other callables
/// cannot be empty.
template <class F>
bool isEmptyCallable(const F& f) noexcept {
  if constexpr (std::is_pointer_v<F> || std::is_member_pointer_v<F> || IsStdFunction<F>::value) {
    return !f;
  } else {
    return false;
  }
}

template <class F>
inline constexpr bool kTakesToken = std::is_invocable_v<F&, CancellationToken>;

template <class F>
using CallableResult = typename std::conditional_t<kTakesToken<F>, std::invoke_result<F&, CancellationToken>,
                                                   std::invoke_result<F&>>::type;

/// A callable and its result in one allocation.
template <class R, class F>
class CallableTask final : public ResultCore<R> {
 public:
  CallableTask(F&& fn, bool hasFuture, int priority)
      : ResultCore<R>(hasFuture, kTakesToken<F>, priority), fn_(std::in_place, std::move(fn)) {}

 private:
  void invoke() override {
    // The callable (and so its captures) is destroyed as soon as it has run.
    struct DropCallable {
      std::optional<F>& fn;
      ~DropCallable() { fn.reset(); }
    } drop{fn_};
    if constexpr (kTakesToken<F>) {
      this->slot_.emplaceFrom(*fn_, this->token());
    } else {
      this->slot_.emplaceFrom(*fn_);
    }
  }
  std::optional<F> fn_;
};

}  // namespace coexec::detail
