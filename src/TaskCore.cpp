#include "coexec/detail/TaskCore.h"

#include <stdexcept>

#include "coexec/Errors.h"

namespace coexec::detail {

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

TaskCore::TaskCore(bool hasFuture, bool wantsToken, int priority) : hasFuture_(hasFuture), priority_(priority) {
  if (wantsToken) source_.emplace();
}

CancellationToken TaskCore::token() const noexcept { return source_ ? source_->token() : CancellationToken(); }

bool TaskCore::tryStart() noexcept {
  if (!hasFuture_) {
    // No Future: nothing can cancel or wait for this task, and its owner
    // (whoever holds the PendingTask, or the worker that dequeued it) is the
    // only thread that touches its stage.
    if (stage_ != Stage::queued) return false;
    stage_ = Stage::running;
    return true;
  }
  std::lock_guard lock(mutex_);
  if (stage_ != Stage::queued) return false;
  stage_ = Stage::running;
  return true;
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
    stage_ = Stage::done;
    return result;
  }
  std::unique_lock lock(mutex_);
  std::exception_ptr published = result.error;
  if (cancelled_) {
    // Cancelled while running: the value is dropped and the Future reports the
    // cancellation. The pool counts the task by how it actually ended.
    discardValue();
    if (result.outcome != Outcome::cancelled) published = std::make_exception_ptr(OperationCancelled());
  }
  settle(lock, std::move(published));
  return result;
}

void TaskCore::failRunning(std::exception_ptr error) noexcept {
  std::unique_lock lock(mutex_);
  if (stage_ != Stage::running) return;
  settle(lock, std::move(error));
}

void TaskCore::abandon(std::exception_ptr reason) noexcept {
  std::unique_lock lock(mutex_);
  if (stage_ != Stage::queued) return;
  settle(lock, std::move(reason));
}

bool TaskCore::requestCancel() noexcept {
  std::unique_lock lock(mutex_);
  if (stage_ == Stage::done) return false;
  const bool first = !cancelled_;
  cancelled_ = true;
  if (stage_ == Stage::queued) {
    settle(lock, std::make_exception_ptr(OperationCancelled()));
  } else {
    lock.unlock();
  }
  // Outside the lock: token callbacks are user code.
  if (first && source_) source_->requestCancellation();
  return true;
}

void TaskCore::settle(std::unique_lock<std::mutex>& lock, std::exception_ptr error) noexcept {
  error_ = std::move(error);
  stage_ = Stage::done;
  const Continuation continuation = std::exchange(continuation_, nullptr);
  void* const arg = continuationArg_;
  // Keep the object alive across the notification: a waiter may release the
  // last other reference as soon as it sees `done`.
  addRef();
  lock.unlock();
  done_.notify_all();
  if (continuation) continuation(arg);
  release();
}

void TaskCore::wait() {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return stage_ == Stage::done; });
}

bool TaskCore::waitUntil(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  return done_.wait_until(lock, deadline, [&] { return stage_ == Stage::done; });
}

bool TaskCore::isDone() const {
  std::lock_guard lock(mutex_);
  return stage_ == Stage::done;
}

bool TaskCore::isCancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

std::exception_ptr TaskCore::consume() {
  std::lock_guard lock(mutex_);
  if (stage_ != Stage::done) throw std::logic_error("coexec::Future: the result was taken before the task settled");
  if (consumed_) {
    throw std::logic_error(
        "coexec::Future: the result was already consumed (get() or co_await may take a Future's result only once)");
  }
  consumed_ = true;
  return error_;
}

bool TaskCore::setContinuation(Continuation fn, void* arg) {
  std::lock_guard lock(mutex_);
  if (stage_ == Stage::done) return false;
  continuation_ = fn;
  continuationArg_ = arg;
  return true;
}

}  // namespace coexec::detail
