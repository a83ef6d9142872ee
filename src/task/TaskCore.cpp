#include "coexec/detail/TaskCore.h"

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "coexec/Errors.h"

namespace coexec::detail {

namespace {

/// Where threads blocked in TaskCore::wait() sleep: blocking waits are rare
/// (coroutines await instead), so a small shared table serves every task
/// and a task carries no mutex or condition variable of its own.
struct alignas(64) WaitStripe {
  std::mutex mutex;
  std::condition_variable done;
};

WaitStripe& stripeOf(const void* task) noexcept {
  static WaitStripe stripes[64];
  const auto bits = reinterpret_cast<std::uintptr_t>(task);
  return stripes[(bits >> 6) % 64];
}

/// The error of every task cancelled before it produced a result: one
/// exception object, shared (an exception_ptr is reference counted and the
/// object is never modified), so that a cancel allocates nothing; a
/// million cancelled Futures would otherwise hold a million copies.
const std::exception_ptr& cancelledError() noexcept {
  static const std::exception_ptr error = std::make_exception_ptr(OperationCancelled());
  return error;
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

TaskCore::TaskCore(bool hasFuture, bool wantsToken, int priority)
    : hasFuture_(hasFuture), tokenStage_(wantsToken ? kTokenReady : kNoToken), priority_(priority) {
  if (wantsToken) source_.emplace();
}

CancellationToken TaskCore::token() const noexcept { return hasToken() ? source_->token() : CancellationToken(); }

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
    source_.emplace();
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
  if ((state_.load(std::memory_order_seq_cst) & kCancelled) != 0) source_->requestCancellation();
  return true;
}

bool TaskCore::tryStart() noexcept {
  if (!hasFuture_) {
    // No Future: nothing can cancel or wait for this task, and its owner
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

RunResult TaskCore::run() noexcept {
  std::exception_ptr error;
  try {
    invoke();
  } catch (...) {
    error = std::current_exception();
  }
  return finish(std::move(error));
}

RunResult TaskCore::finish(std::exception_ptr error) noexcept {
  RunResult result;
  result.error = std::move(error);
  if (result.error) {
    result.outcome = isOperationCancelled(result.error) ? Outcome::cancelled : Outcome::failed;
  }
  if (!hasFuture_) {  // nobody to publish to (see tryStart)
    discardValue();
    state_.store(kDone, std::memory_order_relaxed);
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
  publish(s);
  return result;
}

void TaskCore::failRunning(std::exception_ptr error) noexcept {
  if (stageOf(state_.load(std::memory_order_acquire)) != kRunning) return;
  error_ = std::move(error);  // the running stage belongs to the thread that started the task
  publish(state_.fetch_or(kDone, std::memory_order_acq_rel));
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
}

bool TaskCore::requestCancel() noexcept {
  std::uint32_t s = state_.load(std::memory_order_acquire);
  while (true) {
    switch (stageOf(s)) {
      case kDone: return false;
      case kSettling:  // being abandoned: done within a few instructions
        std::this_thread::yield();
        s = state_.load(std::memory_order_acquire);
        continue;
      case kQueued:
        if (claimQueued(kCancelled)) {
          error_ = cancelledError();
          publish(state_.fetch_or(kDone, std::memory_order_acq_rel));
          // Outside any lock: token callbacks are user code.
          requestTokenCancellation();
          if (cancelListener) cancelListener->queuedTaskCancelled();
          return true;
        }
        s = state_.load(std::memory_order_acquire);
        continue;
      default:  // running: cancel its token; finish() reports the cancellation
        // seq_cst, as the load in requestTokenCancellation(): a token the
        // coroutine creates meanwhile is cancelled by one side or the other
        // (see createToken()).
        if (state_.compare_exchange_weak(s, s | kCancelled, std::memory_order_seq_cst, std::memory_order_acquire)) {
          if ((s & kCancelled) == 0) requestTokenCancellation();
          return true;
        }
    }
  }
}

void TaskCore::publish(std::uint32_t previous) noexcept {
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
  if ((previous & kContinuation) != 0) continuation_(continuationArg_);
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
  std::uint32_t s = state_.load(std::memory_order_acquire);
  while (true) {
    if (stageOf(s) != kDone) {
      throw std::logic_error("coexec::Future: the result was taken before the task settled");
    }
    if ((s & kConsumed) != 0) {
      throw std::logic_error(
          "coexec::Future: the result was already consumed (get() or co_await may take a Future's result only once)");
    }
    if (state_.compare_exchange_weak(s, s | kConsumed, std::memory_order_acq_rel, std::memory_order_acquire)) break;
  }
  return error_;
}

bool TaskCore::setContinuation(Continuation fn, void* arg) {
  continuation_ = fn;  // not read unless kContinuation is published below
  continuationArg_ = arg;
  std::uint32_t s = state_.load(std::memory_order_acquire);
  while (stageOf(s) != kDone) {
    if (state_.compare_exchange_weak(s, s | kContinuation, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return true;
    }
  }
  return false;
}

}  // namespace coexec::detail
