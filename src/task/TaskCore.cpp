// SPDX-License-Identifier: BSL-1.0
// Task state: the stage word, results and blocking waits (see TaskCore.h for
// the stages). The cancellation links are in TaskLinks.cpp.

#include "coexec/detail/TaskCore.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "coexec/Errors.h"
#include "coexec/detail/NoInlineResumption.h"
#include "foundation/NoDestructor.h"
#include "task/TokenLink.h"

namespace coexec::detail {

namespace {

/// Where threads blocked in TaskCore::wait() sleep: blocking waits are rare
/// (coroutines await instead), so a small shared table serves every task
/// and a task carries no mutex or condition variable of its own.
struct alignas(64) WaitStripe {
  std::mutex mutex;
  std::condition_variable done;
};

// The process-wide tables below are never destroyed: a task may settle, be
// waited on or be destroyed on a thread that outlives main()'s static
// destructors (Asio's system_executor threads, a detached thread, a pool the
// program never closes), and a destroyed table would be used after its
// destruction (ThreadSanitizer saw AsyncWaitTest's use_future completion
// destroy a task on Asio's system thread while exit() destroyed the table).
// They live in static storage (NoDestructor), not on the heap: the first
// blocking wait of a process allocates nothing.

WaitStripe& stripeOf(const void* task) noexcept {
  static NoDestructor<std::array<WaitStripe, 64>> stripes;
  const auto bits = reinterpret_cast<std::uintptr_t>(task);
  return stripes.get()[(bits >> 6) % 64];
}

/// The error of every task cancelled before it produced a result: one
/// exception object, shared (an exception_ptr is reference counted and the
/// object is never modified), so that a cancel allocates nothing; a
/// million cancelled Futures would otherwise hold a million copies.
/// The reports armed on failed tasks (armUnobservedReport), by task:
/// failures are rare, so a task keeps no field for its report, and a
/// process-wide table, striped by address like the wait stripes, holds the
/// few armed at a time. An entry is added before the task's flag is set and
/// removed by its destructor.
struct alignas(64) ArmedStripe {
  std::mutex mutex;
  std::vector<std::pair<const TaskCore*, std::unique_ptr<UnobservedFailureReport>>> armed;  // guarded by mutex
};

ArmedStripe& armedStripeOf(const TaskCore* task) noexcept {
  static NoDestructor<std::array<ArmedStripe, 16>> stripes;
  const auto bits = reinterpret_cast<std::uintptr_t>(task);
  return stripes.get()[(bits >> 6) % 16];
}

std::unique_ptr<UnobservedFailureReport> takeArmedReport(const TaskCore* task) noexcept {
  ArmedStripe& stripe = armedStripeOf(task);
  std::lock_guard lock(stripe.mutex);
  for (auto& entry : stripe.armed) {
    if (entry.first != task) continue;
    std::unique_ptr<UnobservedFailureReport> report = std::move(entry.second);
    entry = std::move(stripe.armed.back());
    stripe.armed.pop_back();
    return report;
  }
  return nullptr;
}

const std::exception_ptr& cancelledError() noexcept {
  static const NoDestructor<std::exception_ptr> error(std::make_exception_ptr(OperationCancelled()));
  return error.get();
}

}  // namespace

bool isOperationCancelled(const std::exception_ptr& error) noexcept {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const OperationCancelled&) {
    return true;
  } catch (...) {
    return false;
  }
}

static_assert(alignof(TaskCore) >= 8, "the children list keeps flags in the low bits of a TaskCore*");

TaskCore::TaskCore(bool hasFuture, bool wantsToken, int priority)
    : hasFuture_(hasFuture), tokenStage_(wantsToken ? kTokenReady : kNoToken), priority_(priority) {
  if (wantsToken) new (&sourceStorage_) CancellationSource();
}

TaskCore::~TaskCore() {
  // The last reference is gone: a failure armed for reporting that nobody
  // consumed, and that no cancellation superseded, is reported now (relaxed:
  // the releases of the other references happened before, see
  // RefCounted::release()). Superseded means the Future reports the
  // cancellation (finish() replaced the error): not merely that a cancel
  // arrived. A beforeExecute hook that throws after a cancel reached the
  // started task fails it with the hook's error (failRunning()), which its
  // Future reports, and so must be reported when nobody reads it.
  if (const std::uint32_t s = state_.load(std::memory_order_relaxed); (s & kUnobservedArmed) != 0) {
    const std::unique_ptr<UnobservedFailureReport> report = takeArmedReport(this);
    if (!consumed_.load(std::memory_order_relaxed) && error_ && report && !isOperationCancelled(error_)) {
      report->report(error_);
    }
  }
  // A task that settled has released its links; one destroyed unsettled
  // (never admitted) may still hold its token link, whose callback cannot
  // be running: the callback holds a reference.
  delete tokenLink_.load(std::memory_order_relaxed);
  assert((children_.load(std::memory_order_relaxed) & ~kClosedSettled) == 0 && "a task with children must settle");
  if (tokenStage_.load(std::memory_order_relaxed) == kTokenReady) source().~CancellationSource();
  if (bindings != nullptr) releaseBindings(bindings);
}

