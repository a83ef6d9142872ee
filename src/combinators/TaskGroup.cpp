// SPDX-License-Identifier: BSL-1.0
// TaskGroup: children linked into the group while they run, the first
// failure cancelling the rest, join() parked until the group is idle, and
// the destructor that cancels and waits when join() was skipped.
//
// Invariants:
// - A child is linked (head_, live_) from spawn() until its settled() call,
//   which comes after its caller's Future (the ForwardedResult) has
//   settled: an idle group has no unsettled child and no unsettled Future.
// - The group is idle when live_ == 0 and no cancellation loop is at work
//   (cancelling_ == 0). A loop releases mutex_ around each child's
//   requestCancel() (which may run user callbacks, and settle the child
//   inline), so the joiner is resumed, and the destructor woken, only when
//   the group is idle: nobody then touches the group any more.
// - A parked joiner is resumed exactly once, by whoever takes it from
//   joiner_ under mutex_.
// Locks: mutex_ guards every field but pool_; never held while user code
// runs (requestCancel, the uncaught handler, a resumed coroutine).

#include "coexec/TaskGroup.h"

#include <stdexcept>

#include <fmt/format.h>

#include "coexec/Errors.h"
#include "coexec/detail/CombinatorAccess.h"
#include "foundation/IntrusiveLinks.h"

