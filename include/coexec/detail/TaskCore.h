// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <new>
#include <string_view>
#include <type_traits>
#include <utility>

#include "coexec/CancellationToken.h"
#include "coexec/Clock.h"
#include "coexec/Export.h"
#include "coexec/detail/FrameAllocator.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/StandardLibrary.h"
#include "coexec/detail/TaskNames.h"

namespace coexec::detail {

/// How a task's run ended, for its executor's counters.
enum class Outcome : std::uint8_t { completed, failed, cancelled };

struct RunResult {
  Outcome outcome = Outcome::completed;
  std::exception_ptr error;  ///< what the callable threw; null on success
};

/// True if `error` holds an OperationCancelled (or a type derived from it).
COEXEC_EXPORT bool isOperationCancelled(const std::exception_ptr& error) noexcept;

class TaskCore;

/// Told when a coroutine task that an executor started ends (possibly on
/// another thread, possibly inside the start call), and when it creates its
/// token on demand.
class CoroutineObserver {
 public:
  /// The coroutine of `task` has ended: `error` is what its body threw (null
  /// on success); its result is not published yet. Called once, on the
  /// thread that finished it. The observer publishes the result itself, once
  /// (task.settleCoroutine(std::move(error))), after what whoever sees the
  /// Future settle must see (an executor counts the task there), and then
  /// drops the reference that `task` comes with (see startCoroutine()):
  /// what must come after the task's state is released (an executor that
  /// waits for the task lets go of it) comes after that drop. Never throws.
  virtual void coroutineEnded(TaskCore& task, std::exception_ptr error) noexcept = 0;
  /// The running coroutine of `task` has just created the task's token
  /// (TaskCore::createToken()), on the coroutine's thread: an executor tracks the
  /// task from now on, as it tracks tasks whose callable takes a token, so
  /// that shutdownNow() cancels it. Called before the coroutine gets the
  /// token; if it throws, it is called again on the next demand.
  /// \throws std::bad_alloc if the task cannot be recorded.
  virtual void coroutineTokenCreated(TaskCore& task) = 0;

 protected:
  ~CoroutineObserver() = default;
};

/// Told when a task that waits for its deadline (a scheduled task) is
/// cancelled through its Future, so that its timer goes at once.
class QueuedCancelListener : public RefCounted {
 public:
  /// Called once, on the cancelling thread, after the task has settled as
  /// cancelled, outside any lock of the task's. Never throws.
  virtual void queuedTaskCancelled() noexcept = 0;
};

class TokenLink;
class BindingNode;
/// Drops one reference to a TaskLocal binding list (detail/Bindings.h).
COEXEC_EXPORT void releaseBindings(BindingNode* bindings) noexcept;

/// Tells whoever cares about a task's failure that nobody read it (the pool
/// that ran the task: its uncaught-exception handler). Owned by the task it
/// is armed on (TaskCore::armUnobservedReport()), destroyed with it.
class UnobservedFailureReport {
 public:
  virtual ~UnobservedFailureReport() = default;
  /// Called at most once, from the destructor of the task, on the thread
  /// that drops its last reference, outside any lock of the task's. Must not
  /// throw.
  virtual void report(const std::exception_ptr& error) noexcept = 0;
};

/// The state shared by a PendingTask (the runnable side), its Future (the
/// result side) and the executor that runs it. One allocation holds the callable, the result
/// and the synchronisation.
///
/// Stages: queued -> running -> done, or queued -> settling -> done
/// (cancelled, abandoned, rejected). The stage and the flags live in one
/// atomic word, so that starting, finishing, awaiting and taking the result
/// take no lock. Threads that block in wait() use one of a few process-wide
/// mutex/condition-variable pairs chosen by the task's address (a task with
/// no blocked waiter never touches one, and owns none).
///
/// Cancellation links (docs/cancellation.md): a task may be linked to a
/// parent task (adoptChild(), for work submitted while the parent runs) and
/// to an outside token (linkToken()). Cancelling a task (requestCancel(), or
/// requestTokenCancellation()) cancels every task linked to it as a child,
/// depth first, on the cancelling thread; a child's cancellation never
/// reaches its parent. A parent keeps its children in an intrusive list
/// (children_, nextSibling_), each holding a reference, until it settles;
/// its own thread prunes the settled ones as it adds more, so the list stays
/// within about twice the children alive plus a constant. A task releases
/// its links when it settles.
class COEXEC_EXPORT TaskCore : public RefCounted, public Recycled {
 public:
  using Clock = std::chrono::steady_clock;
  /// Called once, outside any lock, on the thread that completes the task.
  using Continuation = void (*)(void* arg) noexcept;
  /// The continuation a settlement handed back to its caller instead of
  /// calling it (settleRun(), settleCoroutine()): the caller runs it once
  /// (operator()), on the same thread, after its own accounting of the task
  /// and while it still holds its reference to the task. Empty (a no-op) if
  /// nothing awaited the task.
  struct Deferred {
    Continuation fn = nullptr;
    void* arg = nullptr;
    void operator()() const noexcept {
      if (fn != nullptr) fn(arg);
    }
  };

