// SPDX-License-Identifier: BSL-1.0
// A task's cancellation links: its children list, its parent, and its
// registration on an outside token (see docs/cancellation.md for the rules).
//
// Invariants:
// - children_ has one writer while open, the task's own thread: it adds
//   children with a CAS (meeting a concurrent close) and prunes settled ones
//   under kChildrenLocked (no user code runs meanwhile; a closer waits it
//   out). Closing (a cancel, or settlement) swaps in a closed value and takes
//   the list; nothing is added afterwards.
// - A child's nextSibling_ belongs to whoever holds the list it is in;
//   parent_ is cleared when it leaves the list (pruned, or taken by a close),
//   so isChildOf() never names a parent that would no longer cancel it.
// - A token link (TokenLink) is released by the settling thread after the
//   task is published as done; its callback holds a reference to the task
//   while it cancels it, and does not wait for a task being settled
//   (cancelFromLink), since the settler may be waiting for that callback.

#include "coexec/detail/TaskCore.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdint>
#include <thread>

#include "coexec/CancellationToken.h"
#include "coexec/detail/NoInlineResumption.h"
#include "task/TokenLink.h"

namespace coexec::detail {

bool TaskCore::adoptChild(TaskCore& child) noexcept {
  std::uintptr_t head = children_.load(std::memory_order_acquire);
  if ((head & kChildrenClosed) != 0) return head != kClosedCancelled;
  child.addRefUnpublished();  // the list's (the child is not published yet)
  child.linked_ = true;
  child.parent_.store(this, std::memory_order_relaxed);
  while (true) {
    assert((head & kChildrenLocked) == 0 && "only the task's own thread prunes its children, and not now");
    child.nextSibling_ = reinterpret_cast<TaskCore*>(head);
    // release: a closer that takes the list (acquire) sees the child whole.
    if (children_.compare_exchange_weak(head, reinterpret_cast<std::uintptr_t>(&child), std::memory_order_release,
                                        std::memory_order_acquire)) {
      break;
    }
    if ((head & kChildrenClosed) != 0) {  // closed meanwhile: not linked after all
      child.parent_.store(nullptr, std::memory_order_relaxed);
      child.nextSibling_ = nullptr;
      child.release();  // not the last: the caller holds one
      return head != kClosedCancelled;
    }
  }
  if (--childBudget_ == 0) pruneChildren();
  return true;
}

void TaskCore::pruneChildren() noexcept {
  std::uintptr_t head = children_.load(std::memory_order_acquire);
  do {
    if ((head & kChildrenClosed) != 0) return;
  } while (!children_.compare_exchange_weak(head, head | kChildrenLocked, std::memory_order_acquire,
                                            std::memory_order_acquire));
  TaskCore* kept = nullptr;
  TaskCore** tail = &kept;
  TaskCore* settled = nullptr;
  std::uint32_t keptCount = 0;
  for (TaskCore* node = reinterpret_cast<TaskCore*>(head); node != nullptr;) {
    TaskCore* const next = node->nextSibling_;
    if (node->isDone()) {
      node->parent_.store(nullptr, std::memory_order_relaxed);
      node->nextSibling_ = settled;
      settled = node;
    } else {
      *tail = node;
      tail = &node->nextSibling_;
      ++keptCount;
    }
    node = next;
  }
  *tail = nullptr;
  // release: unlocks, publishing the new links to a closer.
  children_.store(reinterpret_cast<std::uintptr_t>(kept), std::memory_order_release);
  // The next pruning after as many children again as survived (up to
  // 65535): each child is looked at O(1) times on average, and the list
  // stays within about twice the children alive (plus kMinChildBudget, or
  // plus 65535 for a task with more children alive than that).
  childBudget_ = static_cast<std::uint16_t>(std::clamp<std::uint32_t>(keptCount, kMinChildBudget, 65535));
  dropChildren(settled);  // after unlocking: the last reference may run a result's destructor
}

TaskCore* TaskCore::detachChildren(std::uintptr_t closed) noexcept {
  std::uintptr_t head = children_.load(std::memory_order_acquire);
  while (true) {
    if ((head & kChildrenClosed) != 0) return nullptr;
    if ((head & kChildrenLocked) != 0) {  // the owner is pruning: a moment
      std::this_thread::yield();
      head = children_.load(std::memory_order_acquire);
      continue;
    }
    // acq_rel: takes the children the owner published (acquire), and orders
    // a cancellation before the close for an owner that then finds it
    // closed (release).
    if (children_.compare_exchange_weak(head, closed, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return reinterpret_cast<TaskCore*>(head);
    }
  }
}

void TaskCore::cancelTree(TaskCore* list) noexcept {
  while (list != nullptr) {
    TaskCore* const node = list;
    list = node->nextSibling_;
    node->nextSibling_ = nullptr;
    node->parent_.store(nullptr, std::memory_order_relaxed);
    const CancelOutcome outcome = node->cancelOne(/*waitWhileSettling=*/false);
    if (outcome == CancelOutcome::running || outcome == CancelOutcome::runningAgain) {
      // Its children go next, before its siblings: depth first, without
      // recursion (their links are ours now). Taken before its token's
      // callbacks run, as in cancelRunning().
      TaskCore* const grandchildren = node->detachChildren(kClosedCancelled);
      if (outcome == CancelOutcome::running) node->cancelToken();
      if (grandchildren != nullptr) {
        TaskCore* last = grandchildren;
        while (last->nextSibling_ != nullptr)
          last = last->nextSibling_;
        last->nextSibling_ = list;
        list = grandchildren;
      }
    }
    node->release();  // the list's reference
  }
}

void TaskCore::dropChildren(TaskCore* list) noexcept {
  while (list != nullptr) {
    TaskCore* const node = list;
    list = node->nextSibling_;
    // The last reference (fork/join: the parent has awaited and dropped the
    // child's Future): nobody can look at its links any more.
    if (node->releaseIfSole()) continue;
    node->nextSibling_ = nullptr;
    node->parent_.store(nullptr, std::memory_order_relaxed);
    node->release();
  }
}

bool TaskCore::linkToken(const CancellationToken& token) {
  if (!token.canBeCancelled()) return true;
  if (token.isCancellationRequested()) return false;
  linked_ = true;  // before the registration: its callback may run at once
  // Runs the callback here if the token was cancelled meanwhile; from now
  // on another thread's cancellation may settle this task too, and release
  // the link (an exchange: whoever takes it deletes it).
  tokenLink_.store(new TokenLink(token, *this), std::memory_order_release);
  if (isDone()) {  // settled by the callback already: the settler may have found no link yet
    releaseLinks(false);
    return false;
  }
  return true;
}

void TaskCore::releaseLinksSlow(bool cancelled) noexcept {
  if (children_.load(std::memory_order_relaxed) != 0) {
    TaskCore* const children = detachChildren(kClosedSettled);
    if (cancelled) {
      cancelTree(children);
    } else {
      dropChildren(children);
    }
  }
  // Deleting waits if the link's callback runs on another thread now: it
  // only cancels this task, which has settled (cancelFromLink returns at
  // once). acq_rel: see linkToken().
  if (tokenLink_.load(std::memory_order_acquire) != nullptr)
    delete tokenLink_.exchange(nullptr, std::memory_order_acq_rel);
}

}  // namespace coexec::detail
