// SPDX-License-Identifier: BSL-1.0
#pragma once

// SharedQueue: the pool's shared queue of admitted tasks, which every worker
// serves. For bounded() and unbounded() it has two parts: a lock-free ring
// (MpmcRing) that submitters from outside the pool push to, and workers pop
// from, without the pool's lock; and its overflow, a TaskQueue under the
// pool's lock. priority() and synchronous() have no ring: the TaskQueue is
// the whole queue (every task takes the locked path).
//
// Invariants:
// - First in, first out across the two parts: every task of the overflow is
//   newer than every task of the ring. While the overflow holds a task
//   (overflowing()), every push goes to it, under the lock: a submission
//   that finds the ring full goes there and sets the flag, lock-free
//   submitters read the flag first and take the locked path; when a worker
//   takes from the overflow (the ring is empty then), the overflow's oldest
//   move back into the ring (pollLocked()), and the flag clears once the
//   overflow is empty.
// - A lock-free push claims a slot, then publishes it: between the two the
//   ring is not empty (ringEmpty() is false) and yet no pop gets the task.
//   A worker that meets that moment under the lock waits for the publisher
//   rather than take a newer task from the overflow.
// - Each entry holds a reference to its task (a PendingTask's).
//
// Locks: the pool's mutex guards the overflow and every store of the flag
// (the *Locked functions); the ring's own operations are lock-free.

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "foundation/MpmcRing.h"
#include "engine/TaskQueue.h"
#include "coexec/PendingTask.h"
#include "coexec/WorkQueue.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/TaskCore.h"

namespace coexec::detail {

class alignas(64) SharedQueue {
 public:
  /// A queue as `spec` describes, with a ring of `ringCapacity` slots (a
  /// power of two), or none if 0.
  SharedQueue(const WorkQueue& spec, std::size_t ringCapacity)
      : ring_(ringCapacity > 0 ? std::make_unique<MpmcRing<TaskCore*>>(ringCapacity) : nullptr), overflow_(spec) {}

  [[nodiscard]] bool hasRing() const noexcept { return ring_ != nullptr; }

  // ---- lock-free ---------------------------------------------------------------

  /// The overflow holds tasks: pushes must take the locked path (acquire:
  /// pairs with the store that set it).
  [[nodiscard]] bool overflowing() const noexcept { return overflowing_.load(std::memory_order_acquire); }
  /// Requires: hasRing(). Claims a slot for a push; false if the ring is
  /// full. The claimer then publishes it (publish()).
  [[nodiscard]] bool tryClaim(std::size_t& pos) noexcept { return ring_->tryClaim(pos); }
  /// Requires: `pos` claimed. Puts `task` (its reference) in the slot.
  void publish(std::size_t pos, TaskCore* task) noexcept { ring_->publish(pos, task); }
  /// Takes the ring's oldest task (its reference goes to the caller); false
  /// if the ring is empty, has none ready, or does not exist.
  [[nodiscard]] bool tryPopRing(TaskCore*& task) noexcept { return ring_ != nullptr && ring_->tryPop(task); }
  /// True if the ring holds no task and no claimed slot (or does not exist).
  [[nodiscard]] bool ringEmpty() const noexcept { return ring_ == nullptr || ring_->empty(); }
  /// The ring's size now (claimed slots included); 0 without a ring.
  [[nodiscard]] std::size_t ringSize() const noexcept { return ring_ != nullptr ? ring_->size() : 0; }

  // ---- under the pool's mutex ------------------------------------------------