  TaskCore(bool hasFuture, bool wantsToken, int priority);

  // ---- runnable side (the executor, PendingTask) -----------------------------
  //
  // The functions that settle a task (run, failRunning, abandon,
  // requestCancel, and a coroutine task's completion) must be called by a
  // thread that holds a reference to it: waiters and the continuation may
  // drop theirs as soon as it is done.

  /// queued -> running. False if the task has already settled (cancelled or
  /// abandoned), or was started by a join (tryStartJoined()): it must then
  /// not run.
  bool tryStart() noexcept;
  /// queued -> running for a join that runs the task where it is awaited
  /// (ThreadPoolExecutor's inline join, ForkJoinPool's lesson): false if the
  /// task has started or settled. The task stays where it was queued, as an
  /// entry whoever takes it drops (startedByJoin()). For a task with a Future
  /// (the joiner holds it).
  bool tryStartJoined() noexcept;
  /// True for a task that a join started (tryStartJoined()): a queue entry
  /// of it is dropped, neither run nor counted. For whoever holds the entry.
  [[nodiscard]] bool startedByJoin() const noexcept { return (state_.load(std::memory_order_acquire) & kJoined) != 0; }
  /// For a drain that takes a task out of its queue entry to return or evict
  /// it (shutdownNow(), discardOldest()): makes every later tryStartJoined()
  /// fail, so that the task a drain counts is never also run by a join.
  /// False, changing nothing, if a join started it already (the entry is
  /// then dropped, not drained). Never blocks.
  bool closeToJoins() noexcept;
  /// Told how a task's body ended before its result is published, on the
  /// thread that ends it (see settleRun()). Must not throw.
  using BeforeSettle = void (*)(void* arg, Outcome outcome) noexcept;
  /// Runs the callable's body; precondition: tryStart() returned true and
  /// isCoroutine() is false. Closes the run's segment (runTiming) when the
  /// body returns or throws, and returns what it threw (null: it returned).
  /// Publishes nothing: settleRun() follows. Whoever calls it makes the task
  /// the thread's current task around it (the runtime's runAsCurrent()).
  /// Never throws.
  [[nodiscard]] std::exception_ptr runBody() noexcept;
  /// Ends a run that runBody() began: calls `beforeSettle(arg, outcome)` (if
  /// given), then publishes the result (or `error`): whoever sees the Future
  /// settle sees what beforeSettle did (an executor's counters). The
  /// continuation, if one is registered, goes to `*deferred` for the caller to
  /// run (if given), else runs here. Returns the outcome. Never throws.
  RunResult settleRun(std::exception_ptr error, BeforeSettle beforeSettle = nullptr, void* arg = nullptr,
                      Deferred* deferred = nullptr) noexcept;
  /// The outcome a body that threw `error` (null: returned) ended with:
  /// cancelled for an OperationCancelled, failed for anything else.
  [[nodiscard]] static Outcome outcomeOf(const std::exception_ptr& error) noexcept {
    return !error ? Outcome::completed : outcomeOfError(error);
  }
  /// True for a task whose body is a coroutine (it may finish after the call
  /// that starts it returns).
  [[nodiscard]] virtual bool isCoroutine() const noexcept { return false; }
  /// Starts a coroutine task; precondition: tryStart() returned true, and the
  /// caller hands over one reference it holds (call it through
  /// Ref::detach()): the task keeps it until the coroutine has finished. The
  /// coroutine's end goes to `observer` (if any) with that reference: the
  /// observer publishes the result (settleCoroutine()) and drops it; without
  /// an observer the task does both itself. Returns when the coroutine first
  /// suspends or finishes. Never throws.
  virtual void startCoroutine(CoroutineObserver* /*observer*/) noexcept {}
  /// Publishes the end of a started coroutine task: `error` is what its body
  /// threw (null on success). Called once, by the task's CoroutineObserver
  /// (coroutineEnded()). The continuation, if one is registered, goes to
  /// `*deferred` for the caller to run (if given), else runs here. Returns
  /// the outcome for the executor's counters. Never throws.
  RunResult settleCoroutine(std::exception_ptr error, Deferred* deferred = nullptr) noexcept {
    return finish(std::move(error), deferred);
  }
  /// running -> done with `error` without running the callable (a throwing
  /// beforeExecute hook).
  void failRunning(std::exception_ptr error) noexcept;
  /// queued -> done with `reason` (BrokenPromise, RejectedExecution). Does
  /// nothing if the task already started or settled.
  void abandon(std::exception_ptr reason) noexcept;
  /// Cancels: a queued task settles at once with OperationCancelled; a running
  /// one has its token cancelled and settles when its callable returns.
  /// Either way every task linked to it as a child (and theirs) is cancelled
  /// the same way, on this thread. Returns false if the task was already
  /// done. Runs token callbacks on the calling thread, outside any lock.
  bool requestCancel() noexcept { return cancel(/*waitWhileSettling=*/true); }
  /// requestCancel() for a cancellation that arrives through a link (a
  /// token's callback, a parent): does not wait for a task that another
  /// thread is settling at this moment (that thread may be waiting for the
  /// very callback that calls this, to release the link).
  bool cancelFromLink() noexcept { return cancel(/*waitWhileSettling=*/false); }

