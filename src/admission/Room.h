// SPDX-License-Identifier: BSL-1.0
#pragma once

// The admission front's backpressure: the places of a bounded(n) queue, and
// the producers waiting for room: block()'s threads and submitWhenRoom()'s
// coroutines (RoomWaiter nodes, which live in the awaiting coroutines'
// frames). The pool decides what room is and serves the waiters
// (RoomWait.cpp, PoolAdmission.cpp); this component keeps the places, the
// waiters and the signals between them.
//
// Invariants:
// - bounded(n): a task takes a place (reserve()) before it enters the shared
//   queue or a local queue, and gives it back (release()) when it leaves, so
//   concurrent submissions from outside and from the pool's threads never
//   exceed the bound together. Other queue kinds reserve nothing.
// - No lost wake-up of a waiting producer: a producer announces itself
//   (blockLocked(), appendLocked(): a seq_cst store of the waiters' mirror)
//   and then reads the places (reserve(), seq_cst); a task that leaves a
//   queue gives its place back (release(), seq_cst) and then reads the
//   mirrors (anyBlocked(), anyWaiting(), seq_cst). Either the producer sees
//   the place, or the leaver sees the producer and wakes or serves it.
// - The FIFO and the counts are guarded by the pool's mutex; the mirrors
//   are their lock-free copies. Room that appears under the mutex in a
//   worker's search (appearedLocked()) is served once the mutex is released
//   (signalled()).

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>

#include "coexec/SubmitWhenRoom.h"

namespace coexec::detail {

class Room {
 public:
  /// `capacity`: the bound of a bounded(n) queue; 0 for other kinds.
  Room(bool bounded, std::size_t capacity) noexcept : bounded_(bounded), capacity_(capacity) {}

  /// bounded(n): takes one place, false if all n are taken. Other kinds:
  /// true. Never blocks.
  bool reserve() noexcept {
    if (!bounded_) return true;
    // seq_cst load: a producer's read of the places after it announced
    // itself (see the invariants).
    std::size_t n = queued_.load(std::memory_order_seq_cst);
    while (n < capacity_) {
      if (queued_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) return true;
    }
    return false;
  }
  /// Gives back `n` places (tasks that left a queue). seq_cst: see the
  /// invariants.
  void release(std::size_t n = 1) noexcept {
    if (bounded_) queued_.fetch_sub(n, std::memory_order_seq_cst);
  }
  /// After release(): whether a block() producer or a submitWhenRoom()
  /// producer waits (seq_cst, see the invariants).
  [[nodiscard]] bool anyBlocked() const noexcept { return blockedMirror_.load(std::memory_order_seq_cst) != 0; }
  [[nodiscard]] bool anyWaiting() const noexcept { return waitersMirror_.load(std::memory_order_seq_cst) != 0; }

  /// Requires: the pool's mutex held. A block() producer starts or stops
  /// waiting on `available`.
  void blockLocked() noexcept { blockedMirror_.store(++blocked_, std::memory_order_seq_cst); }
  void unblockLocked() noexcept { blockedMirror_.store(--blocked_, std::memory_order_seq_cst); }
  [[nodiscard]] std::size_t blockedLocked() const noexcept { return blocked_; }

  /// Requires: the pool's mutex held. Appends `waiter` to the FIFO (before
  /// the serve that follows reads the places: see the invariants).
  void appendLocked(RoomWaiter& waiter) noexcept {
    waiter.prev_ = tail_;
    waiter.next_ = nullptr;
    (tail_ != nullptr ? tail_->next_ : head_) = &waiter;
    tail_ = &waiter;
    waiter.queued_ = true;
    waitersMirror_.store(++waiters_, std::memory_order_seq_cst);
  }
  /// Requires: the pool's mutex held; `waiter` in the FIFO. Takes it out.
  void removeLocked(RoomWaiter& waiter) noexcept {
    (waiter.prev_ != nullptr ? waiter.prev_->next_ : head_) = waiter.next_;
    (waiter.next_ != nullptr ? waiter.next_->prev_ : tail_) = waiter.prev_;
    waiter.prev_ = waiter.next_ = nullptr;
    waiter.queued_ = false;
    waitersMirror_.store(--waiters_, std::memory_order_relaxed);
  }
  /// Requires: the pool's mutex held. The oldest waiter, or null.
  [[nodiscard]] RoomWaiter* headLocked() const noexcept { return head_; }
  [[nodiscard]] std::size_t waitersLocked() const noexcept { return waiters_; }

  /// Requires: the pool's mutex held. Room may have appeared: wakes the
  /// block() producers, and marks submitWhenRoom()'s to be served once the
  /// mutex is released.
  void appearedLocked() noexcept {
    if (blocked_ > 0) available.notify_all();
    if (waiters_ > 0) signal_.store(true, std::memory_order_relaxed);
  }
  /// Room appeared under the mutex and its waiters are not served yet.
  [[nodiscard]] bool signalled() const noexcept { return signal_.load(std::memory_order_relaxed); }
  /// A serve is about to start: it takes what the signal announced.
  void clearSignal() noexcept { signal_.store(false, std::memory_order_relaxed); }

  /// block() producers wait here, with the pool's mutex.
  std::condition_variable available;
  /// submitWhenRoom() producers admitted after a wait
  /// (PoolStats::waitedForRoomCount); guarded by the pool's mutex.
  std::uint64_t waitedForRoom = 0;

 private:
  const bool bounded_;
  const std::size_t capacity_;
  // Written by every admission and dequeue of a bounded(n) queue: on its
  // own line, with the mirrors a dequeue reads right after writing it.
  alignas(64) std::atomic<std::size_t> queued_{0};
  std::atomic<std::size_t> blockedMirror_{0};
  std::atomic<std::size_t> waitersMirror_{0};
  std::atomic<bool> signal_{false};
  // Guarded by the pool's mutex.
  std::size_t blocked_ = 0;
  RoomWaiter* head_ = nullptr;  // oldest first
  RoomWaiter* tail_ = nullptr;
  std::size_t waiters_ = 0;
};

}  // namespace coexec::detail