  /// Tasks in both parts.
  [[nodiscard]] std::size_t sizeLocked() const noexcept { return overflow_.size() + ringSize(); }
  /// Tasks in the locked part (the overflow, or the whole queue without a ring).
  [[nodiscard]] std::size_t lockedSizeLocked() const noexcept { return overflow_.size(); }
  /// Both parts' sizes, each read at one instant (MpmcRing::sizeAtOneInstant).
  [[nodiscard]] std::size_t sizeAtOneInstantLocked() const noexcept {
    return overflow_.size() + (ring_ != nullptr ? ring_->sizeAtOneInstant() : 0);
  }
  /// Appends `task` (taking it): to the ring unless the overflow holds
  /// tasks or the ring is full, else to the overflow. False, `task`
  /// untouched, if the TaskQueue refuses it (full). \throws std::bad_alloc
  /// if the overflow cannot grow (`task` untouched).
  bool pushLocked(PendingTask& task) {
    if (ring_ != nullptr && !overflowing_.load(std::memory_order_relaxed)) {
      std::size_t pos = 0;
      if (ring_->tryClaim(pos)) {
        ring_->publish(pos, TaskQueue::release(task));
        return true;
      }
    }
    if (!overflow_.offer(task)) return false;
    if (ring_ != nullptr) overflowing_.store(true, std::memory_order_release);  // later pushes queue behind it
    return true;
  }
  /// Takes the locked part's oldest task (its next, for a priority queue);
  /// an empty PendingTask if there is none. With a ring, moves the
  /// overflow's oldest back into it, so that workers take them without the
  /// lock. Callers try the ring first, which holds the older tasks; a push
  /// between its claim and its publication may still be under way (the
  /// worker loop waits it out; takeOldestLocked(), a discard, takes this
  /// task instead).
  PendingTask pollLocked() {
    PendingTask task = overflow_.poll();
    if (task.valid() && ring_ != nullptr) refillLocked();
    return task;
  }
  /// Makes room in the locked part for `n` tasks in all. \throws std::bad_alloc.
  void reserveLocked(std::size_t n) { overflow_.reserve(n); }
  /// Requires: room reserved (reserveLocked()). Appends `task` (taking it)
  /// to the locked part, whatever the ring holds: for purge(), which
  /// takes every task out (drainLocked()) and puts back those it keeps, in
  /// order, so that new pushes queue behind them.
  void requeueLocked(PendingTask& task) noexcept {
    (void)overflow_.offer(task);  // cannot fail: room reserved, no more tasks than before
    if (ring_ != nullptr) overflowing_.store(true, std::memory_order_release);
  }
  /// Requires: no push under way (claimed and not yet published). Every
  /// task, in order, taken from the ring at once (workers popping meanwhile
  /// get older tasks or none, never one from the middle); both parts are
  /// left empty. \throws std::bad_alloc before any task has moved.
  std::vector<PendingTask> drainLocked() {
    std::vector<PendingTask> tasks;
    tasks.reserve(sizeLocked());  // the one allocation; nothing below allocates
    if (ring_ != nullptr) {
      ring_->takeAll([&tasks](TaskCore* raw) noexcept { tasks.push_back(TaskQueue::adopt(raw)); });
    }
    while (!overflow_.empty())
      tasks.push_back(overflow_.poll());  // newer than the ring's
    overflowing_.store(false, std::memory_order_release);
    return tasks;
  }

 private:
  // Moves the overflow's oldest tasks into the ring, in order (up to half
  // the ring); clears the flag once the overflow is empty.
  void refillLocked() {
    for (std::size_t moved = 0; moved < ring_->capacity() / 2 && !overflow_.empty(); ++moved) {
      std::size_t pos = 0;
      if (!ring_->tryClaim(pos)) break;
      PendingTask oldest = overflow_.poll();
      ring_->publish(pos, TaskQueue::release(oldest));
    }
    if (overflow_.empty()) overflowing_.store(false, std::memory_order_release);
  }

  // Read by every lock-free submission: first, on their own line.
  const std::unique_ptr<MpmcRing<TaskCore*>> ring_;
  std::atomic<bool> overflowing_{false};  // stored under the pool's mutex
  TaskQueue overflow_;                    // guarded by the pool's mutex
};

}  // namespace coexec::detail