  /// Cancels the task's token, if it has one (shutdownNow() on a running
  /// task: the Future reports whatever the task then does), and cancels its
  /// children as requestCancel() does; children it adds later start
  /// cancelled. Runs token callbacks on the calling thread.
  void requestTokenCancellation() noexcept;

  // ---- links ------------------------------------------------------------------

  /// Links `child` (a new task, not yet handed to any other thread) to this
  /// task: cancelling this task cancels `child` until either settles. Called
  /// by the thread that runs this task, while its body runs (the children
  /// list has a single writer). Returns false, linking nothing, if this
  /// task's children were cancelled already: the caller cancels `child`. A
  /// task that has settled links nothing (and returns true). Never blocks.
  bool adoptChild(TaskCore& child) noexcept;
  /// True while this task is linked as a child of `parent` (adoptChild), that
  /// is, while `parent` would cancel it. For `parent`'s own thread.
  [[nodiscard]] bool isChildOf(const TaskCore* parent) const noexcept {
    return parent != nullptr && parent_.load(std::memory_order_relaxed) == parent;
  }
  /// Links this task (new, not yet handed to any other thread) to `token`:
  /// cancelling the token cancels the task as requestCancel() does, until the
  /// task settles. Costs nothing for a token that cannot be cancelled.
  /// Returns false if the token is cancelled already (or becomes so while
  /// linking): the task is then settled as cancelled, or must be.
  /// \throws std::bad_alloc.
  bool linkToken(const CancellationToken& token);
  /// False for a task nothing can ever cancel (no Future, no token, no link,
  /// not a coroutine, which may make a token): linking children to it would
  /// be wasted work.
  [[nodiscard]] bool cancellable() const noexcept { return hasFuture_ || linked_ || hasToken() || isCoroutine(); }

  [[nodiscard]] bool hasFuture() const noexcept { return hasFuture_; }
  /// True if the task has a token: its callable takes a CancellationToken, or
  /// its coroutine created one (createToken()).
  [[nodiscard]] bool hasToken() const noexcept { return tokenStage_.load(std::memory_order_acquire) == kTokenReady; }
  [[nodiscard]] int priority() const noexcept { return priority_; }
  /// The task's name (TaskOptions::name); empty if unnamed. Never throws.
  [[nodiscard]] std::string_view name() const noexcept {
    return nameId_ == 0 ? std::string_view() : taskNameAt(nameId_);
  }
  /// The name's index in the table of task names (0: unnamed).
  [[nodiscard]] std::uint32_t nameId() const noexcept { return nameId_; }
  /// Names the task (an index from internTaskName()); before it is
  /// published to another thread.
  void setNameId(std::uint32_t id) noexcept { nameId_ = id; }
  /// True for a task its executor may run where it is awaited, on the
  /// awaiting thread, if nothing has started it yet (fork/join work: see
  /// joinInline() and tryStartJoined()).
  [[nodiscard]] bool joinable() const noexcept { return joinable_; }
  /// By the executor, before it publishes the task to another thread.
  void markJoinable() noexcept { joinable_ = true; }
  // (Fields are laid out in declaration order across the access sections:
  // first, beside the reference count, what every start, finish and child
  // touches (the stage word, the children list, the result); then the rest.)
 private:
  bool joinable_ = false;

