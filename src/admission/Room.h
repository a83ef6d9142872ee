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
// - Credit (bounded(n) with n >= kCreditMinCapacity only): a worker's own
//   pushes and pops of a fork/join run would otherwise write the one count
//   from every core. A worker takes places in batches (kCreditBatch) while
//   the count is at most half the capacity, and keeps the place of a task
//   it takes out of its own local queue (up to kCreditKeep in its slot)
//   while the count is at most half; a task taken from the shared queue or
//   stolen gives its place back to the count, so a worker that only
//   consumes gains no credit. Each credit slot counts places reserved and
//   not used yet, on its own line. So the count is the places held by
//   queued tasks plus the credit: never less than what is queued, and the
//   bound holds as before.
// - A reserve that finds the count full takes every slot's credit back
//   (reclaimCredit()) before it refuses. One take-back at a time: a reserve
//   that finds another at work waits for it to end, and one that finds no
//   credit to take reads the count once more. So a queue refuses only when
//   its places are taken by queued tasks, but for credit a worker gains
//   between the take-back and the refusal, which needs the count to fall to
//   half and fill up again meanwhile.
// - Credit is gained only while the count is at most half the capacity, so
//   a full count holds queued tasks, whose leaving (on the plain path, the
//   count being over half) serves the waiting producers.
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
#include "foundation/SpinWait.h"

namespace coexec::detail {

class Room {
 public:
  /// `capacity`: the bound of a bounded(n) queue; 0 for other kinds.
  Room(bool bounded, std::size_t capacity) noexcept : bounded_(bounded), capacity_(capacity) {}

  /// No credit slot: a reserve() or release() by a thread that is not one of
  /// the pool's workers.
  static constexpr std::size_t kNoSlot = ~std::size_t{0};
  /// Credit slots; a worker uses slot `number % kCreditSlots`.
  static constexpr std::size_t kCreditSlots = 16;
  /// The smallest capacity that uses credit: a smaller bounded(n) queue
  /// keeps every place in the one count.
  static constexpr std::size_t kCreditMinCapacity = 1024;
  /// Places a worker takes at once when its slot is empty.
  static constexpr std::size_t kCreditBatch = 8;
  /// The most places a slot keeps from the tasks that left a queue.
  static constexpr std::size_t kCreditKeep = 16;

