// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace coexec::detail {

/// A bounded lock-free multi-producer multi-consumer FIFO of pointers on a
/// power-of-two array (Dmitry Vyukov's design): each slot carries a sequence
/// number that says whether it is free for the producer of a given lap or full
/// for its consumer, so a push and a pop are one compare-and-swap on the tail
/// or the head plus one store to the slot. No allocation after construction.
///
/// A push claims its slot (the CAS on tail_) before it writes the value; until
/// it publishes the slot, a pop of that slot reports "empty" while size() already
/// counts it. The pool relies on this: a worker that sees size() > 0 does not
/// park, and retries the pop.
template <class T>
class MpmcRing {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  /// Precondition: `capacity` is a power of two, at least 2.
  explicit MpmcRing(std::size_t capacity) : slots_(new Slot[capacity]), mask_(capacity - 1) {
    for (std::size_t i = 0; i < capacity; ++i)
      slots_[i].sequence.store(i, std::memory_order_relaxed);
  }
  MpmcRing(const MpmcRing&) = delete;
  MpmcRing& operator=(const MpmcRing&) = delete;

  [[nodiscard]] std::size_t capacity() const noexcept { return mask_ + 1; }

  /// Claims the next free slot into `pos`; false if the ring is full. The
  /// caller must publish() it, promptly: later values queue behind it.
  /// Lock-free; any thread.
  bool tryClaim(std::size_t& pos) noexcept {
    pos = tail_.load(std::memory_order_relaxed);
    while (true) {
      const std::size_t sequence = slots_[pos & mask_].sequence.load(std::memory_order_acquire);
      const auto diff = static_cast<std::intptr_t>(sequence) - static_cast<std::intptr_t>(pos);
      if (diff == 0) {
        // seq_cst: the claim is what size() sees (see the class comment).
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) {
          return true;
        }
      } else if (diff < 0) {
        return false;  // the slot still holds last lap's value: full
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }
  /// Stores `value` in the slot tryClaim() gave, making it visible to pops.
  void publish(std::size_t pos, T value) noexcept {
    Slot& slot = slots_[pos & mask_];
    slot.value = value;
    slot.sequence.store(pos + 1, std::memory_order_release);
  }
  /// Appends `value`; false if the ring is full. Lock-free; any thread.
  bool tryPush(T value) noexcept {
    std::size_t pos = 0;
    if (!tryClaim(pos)) return false;
    publish(pos, value);
    return true;
  }

  /// Takes the oldest value into `out`; false if there is none published.
  /// Lock-free; any thread.
  bool tryPop(T& out) noexcept {
    std::size_t pos = head_.load(std::memory_order_relaxed);
    while (true) {
      Slot& slot = slots_[pos & mask_];
      const std::size_t sequence = slot.sequence.load(std::memory_order_acquire);
      const auto diff = static_cast<std::intptr_t>(sequence) - static_cast<std::intptr_t>(pos + 1);
      if (diff == 0) {
        if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) {
          out = slot.value;
          slot.sequence.store(pos + mask_ + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // empty, or its producer has not published it yet
      } else {
        pos = head_.load(std::memory_order_relaxed);
      }
    }
  }

  /// Takes every value in the ring at once, oldest first, passing each to
  /// `sink` (which must not throw): one compare-and-swap moves the head past
  /// all of them, so a concurrent tryPop() either took its value before (an
  /// older one) or finds the ring empty; no pop can take a value from the
  /// middle of the batch. Returns how many. Precondition: no push is between
  /// its claim and its publish (the caller keeps pushers out); concurrent
  /// pops are fine. Any thread.
  template <class Sink>
  std::size_t takeAll(Sink sink) noexcept {
    std::size_t head = head_.load(std::memory_order_relaxed);
    std::size_t tail = 0;
    do {
      tail = tail_.load(std::memory_order_acquire);
      if (tail <= head) return 0;
    } while (!head_.compare_exchange_weak(head, tail, std::memory_order_seq_cst, std::memory_order_relaxed));
    for (std::size_t pos = head; pos != tail; ++pos) {
      Slot& slot = slots_[pos & mask_];
      while (slot.sequence.load(std::memory_order_acquire) != pos + 1) {
        // Published already (see the precondition); a pop of the previous lap
        // that released this slot late is the only wait.
      }
      sink(slot.value);
      slot.sequence.store(pos + mask_ + 1, std::memory_order_release);
    }
    return tail - head;
  }

  /// Claimed pushes minus claimed pops: exact when no push or pop is under
  /// way. seq_cst loads (see the class comment).
  [[nodiscard]] std::size_t size() const noexcept {
    const std::size_t head = head_.load(std::memory_order_seq_cst);
    const std::size_t tail = tail_.load(std::memory_order_seq_cst);
    return tail > head ? tail - head : 0;
  }
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }

  /// The number of values in the ring at one instant during the call (claimed
  /// pushes minus claimed pops), for reports: unlike size(), which reads head
  /// and then tail and so may count pops and pushes from two moments (more
  /// than the ring ever held), it reads the tail between two reads of the
  /// head and retries until the head did not move, so the head it uses was
  /// the head when the tail was read. Any thread; lock-free, not wait-free
  /// (under a stream of pops it retries a bounded number of times, then
  /// answers the smaller, never the larger, of the possible counts).
  [[nodiscard]] std::size_t sizeAtOneInstant() const noexcept {
    for (int attempt = 0; attempt < 64; ++attempt) {
      const std::size_t head = head_.load(std::memory_order_seq_cst);
      const std::size_t tail = tail_.load(std::memory_order_seq_cst);
      if (head_.load(std::memory_order_seq_cst) == head) return tail > head ? tail - head : 0;
    }
    const std::size_t tail = tail_.load(std::memory_order_seq_cst);
    const std::size_t head = head_.load(std::memory_order_seq_cst);  // later: never over-counts
    return tail > head ? tail - head : 0;
  }

 private:
  struct Slot {
    std::atomic<std::size_t> sequence;
    T value;
  };
  std::unique_ptr<Slot[]> slots_;
  const std::size_t mask_;
  alignas(64) std::atomic<std::size_t> tail_{0};
  alignas(64) std::atomic<std::size_t> head_{0};
};

}  // namespace coexec::detail