 public:
  /// Storage that the executor which admitted the task keeps its own
  /// per-task state in (its extension of the task, which the task core does
  /// not name): these two bytes, beside the stage word, for what it reads on
  /// every start and finish, and the word `ownerWord`. Zero when the task is
  /// made; the task core never reads or writes them again; the executor's
  /// own rules say who writes them when.
  std::uint8_t ownerBytes[2] = {};

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
  /// registers nothing) if it is already done. At most one continuation:
  /// \throws std::logic_error (throwSecondAwait()) if one is registered
  /// already, before touching anything.
  bool setContinuation(Continuation fn, void* arg);
  /// True once a continuation is registered (an awaiter watches the task).
  [[nodiscard]] bool hasContinuation() const noexcept {
    return (state_.load(std::memory_order_acquire) & kContinuation) != 0;
  }
  /// Throws the error of a second awaiter of one task. \throws std::logic_error.
  [[noreturn]] static void throwSecondAwait(const char* operation);
  /// True once the result has been consumed (consume(): get(), co_await, a
  /// combinator taking it).
  [[nodiscard]] bool isConsumed() const noexcept { return consumed_.load(std::memory_order_acquire); }

  /// True if the task has settled with an exception its body threw, other
  /// than OperationCancelled, and was not cancelled: what an executor
  /// counts as failed. For the thread that ran it.
  [[nodiscard]] bool failedOnItsOwn() const noexcept;
  /// Arms the report of a failure nobody reads: when the task is destroyed
  /// (its last reference dropped, on that thread) and its result was never
  /// consumed, `report->report(error)` runs once, unless the task was
  /// cancelled. Takes ownership of `report`. Precondition: the task has
  /// settled with an error of its own (its body, or a hook before it,
  /// threw), the caller holds a reference, and nothing was armed before.
  /// Called only on a failure: a task that succeeds pays nothing.
  /// Kept aside (a small process-wide table, striped by address): a task
  /// carries no field for it, only a flag in its state word.
  void armUnobservedReport(UnobservedFailureReport* report) noexcept;

 protected:
  /// Runs the callable and stores its value. Throws what the callable throws.
  virtual void invoke() = 0;
  /// Drops a stored value (the task was cancelled while running).
  virtual void discardValue() noexcept = 0;
  /// For a task that never runs and settles with another task's result (a
  /// lane's LaneResult): queued -> done, with `fill()` storing the value and
  /// returning the error (null for a value) while the task is claimed, so
  /// that no cancel comes between: a concurrent cancel() waits and finds it
  /// done. False, without calling `fill`, if it has settled already
  /// (cancelled). `fill` must not throw.
  template <class Fill>
  bool settleFromQueued(Fill&& fill) noexcept {
    if (!claimQueued(0)) return false;
    error_ = fill();
    publish(state_.fetch_or(kDone, std::memory_order_acq_rel));
    releaseLinks(false);
    return true;
  }
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
  /// on success); the continuation as publish() says. Returns the outcome for
  /// the executor's counters.
  RunResult finish(std::exception_ptr error, Deferred* deferred = nullptr) noexcept;
  /// Releases the links a task still holds when it is destroyed without
  /// having settled (a task that was never admitted).
  ~TaskCore() override;