CancellationToken TaskCore::token() const noexcept { return hasToken() ? source().token() : CancellationToken(); }

bool TaskCore::createToken() {
  std::uint8_t stage = tokenStage_.load(std::memory_order_acquire);
  while (true) {
    if (stage == kTokenReady) return false;
    if (stage == kTokenCreating) {  // another thread is constructing it: a moment
      std::this_thread::yield();
      stage = tokenStage_.load(std::memory_order_acquire);
      continue;
    }
    if (tokenStage_.compare_exchange_weak(stage, kTokenCreating, std::memory_order_acquire)) break;
  }
  try {
    new (&sourceStorage_) CancellationSource();
  } catch (...) {
    tokenStage_.store(kNoToken, std::memory_order_release);
    throw;
  }
  // A cancel that raced with the creation is not lost. requestCancel() sets
  // kCancelled and then loads tokenStage_; here we store kTokenReady and then
  // load state_. All four are seq_cst, so in their single total order one of
  // the two loads comes after the other side's store: either requestCancel()
  // sees the token and cancels it, or we see kCancelled and cancel it (or
  // both: the second request does nothing).
  tokenStage_.store(kTokenReady, std::memory_order_seq_cst);
  if ((state_.load(std::memory_order_seq_cst) & kCancelled) != 0) source().requestCancellation();
  return true;
}

