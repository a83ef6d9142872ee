// SPDX-License-Identifier: BSL-1.0
// The pool's workers (PoolWorker.h), and what is done across them: adding
// and removing one, and a worker with nothing of its own to run taking
// another's work.
//
// Invariants:
// - The list, and every operation here, is guarded by the pool's mutex.
//   A worker's node never moves: a PoolWorker* stays valid until the
//   worker is removed (its thread holds one).
// - The size's mirror (read without the lock by lock-free submitters)
//   equals size() after each add and removal. The removal of a worker whose
//   thread ran stores it seq_cst: a lock-free submitter pushes to the shared
//   ring and then reads the mirror (seq_cst), an exiting worker stores the
//   mirror and then reads the ring, so one of the two sees the other and a
//   thread is started for the task.
// - A thief never takes from itself, and takes in this order: a
//   continuation in another worker's next-continuation slot, then the
//   oldest task of another worker's local queue (workers in the order they
//   started), then a yield its worker has not come back to. (The worker
//   that holds a continuation or a yield may be blocked: a thief is what
//   keeps either from being stranded.) Each task taken from a local queue
//   is reported to `left` once, under the lock, before the thief runs it
//   (a bounded queue gives its place back there).

#pragma once

#include <algorithm>
#include <atomic>
#include <coroutine>
#include <cstddef>
#include <list>

#include "engine/PoolWorker.h"

namespace coexec::detail {

/// What a thief took (stealLocked()): a task, with its reference (the
/// caller adopts it), or a continuation; `yield` if the continuation was a
/// yield. Empty if there was nothing to take.
struct StolenWork {
  TaskCore* task = nullptr;
  std::coroutine_handle<> continuation;
  bool yield = false;
  explicit operator bool() const noexcept { return task != nullptr || continuation; }
};

class WorkerList {
 public:
  using iterator = std::list<PoolWorker>::iterator;
  using const_iterator = std::list<PoolWorker>::const_iterator;

  /// `sizeMirror` is the pool's copy of size() for readers without the lock.
  explicit WorkerList(std::atomic<std::size_t>& sizeMirror) noexcept : sizeMirror_(sizeMirror) {}
  WorkerList(const WorkerList&) = delete;
  WorkerList& operator=(const WorkerList&) = delete;

  /// Adds a worker at the end. \throws std::bad_alloc (nothing added).
  iterator addLocked() {
    const iterator it = list_.emplace(list_.end());
    sizeMirror_.store(list_.size(), std::memory_order_relaxed);
    return it;
  }
  /// Removes a worker whose thread never ran it (its start failed).
  void discardLocked(iterator it) noexcept {
    list_.erase(it);
    sizeMirror_.store(list_.size(), std::memory_order_relaxed);
  }
  /// Removes a worker whose thread is exiting (seq_cst: see the invariants).
  void exitedLocked(const PoolWorker* worker) noexcept {
    list_.remove_if([worker](const PoolWorker& w) { return &w == worker; });
    sizeMirror_.store(list_.size(), std::memory_order_seq_cst);
  }

  [[nodiscard]] std::size_t size() const noexcept { return list_.size(); }
  [[nodiscard]] bool empty() const noexcept { return list_.empty(); }
  iterator begin() noexcept { return list_.begin(); }
  iterator end() noexcept { return list_.end(); }
  const_iterator begin() const noexcept { return list_.begin(); }
  const_iterator end() const noexcept { return list_.end(); }

  /// Some worker has work of its own waiting (PoolWorker::hasLocalWork()).
  [[nodiscard]] bool anyLocalWorkLocked() const noexcept {
    return std::any_of(list_.begin(), list_.end(), [](const PoolWorker& worker) { return worker.hasLocalWork(); });
  }

  /// Takes the oldest task of `victim`'s local queue into `out` (its
  /// reference with it) and calls `left()`; false if the queue is empty.
  template <class Left>
  static bool stealTaskLocked(PoolWorker& victim, TaskCore*& out, Left&& left) noexcept {
    if (!victim.steal(out)) return false;
    left();
    return true;
  }

  /// The work `thief` takes from the other workers, in the order the
  /// invariants give; empty if none has any. `left()` is called for a task.
  template <class Left>
  StolenWork stealLocked(const PoolWorker& thief, Left&& left) noexcept {
    for (PoolWorker& victim : list_) {
      if (&victim == &thief) continue;
      if (std::coroutine_handle<> next = victim.stealNext()) return StolenWork{nullptr, next, false};
    }
    for (PoolWorker& victim : list_) {
      if (&victim == &thief) continue;
      if (TaskCore* task = nullptr; stealTaskLocked(victim, task, left)) return StolenWork{task, {}, false};
    }
    for (PoolWorker& victim : list_) {
      if (&victim == &thief) continue;
      if (std::coroutine_handle<> yielded = victim.takeYield(/*force=*/true)) return StolenWork{nullptr, yielded, true};
    }
    return {};
  }

 private:
  std::list<PoolWorker> list_;
  std::atomic<std::size_t>& sizeMirror_;
};

}  // namespace coexec::detail