  /// bounded(n): takes one place, false if all n are taken by queued tasks
  /// (see the credit invariant). `slot`: the calling worker's credit slot,
  /// or kNoSlot. Other kinds: true. Never blocks.
  bool reserve(std::size_t slot = kNoSlot) noexcept {
    if (!bounded_) return true;
    const bool credit = credits_ && slot != kNoSlot;
    if (credit && takeCredit(slot)) return true;
    while (true) {
      // seq_cst load: a producer's read of the places after it announced
      // itself (see the invariants).
      std::size_t n = queued_.load(std::memory_order_seq_cst);
      while (n < capacity_) {
        const std::size_t take = credit && n + kCreditBatch <= capacity_ / 2 ? kCreditBatch : 1;
        if (queued_.compare_exchange_weak(n, n + take, std::memory_order_relaxed)) {
          if (take > 1) addCredit(slot, take - 1);
          return true;
        }
      }
      if (!credits_) return false;
      if (reclaimCredit()) continue;
      // Nothing to take back. A take-back that ended after this reserve
      // read the count has given its places back: read it once more.
      if (queued_.load(std::memory_order_seq_cst) >= capacity_) return false;
    }
  }
  /// Gives back `n` places (tasks that left a queue). seq_cst: see the
  /// invariants. `slot`: the worker whose own local queue the task left
  /// (kNoSlot otherwise), which keeps one place as its credit while the
  /// count is at most half the capacity.
  void release(std::size_t n = 1, std::size_t slot = kNoSlot) noexcept {
    if (!bounded_) return;
    if (n == 1 && credits_ && slot != kNoSlot && keepCredit(slot)) return;
    queued_.fetch_sub(n, std::memory_order_seq_cst);
  }
  /// bounded(n): the places taken by queued tasks and held as credit (for
  /// tests). Other kinds: 0.
  [[nodiscard]] std::size_t taken() const noexcept { return queued_.load(std::memory_order_acquire); }
  /// The places held as credit (for tests; exact only when quiescent).
  [[nodiscard]] std::size_t credit() const noexcept {
    std::size_t total = 0;
    for (const Credit& c : credit_)
      total += c.places.load(std::memory_order_relaxed);
    return total;
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
  /// Uses one place of `slot`'s credit, if it has one.
  bool takeCredit(std::size_t slot) noexcept {
    std::atomic<std::size_t>& places = credit_[slot].places;
    std::size_t c = places.load(std::memory_order_relaxed);
    while (c > 0) {
      if (places.compare_exchange_weak(c, c - 1, std::memory_order_relaxed)) return true;
    }
    return false;
  }
  /// Keeps a place that left a queue as `slot`'s credit, if the slot has
  /// room for it and the count is at most half the capacity.
  bool keepCredit(std::size_t slot) noexcept {
    std::atomic<std::size_t>& places = credit_[slot].places;
    if (places.load(std::memory_order_relaxed) >= kCreditKeep) return false;
    if (queued_.load(std::memory_order_relaxed) > capacity_ / 2) return false;
    addCredit(slot, 1);
    return true;
  }
  /// Adds `n` places to `slot`'s credit, then marks that some slot has
  /// credit. seq_cst, as the take-back's clear of the mark and its read of
  /// the slots: either this add reads the mark cleared and sets it again,
  /// or the take-back reads the added places.
  void addCredit(std::size_t slot, std::size_t n) noexcept {
    credit_[slot].places.fetch_add(n, std::memory_order_seq_cst);
    if (!anyCredit_.load(std::memory_order_seq_cst)) anyCredit_.store(true, std::memory_order_seq_cst);
  }
  /// Takes every slot's credit back into the count. True if the count may
  /// have room now (there was credit, or another take-back was at work and
  /// has given its places back); false if there was none to take.
  bool reclaimCredit() noexcept {
    // A reserve that finds the count full reads one flag, not every slot,
    // while no worker has gained credit.
    if (!anyCredit_.load(std::memory_order_seq_cst)) {
      // Unless a take-back that cleared the flag holds places between the
      // slots and the count: refusing now could refuse one of them.
      if (!reclaiming_.load(std::memory_order_seq_cst)) return false;
      waitForReclaim();
      return true;
    }
    if (reclaiming_.exchange(true, std::memory_order_seq_cst)) {
      waitForReclaim();
      return true;
    }
    anyCredit_.store(false, std::memory_order_seq_cst);
    std::size_t total = 0;
    for (Credit& c : credit_) {
      if (c.places.load(std::memory_order_seq_cst) != 0) total += c.places.exchange(0, std::memory_order_relaxed);
    }
    if (total != 0) queued_.fetch_sub(total, std::memory_order_seq_cst);
    reclaiming_.store(false, std::memory_order_seq_cst);
    return true;
  }
  void waitForReclaim() const noexcept {
    while (reclaiming_.load(std::memory_order_seq_cst))
      cpuRelax();
  }

  const bool bounded_;
  const std::size_t capacity_;
  const bool credits_ = bounded_ && capacity_ >= kCreditMinCapacity;
  // Set when a slot gains credit, cleared by a take-back before it reads
  // the slots.
  std::atomic<bool> anyCredit_{false};
  // A take-back is at work (one at a time).
  std::atomic<bool> reclaiming_{false};
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
  // A worker's credit: written by its pushes and pops, taken back by a
  // reserve that finds the count full.
  struct alignas(64) Credit {
    std::atomic<std::size_t> places{0};
  };
  Credit credit_[kCreditSlots];
};

}  // namespace coexec::detail