 private:
  // What cancelOne() did: nothing (done), settled a queued task, or marked a
  // running one cancelled (runningAgain: it was already).
  enum class CancelOutcome : std::uint8_t { done, settled, running, runningAgain };
  /// outcomeOf() for a non-null `error`.
  [[nodiscard]] static Outcome outcomeOfError(const std::exception_ptr& error) noexcept;
  /// requestCancel() and cancelFromLink(): cancelOne(), then the token and
  /// the children of a running task (cancelRunning()).
  bool cancel(bool waitWhileSettling) noexcept;
  /// Cancels this task alone: settles it if queued (its token included),
  /// marks it cancelled if running (the caller cancels its token).
  CancelOutcome cancelOne(bool waitWhileSettling) noexcept;
  /// For a running task: takes its children (closing the list as
  /// cancelled), then cancels its token (if asked), then the children.
  void cancelRunning(bool cancelTokenToo) noexcept;
  /// Cancels the token only, if there is one.
  void cancelToken() noexcept {
    // seq_cst: see createToken().
    if (tokenStage_.load(std::memory_order_seq_cst) == kTokenReady) source().requestCancellation();
  }
  /// Closes the children list with `closed` (kClosedCancelled or
  /// kClosedSettled) and returns what it held (each with the list's
  /// reference, linked through nextSibling_), or null if it was closed
  /// already. Waits while the owner prunes it (a few instructions per child).
  TaskCore* detachChildren(std::uintptr_t closed) noexcept;
  /// Cancels every task of a detached list and their children, depth first,
  /// and drops the list's references. Iterative: the stack does not grow
  /// with the depth of the tree.
  static void cancelTree(TaskCore* list) noexcept;
  /// Drops the references of a detached list (the task settled normally).
  static void dropChildren(TaskCore* list) noexcept;
  /// The owner's pruning of settled children (see adoptChild()).
  void pruneChildren() noexcept;
  /// At settlement: closes the children list, cancelling the children if the
  /// task ended cancelled, and releases the token link. On the settling thread.
  void releaseLinks(bool cancelled) noexcept {
    // Inline: nearly every task has neither (relaxed: the children list has
    // one writer, this thread; a token link is released by its settler).
    if ((children_.load(std::memory_order_relaxed) |
         reinterpret_cast<std::uintptr_t>(tokenLink_.load(std::memory_order_relaxed))) != 0) {
      releaseLinksSlow(cancelled);
    }
  }
  void releaseLinksSlow(bool cancelled) noexcept;
  [[nodiscard]] CancellationSource& source() noexcept {
    return *std::launder(reinterpret_cast<CancellationSource*>(&sourceStorage_));
  }
  [[nodiscard]] const CancellationSource& source() const noexcept {
    return *std::launder(reinterpret_cast<const CancellationSource*>(&sourceStorage_));
  }
  // state_: the stage in the low two bits, then flags. queued -> running
  // (tryStart), running -> done (finish, failRunning), queued -> settling ->
  // done (abandon, requestCancel). Only the thread that moved the task out of
  // `queued` writes error_, before it publishes `done` (release).
  static constexpr std::uint32_t kQueued = 0;
  static constexpr std::uint32_t kRunning = 1;
  static constexpr std::uint32_t kSettling = 2;
  static constexpr std::uint32_t kDone = 3;
  static constexpr std::uint32_t kStageMask = 3;
  static constexpr std::uint32_t kCancelled = 4;         // cancellation requested (or settled as cancelled)
  static constexpr std::uint32_t kContinuation = 8;      // continuation_ is set: the settler calls it
  static constexpr std::uint32_t kWaiters = 16;          // a thread may block in wait(): the settler notifies
  static constexpr std::uint32_t kUnobservedArmed = 64;  // armUnobservedReport(): the destructor looks it up
  static constexpr std::uint32_t kJoined = 128;          // started by a join (tryStartJoined), not from its queue
  static constexpr std::uint32_t kNoJoin = 256;          // taken from its queue by a drain: no join may start it
  static constexpr std::uint32_t stageOf(std::uint32_t state) noexcept { return state & kStageMask; }

  /// Moves queued -> settling; false if the task is past `queued`. On true the
  /// caller owns error_ and must call publish().
  bool claimQueued(std::uint32_t extraFlags) noexcept;
  /// running or settling -> done, with error_ already written; wakes blocked
  /// waiters and calls the continuation, or hands it to `*deferred` (if
  /// given) for the caller to call.
  void publish(std::uint32_t previous, Deferred* deferred = nullptr) noexcept;
  /// Blocks until done or `deadline` (none if null).
  bool blockUntilDone(const Clock::time_point* deadline);

  // The token: tokenStage_ says whether a CancellationSource lives in
  // sourceStorage_. kTokenReady from the constructor for a callable taking
  // a token; otherwise kNoToken until createToken() moves it to
  // kTokenCreating (the one thread that constructs it), then to kTokenReady.
  // Nobody else touches the source before seeing kTokenReady; then it is
  // const until destruction.
  static constexpr std::uint8_t kNoToken = 0;
  static constexpr std::uint8_t kTokenCreating = 1;
  static constexpr std::uint8_t kTokenReady = 2;