bool TaskCore::tryStart() noexcept {
  if (!hasFuture_ && !linked_) {
    // No Future, no link: nothing can cancel or wait for this task, and its owner
    // (whoever holds the PendingTask, or the worker that dequeued it) is the
    // only thread that touches its stage.
    if (state_.load(std::memory_order_relaxed) != kQueued) return false;
    state_.store(kRunning, std::memory_order_relaxed);
    return true;
  }
  std::uint32_t s = state_.load(std::memory_order_acquire);
  while (stageOf(s) == kQueued) {
    if (state_.compare_exchange_weak(s, s | kRunning, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return true;
    }
  }
  return false;
}

bool TaskCore::tryStartJoined() noexcept {
  std::uint32_t s = state_.load(std::memory_order_acquire);
  while (stageOf(s) == kQueued && (s & kNoJoin) == 0) {
    if (state_.compare_exchange_weak(s, s | kRunning | kJoined, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return true;
    }
  }
  return false;
}

bool TaskCore::closeToJoins() noexcept {
  if (!joinable_) return true;  // no join ever starts it (and its stage word may have no flags: see tryStart)
  std::uint32_t s = state_.load(std::memory_order_acquire);
  while (stageOf(s) == kQueued && (s & kNoJoin) == 0) {
    if (state_.compare_exchange_weak(s, s | kNoJoin, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
  }
  return (s & kJoined) == 0;
}

Outcome TaskCore::outcomeOfError(const std::exception_ptr& error) noexcept {
  return isOperationCancelled(error) ? Outcome::cancelled : Outcome::failed;
}

std::exception_ptr TaskCore::runBody() noexcept {
  std::exception_ptr error;
  try {
    invoke();
  } catch (...) {
    error = std::current_exception();
  }
  if (runTiming.clock != nullptr) runTiming.close();  // recordLatency: the run ends before the settlement
  return error;
}

RunResult TaskCore::settleRun(std::exception_ptr error, BeforeSettle beforeSettle, void* arg,
                              Deferred* deferred) noexcept {
  if (beforeSettle != nullptr) beforeSettle(arg, outcomeOf(error));
  return finish(std::move(error), deferred);
}

RunResult TaskCore::finish(std::exception_ptr error, Deferred* deferred) noexcept {
  RunResult result;
  result.outcome = outcomeOf(error);
  result.error = std::move(error);
  if (!hasFuture_ && !linked_) {  // nobody to publish to (see tryStart)
    discardValue();
    state_.store(kDone, std::memory_order_relaxed);
    // A fire-and-forget coroutine's children (a callable that has no Future
    // and no link never gets any: see cancellable()).
    if (children_.load(std::memory_order_relaxed) != 0) dropChildren(detachChildren(kClosedSettled));
    return result;
  }
  std::uint32_t s = state_.load(std::memory_order_acquire);
  while (true) {
    if ((s & kCancelled) != 0) {
      // Cancelled while running: the value is dropped and the Future reports
      // the cancellation. The pool counts the task by how it actually ended.
      discardValue();
      error_ = result.outcome == Outcome::cancelled ? result.error : cancelledError();
    } else {
      error_ = result.error;
    }
    // Fails if a cancellation or a continuation arrived meanwhile: look again.
    if (state_.compare_exchange_weak(s, (s & ~kStageMask) | kDone, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      break;
    }
  }
  // Children first: whoever sees the task settled sees its children
  // cancelled if it was (a cancel that came before the CAS above cancels
  // them itself, or leaves them to us).
  if (children_.load(std::memory_order_relaxed) != 0) {
    TaskCore* const children = detachChildren(kClosedSettled);
    if ((s & kCancelled) != 0) {
      cancelTree(children);
    } else {
      dropChildren(children);
    }
  }
  publish(s, deferred);
  // The children are dealt with above: only a token link may be left.
  if (tokenLink_.load(std::memory_order_relaxed) != nullptr) releaseLinksSlow(false);
  return result;
}

void TaskCore::failRunning(std::exception_ptr error) noexcept {
  if (stageOf(state_.load(std::memory_order_acquire)) != kRunning) return;
  error_ = std::move(error);  // the running stage belongs to the thread that started the task
  publish(state_.fetch_or(kDone, std::memory_order_acq_rel));
  releaseLinks(false);  // its body never ran: no children
}

bool TaskCore::claimQueued(std::uint32_t extraFlags) noexcept {
  std::uint32_t s = state_.load(std::memory_order_acquire);
  while (stageOf(s) == kQueued) {
    if (state_.compare_exchange_weak(s, s | kSettling | extraFlags, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      return true;
    }
  }
  return false;
}

void TaskCore::abandon(std::exception_ptr reason) noexcept {
  if (!claimQueued(0)) return;
  error_ = std::move(reason);
  publish(state_.fetch_or(kDone, std::memory_order_acq_rel));
  releaseLinks(false);
}

bool TaskCore::cancel(bool waitWhileSettling) noexcept {
  // Whoever awaits this task (or a child cancelled with it) goes on on its
  // scheduler, never inside the caller's cancel.
  const NoInlineResumption noInline;
  const CancelOutcome outcome = cancelOne(waitWhileSettling);
  // A queued task never ran: no children. A running one's go with it.
  if (outcome == CancelOutcome::running || outcome == CancelOutcome::runningAgain) {
    cancelRunning(outcome == CancelOutcome::running);
  }
  return outcome != CancelOutcome::done;
}

void TaskCore::cancelRunning(bool cancelTokenToo) noexcept {
  // The children first: the token's callbacks may let the task return and
  // settle at once, and a settled task lets its children go uncancelled.
  TaskCore* const children = detachChildren(kClosedCancelled);
  if (cancelTokenToo) cancelToken();
  cancelTree(children);
}

TaskCore::CancelOutcome TaskCore::cancelOne(bool waitWhileSettling) noexcept {
  std::uint32_t s = state_.load(std::memory_order_acquire);
  while (true) {
    switch (stageOf(s)) {
      case kDone: return CancelOutcome::done;
      case kSettling:  // being abandoned or cancelled: done within a few instructions
        if (!waitWhileSettling) return CancelOutcome::done;
        std::this_thread::yield();
        s = state_.load(std::memory_order_acquire);
        continue;
      case kQueued:
        if (claimQueued(kCancelled)) {
          error_ = cancelledError();
          publish(state_.fetch_or(kDone, std::memory_order_acq_rel));
          // Outside any lock: token callbacks are user code.
          cancelToken();
          if (cancelListener) cancelListener->queuedTaskCancelled();
          releaseLinks(false);
          return CancelOutcome::settled;
        }
        s = state_.load(std::memory_order_acquire);
        continue;
      default:  // running: the caller cancels its token; finish() reports the cancellation
        // seq_cst, as the load in cancelToken(): a token the coroutine
        // creates meanwhile is cancelled by one side or the other (see
        // createToken()).
        if (state_.compare_exchange_weak(s, s | kCancelled, std::memory_order_seq_cst, std::memory_order_acquire)) {
          return (s & kCancelled) == 0 ? CancelOutcome::running : CancelOutcome::runningAgain;
        }
    }
  }
}

void TaskCore::requestTokenCancellation() noexcept { cancelRunning(/*cancelTokenToo=*/true); }

void TaskCore::publish(std::uint32_t previous, Deferred* deferred) noexcept {
  if ((previous & (kContinuation | kWaiters)) == 0) return;
  // A waiter or the continuation may release its reference as soon as it
  // sees `done`; the settling thread holds one of its own (every settling
  // path is called through a reference: see the header), so the object
  // outlives this call.
  if ((previous & kWaiters) != 0) {
    WaitStripe& stripe = stripeOf(this);
    { std::lock_guard lock(stripe.mutex); }  // a waiter between its check and its wait holds the mutex
    stripe.done.notify_all();                // wakes the other tasks' waiters on this stripe too: they recheck
  }
  if ((previous & kContinuation) == 0) return;
  if (deferred != nullptr) {
    *deferred = Deferred{continuation_, continuationArg_};
  } else {
    continuation_(continuationArg_);
  }
}

bool TaskCore::blockUntilDone(const Clock::time_point* deadline) {
  if (isDone()) return true;
  WaitStripe& stripe = stripeOf(this);
  std::unique_lock lock(stripe.mutex);
  // Announce the waiter with an RMW: it is ordered with the settler's RMW to
  // `done`, so either this sees done or the settler sees kWaiters.
  if (stageOf(state_.fetch_or(kWaiters, std::memory_order_acq_rel)) == kDone) return true;
  const auto done = [&] { return isDone(); };
  if (deadline == nullptr) {
    stripe.done.wait(lock, done);
    return true;
  }
  return stripe.done.wait_until(lock, *deadline, done);
}

void TaskCore::wait() { blockUntilDone(nullptr); }

bool TaskCore::waitUntil(Clock::time_point deadline) { return blockUntilDone(&deadline); }

std::exception_ptr TaskCore::consume() {
  // acquire: error_ (and the value) were written before `done` was published.
  if (stageOf(state_.load(std::memory_order_acquire)) != kDone) {
    throw std::logic_error("coexec::Future: the result was taken before the task settled");
  }
  // One consumer (a Future is not shared between threads): a plain
  // load and store; the destructor and armIfUnread() read it (see consumed_).
  if (consumed_.load(std::memory_order_relaxed)) {
    throw std::logic_error(
        "coexec::Future: the result was already consumed (get() or co_await may take a Future's result only once)");
  }
  consumed_.store(true, std::memory_order_relaxed);
  return error_;
}

void TaskCore::armUnobservedReport(UnobservedFailureReport* report) noexcept {
  std::unique_ptr<UnobservedFailureReport> owned(report);
  {
    ArmedStripe& stripe = armedStripeOf(this);
    std::lock_guard lock(stripe.mutex);
    try {
      stripe.armed.emplace_back(this, std::move(owned));
    } catch (...) {
      return;  // no memory for the entry: not armed (the report is dropped with `owned`)
    }
  }
  // After the entry: a destructor that sees the flag finds it (the flag's
  // store happens before every later release of a reference, and so before
  // the destructor, which runs after the last).
  state_.fetch_or(kUnobservedArmed, std::memory_order_release);
}

bool TaskCore::failedOnItsOwn() const noexcept {
  const std::uint32_t s = state_.load(std::memory_order_acquire);
  return stageOf(s) == kDone && (s & kCancelled) == 0 && error_ && !isOperationCancelled(error_);
}

void TaskCore::throwSecondAwait(const char* operation) {
  throw std::logic_error(std::string("coexec::") + operation +
                         ": the Future is already awaited by another coroutine or combinator; a Future has one "
                         "awaiter (await it once and share the value, or give each awaiter a Future of its own)");
}

bool TaskCore::setContinuation(Continuation fn, void* arg) {
  std::uint32_t s = state_.load(std::memory_order_acquire);
  // A second awaiter is refused before it writes anything: the first one's
  // continuation stays intact. (Two awaits racing on two threads at the same
  // instant may both pass this check; the one whose CAS loses throws below.)
  if ((s & kContinuation) != 0) throwSecondAwait("Future");
  continuation_ = fn;  // not read unless kContinuation is published below
  continuationArg_ = arg;
  while (stageOf(s) != kDone) {
    if ((s & kContinuation) != 0) throwSecondAwait("Future");
    if (state_.compare_exchange_weak(s, s | kContinuation, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return true;
    }
  }
  return false;
}

}  // namespace coexec::detail