namespace coexec {
namespace detail {
namespace {

/// True for what a child that never ran settles with: refused
/// (RejectedExecution) or dropped (BrokenPromise). Never reported as an
/// unread failure (ThreadPoolOptions::reportUnobservedFailures).
bool isRefusal(const std::exception_ptr& error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const RejectedExecution&) {
    return true;
  } catch (const BrokenPromise&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

GroupState::~GroupState() {
  std::unique_lock lock(mutex_);
  const std::size_t running = live_;
  if (running > 0) {
    stopped_ = true;
    ++cancelling_;
    cancelChildrenLocked(lock);
    --cancelling_;
  }
  idle_.wait(lock, [this] { return live_ == 0 && cancelling_ == 0; });
  // A failure no join() rethrew, unless it is a child's refusal (the
  // policy, or whoever dropped it after shutdownNow(), chose that).
  const std::exception_ptr unobserved = failed_ && !observed_ && !isRefusal(firstError_) ? firstError_ : nullptr;
  lock.unlock();
  if (running > 0) {
    std::exception_ptr misuse;
    try {
      throw std::logic_error(fmt::format(
          "coexec::TaskGroup: destroyed while {} of its children were still running, without join(); they were "
          "cancelled and waited for (co_await group.join() before the group goes out of scope)",
          running));
    } catch (...) {
      misuse = std::current_exception();
    }
    CombinatorAccess::reportUncaught(pool_, misuse);
  }
  if (unobserved) CombinatorAccess::reportUncaught(pool_, unobserved, /*unobserved=*/true);
}

bool GroupState::enter(GroupChildBase& child) noexcept {
  std::lock_guard lock(mutex_);
  if (stopped_) return false;
  IntrusiveLinks<GroupChildBase, &GroupChildBase::prev_, &GroupChildBase::next_>::pushFront(head_, child);
  child.linked_ = true;
  ++live_;
  return true;
}

void GroupState::unlinkLocked(GroupChildBase& child) noexcept {
  if (!child.linked_) return;
  IntrusiveLinks<GroupChildBase, &GroupChildBase::prev_, &GroupChildBase::next_>::unlink(head_, child);
  child.linked_ = false;
  --live_;
}

void GroupState::settled(GroupChildBase& child, const std::exception_ptr& error) noexcept {
  std::unique_lock lock(mutex_);
  unlinkLocked(child);
  if (error && !failed_ && !isOperationCancelled(error)) {
    failed_ = true;
    firstError_ = error;
    stopped_ = true;
    ++cancelling_;
    cancelChildrenLocked(lock);
    --cancelling_;
  }
  ResumePoint joiner = takeJoinerLocked();
  lock.unlock();  // the last access to the group: it may be destroyed from here on
  joiner.resume();
}

void GroupState::cancelChildrenLocked(std::unique_lock<std::mutex>& lock) noexcept {
  Ref<GroupChildBase> previous;  // released without the lock (its task may hold user captures)
  GroupChildBase* child = head_;
  while (child != nullptr) {
    if (child->cancelRequested_) {
      child = child->next_;
      continue;
    }
    child->cancelRequested_ = true;
    child->addRef();
    Ref<GroupChildBase> current = Ref<GroupChildBase>::adopt(child);  // stays valid while unlocked
    lock.unlock();
    previous = Ref<GroupChildBase>();
    current->task_->requestCancel();  // may settle it inline (settled() takes the lock)
    lock.lock();
    child = current->linked_ ? current->next_ : head_;  // unlinked meanwhile: start over (the flags skip the done)
    previous = std::move(current);
  }
  if (previous) {
    lock.unlock();
    previous = Ref<GroupChildBase>();
    lock.lock();
  }
}

ResumePoint GroupState::takeJoinerLocked() noexcept {
  ResumePoint taken;
  if (live_ != 0 || cancelling_ != 0) return taken;
  idle_.notify_all();  // under the lock: the destructor may free the group once it sees idle
  if (joiner_ != nullptr) {
    taken = joiner_->parked_;
    joiner_ = nullptr;
  }
  return taken;
}

void GroupState::cancel() noexcept { stopAndCancel(); }

void GroupState::stopAndCancel() noexcept {
  std::unique_lock lock(mutex_);
  stopped_ = true;
  ++cancelling_;
  cancelChildrenLocked(lock);
  --cancelling_;
  ResumePoint joiner = takeJoinerLocked();
  lock.unlock();
  {
    const NoInlineResumption posted;  // never inside the caller's cancel()
    joiner.resume();
  }
}

std::size_t GroupState::running() const {
  std::lock_guard lock(mutex_);
  return live_;
}

bool GroupState::idle() const {
  std::lock_guard lock(mutex_);
  return live_ == 0 && cancelling_ == 0;
}

GroupState::Park GroupState::park(JoinAwaiter& joiner, bool cancelled) {
  std::lock_guard lock(mutex_);
  if (!cancelled && joiner.cancelledEarly_) return Park::cancelled;
  if (live_ == 0 && cancelling_ == 0) return Park::ready;
  if (joiner_ != nullptr) {
    throw std::logic_error(
        "coexec::TaskGroup::join: another coroutine is already joining this group (one join at a time)");
  }
  joiner_ = &joiner;
  return Park::parked;
}

void GroupState::cancelFor(JoinAwaiter& joiner) noexcept {
  std::unique_lock lock(mutex_);
  if (joiner_ != &joiner) {
    joiner.cancelledEarly_ = true;  // not parked yet (its suspend handles it), or resumed already (unused)
    return;
  }
  if (!failed_) joiner.cancelled_ = true;  // the first reason wins
  stopped_ = true;
  ++cancelling_;
  cancelChildrenLocked(lock);
  --cancelling_;
  ResumePoint resumed = takeJoinerLocked();
  lock.unlock();
  {
    const NoInlineResumption posted;  // never inside the canceller's requestCancellation()
    resumed.resume();
  }
}

void GroupState::joined(const JoinAwaiter& joiner) {
  std::lock_guard lock(mutex_);
  if (joiner.cancelled_) throw OperationCancelled();
  if (failed_) {
    observed_ = true;
    std::rethrow_exception(firstError_);
  }
}

bool JoinAwaiter::suspend(std::coroutine_handle<> awaiting, TaskContext* context) {
  CancellationToken token;
  if (context != nullptr) token = context->cancellationToken();  // may throw: not suspended
  parked_.record(awaiting, taskOf(context));
  bool cancelled = token.isCancellationRequested();
  try {
    if (!cancelled && token.canBeCancelled()) {
      registration_.emplace(token, [this] { group_->cancelFor(*this); });
    }
    while (true) {
      if (cancelled) {
        cancelled_ = true;
        group_->stopAndCancel();  // nothing parked: no joiner to resume
      }
      switch (group_->park(*this, cancelled)) {
        case GroupState::Park::parked: return true;  // the last child's settling resumes us
        case GroupState::Park::ready: parked_.forget(); return false;
        case GroupState::Park::cancelled: cancelled = true; break;
      }
    }
  } catch (...) {
    parked_.forget();
    throw;
  }
}

}  // namespace detail

TaskGroup::TaskGroup(ThreadPoolExecutor& pool) : state_(std::make_unique<detail::GroupState>(pool)) {}

TaskGroup::~TaskGroup() = default;

detail::JoinAwaiter TaskGroup::join() noexcept { return detail::JoinAwaiter(*state_); }

void TaskGroup::cancel() noexcept { state_->cancel(); }

std::size_t TaskGroup::running() const { return state_->running(); }

ThreadPoolExecutor& TaskGroup::pool() const noexcept { return state_->pool(); }

}  // namespace coexec