  // children_: the head of the children list (a TaskCore*, 0 when empty),
  // or a closed value. Only the task's own thread adds children (a CAS, to
  // meet a concurrent close) and prunes them (holding kChildrenLocked, which
  // a closer waits out); any thread may close it, once, taking the list.
  static constexpr std::uintptr_t kChildrenClosed = 1;
  static constexpr std::uintptr_t kChildrenLocked = 2;
  static constexpr std::uintptr_t kClosedCancelled = kChildrenClosed;    // new children start cancelled
  static constexpr std::uintptr_t kClosedSettled = kChildrenClosed | 4;  // the task settled: new children run free
  static constexpr std::uint16_t kMinChildBudget = 16;

  const bool hasFuture_;
  std::atomic<std::uint8_t> tokenStage_;
  // A parent or a token may cancel this task: its stage changes take the
  // synchronised path even without a Future. Written before the task is
  // published.
  bool linked_ = false;
  // Children to add before the next pruning (at most 65535: see
  // pruneChildren()); the owner's alone.
  std::uint16_t childBudget_ = kMinChildBudget;
  std::atomic<std::uint32_t> state_{kQueued};
  // The result was taken (consume()). Not a flag of state_: its one writer,
  // the Future's consumer, stores it without a read-modify-write; the
  // destructor reads it after the last reference is dropped (ordered by the
  // reference count), armIfUnread() as a hint (relaxed loads).
  std::atomic<bool> consumed_{false};
  // Next to state_: the running task's thread has this memory at hand when
  // it adds a child.
  std::atomic<std::uintptr_t> children_{0};     // see kChildrenClosed
  std::exception_ptr error_;                    // written by the settler before `done`, read after it
  Continuation continuation_ = nullptr;         // written before kContinuation is set, read by the settler
  void* continuationArg_ = nullptr;             // ditto
  std::atomic<TokenLink*> tokenLink_{nullptr};  // linkToken(); taken (exchange) and released by the settler
  // (From here: what a settling thread on another core does not touch, so
  // that the parent's release of a child costs no extra transfer.)
  const int priority_;
  // The task's name (TaskOptions::name) as a TaskNames id; 0: unnamed. Fills
  // the gap before sourceStorage_: naming costs an unnamed task nothing.
  std::uint32_t nameId_ = 0;
  alignas(CancellationSource) unsigned char sourceStorage_[sizeof(CancellationSource)];  // see tokenStage_
  // This task's place in its parent's children list: the next (older)
  // sibling, written by whoever holds the list (the parent's thread while it
  // is open, the closer after), and the parent while it is listed (an
  // identity for isChildOf(), cleared when it leaves the list).
  TaskCore* nextSibling_ = nullptr;
  std::atomic<TaskCore*> parent_{nullptr};

 public:
  /// The executor that admitted the task, as an identity (compared with the
  /// runtime's currentPoolIdentity(); never dereferenced); written before
  /// the task is published to any other thread.
  const void* owner = nullptr;
  /// Told by requestCancel() when it cancels the task while queued; set
  /// before the task is published to another thread, then never changed.
  Ref<QueuedCancelListener> cancelListener;
  /// The TaskLocal bindings the task's code sees (one counted reference, or
  /// null): inherited at admission from the code that submitted it, then
  /// changed only by the task's own code (TaskLocal::Scope). See
  /// detail/Bindings.h.
  BindingNode* bindings = nullptr;
  /// The rest of the executor's per-task storage (see ownerBytes): zero
  /// when the task is made, never read by the task core.
  std::uint64_t ownerWord = 0;
  /// For an executor that times its tasks: how long the task's code has
  /// run, in ticks of `clock` (null: not timed). The thread that takes the
  /// task up sets all three before it runs any of it; from then on only the
  /// thread running the task's code touches them (for a coroutine task, each
  /// segment's thread in turn, handed on with the coroutine: see
  /// detail/RunSegments.h). A callable's run is one segment, closed by runBody().
  struct RunTiming {
    static constexpr std::int64_t kClosed = INT64_MIN;
    const ::coexec::Clock* clock = nullptr;
    std::int64_t segmentStart = kClosed;  // the open segment's start, or kClosed
    std::int64_t total = 0;               // the closed segments' sum
    /// Closes the open segment now. Precondition: clock, and one is open.
    void close() noexcept {
      total += clock->now().time_since_epoch().count() - segmentStart;
      segmentStart = kClosed;
    }
  };
  RunTiming runTiming;
};

}  // namespace coexec::detail
