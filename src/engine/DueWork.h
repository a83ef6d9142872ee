// SPDX-License-Identifier: BSL-1.0
#pragma once

// DueWork: the pool's timer work that became due (a one-shot's task, a
// periodic schedule's next run), waiting for a worker. Each entry holds a
// reference to its task; workers take it right after the continuations.
//
// Invariants:
// - Entries leave in the order they came.
// - The count is stored (seq_cst) after every change, under the queue's
//   lock, so it is readable anywhere: a parking worker reads it after it
//   parks (Parking.h), and whoever decides that the pool may terminate
//   reads it under the pool's mutex, under which every push happens.
// - A push never allocates: the timers reserve room for the work of every
//   live item (reserveMore()) before it can become due, so that a timer
//   callback never fails to hand its work over.
//
// Locks: its own mutex, taken after the pool's mutex and never before it.
// Pushes hold both, pops and drains hold this one alone, so that workers
// take due work without the pool's lock while a timer thread fires a batch
// under it.

#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

#include "foundation/RingBuffer.h"
#include "coexec/detail/TaskCore.h"

namespace coexec::detail {

class DueWork {
 public:
  /// Makes room for `extra` more entries. \throws std::bad_alloc.
  void reserveMore(std::size_t extra) {
    std::lock_guard lock(mutex_);
    items_.reserve(items_.size() + extra);
  }
  /// Requires: the pool's mutex held, and room reserved. Appends `task`,
  /// taking its reference.
  void push(TaskCore* task) {
    std::lock_guard lock(mutex_);
    items_.push(task);
    count_.store(items_.size(), std::memory_order_seq_cst);
  }
  /// The oldest entry (its reference goes to the caller), or null.
  [[nodiscard]] TaskCore* pop() noexcept {
    std::lock_guard lock(mutex_);
    if (items_.empty()) return nullptr;
    TaskCore* task = items_.pop();
    count_.store(items_.size(), std::memory_order_seq_cst);
    return task;
  }
  /// Appends every entry to `into`, oldest first (their references go with
  /// them), and leaves the queue empty. \throws std::bad_alloc if `into`
  /// cannot grow (the entries not yet moved stay).
  void drainInto(std::vector<TaskCore*>& into) {
    std::lock_guard lock(mutex_);
    while (!items_.empty()) {
      into.push_back(items_.at(0));
      (void)items_.pop();
    }
    count_.store(0, std::memory_order_seq_cst);
  }
  /// Some entry waits. `order`: relaxed for a first look on a hot path
  /// (nearly always none), seq_cst where Parking.h's rule needs it.
  [[nodiscard]] bool any(std::memory_order order = std::memory_order_seq_cst) const noexcept {
    return count_.load(order) > 0;
  }

 private:
  alignas(64) std::mutex mutex_;
  RingBuffer<TaskCore*> items_;        // guarded by mutex_
  std::atomic<std::size_t> count_{0};  // items_.size()
};

}  // namespace coexec::detail
