// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

namespace coexec::detail {

/// A Chase-Lev work-stealing deque of pointers: its owner pushes and pops at
/// the bottom (newest first) without a lock, and any thread steals from the
/// top (oldest first) with one compare-and-swap. The array grows when full;
/// replaced arrays stay allocated until the deque is destroyed, because a
/// thief may still be reading one (at most as much memory again as the
/// largest array). Follows Lê, Pop, Cohen and Zappa Nardelli, "Correct and
/// Efficient Work-Stealing for Weak Memory Models" (PPoPP 2013), with
/// seq_cst operations in place of its fences (ThreadSanitizer does not model
/// fences).
///
/// Thread safety: push() and pop() only on the owner thread; steal() and
/// size() on any thread.
template <class T>
class WorkStealingDeque {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  enum class Steal { taken, empty, contended };

  /// Precondition: `capacity` is a power of two.
  explicit WorkStealingDeque(std::size_t capacity = 256) : array_(new Array(capacity)) {}
  WorkStealingDeque(const WorkStealingDeque&) = delete;
  WorkStealingDeque& operator=(const WorkStealingDeque&) = delete;
  ~WorkStealingDeque() { delete array_.load(std::memory_order_relaxed); }

  /// Owner only. Pushes `value` at the bottom; returns the size after the
  /// push. seq_cst: see size(). \throws std::bad_alloc when it must grow.
  std::size_t push(T value) {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);
    const std::int64_t t = top_.load(std::memory_order_acquire);
    Array* array = array_.load(std::memory_order_relaxed);
    if (b - t >= static_cast<std::int64_t>(array->capacity)) array = grow(array, t, b);
    array->at(b).store(value, std::memory_order_relaxed);
    bottom_.store(b + 1, std::memory_order_seq_cst);
    return static_cast<std::size_t>(b + 1 - t);
  }

  /// Owner only. Takes the newest value into `out`; false if empty (or a
  /// thief took the last one).
  bool pop(T& out) noexcept {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;
    Array* array = array_.load(std::memory_order_relaxed);
    bottom_.store(b, std::memory_order_seq_cst);
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    if (t > b) {  // empty
      bottom_.store(b + 1, std::memory_order_relaxed);
      return false;
    }
    out = array->at(b).load(std::memory_order_relaxed);
    if (t == b) {  // the last one: race the thieves for it
      const bool won = top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed);
      bottom_.store(b + 1, std::memory_order_relaxed);
      return won;
    }
    return true;
  }

  /// Owner only, right after a pop() that returned true: puts `value` back
  /// at the bottom. Never grows (the pop made room), so never throws.
  void pushBack(T value) noexcept {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);
    array_.load(std::memory_order_relaxed)->at(b).store(value, std::memory_order_relaxed);
    bottom_.store(b + 1, std::memory_order_seq_cst);
  }

  /// Any thread. Takes the oldest value into `out`; `contended` if another
  /// thread took it first (try again).
  Steal steal(T& out) noexcept {
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
    if (t >= b) return Steal::empty;
    Array* array = array_.load(std::memory_order_acquire);
    const T value = array->at(t).load(std::memory_order_relaxed);
    if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) {
      return Steal::contended;
    }
    out = value;
    return Steal::taken;
  }

  /// Any thread. Exact when nobody pushes, pops or steals. seq_cst loads: a
  /// thread that announces itself (a seq_cst store) and then reads size()
  /// pairs with an owner that pushes and then reads that announcement.
  [[nodiscard]] std::size_t size() const noexcept {
    const std::int64_t t = top_.load(std::memory_order_seq_cst);
    const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
    return b > t ? static_cast<std::size_t>(b - t) : 0;
  }

  /// Any thread. The number of values at one instant during the call, for
  /// reports: size() reads top and then bottom, so a steal in between makes
  /// it count values from two moments. This reads bottom between two reads
  /// of top (which only grows) and retries until top did not move; after a
  /// bounded number of tries it answers a count that never exceeds the real
  /// one at the moment bottom was read.
  [[nodiscard]] std::size_t sizeAtOneInstant() const noexcept {
    for (int attempt = 0; attempt < 64; ++attempt) {
      const std::int64_t t = top_.load(std::memory_order_seq_cst);
      const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
      if (top_.load(std::memory_order_seq_cst) == t) return b > t ? static_cast<std::size_t>(b - t) : 0;
    }
    const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
    const std::int64_t t = top_.load(std::memory_order_seq_cst);
    return b > t ? static_cast<std::size_t>(b - t) : 0;
  }

 private:
  struct Array {
    explicit Array(std::size_t n) : capacity(n), slots(new std::atomic<T>[n]) {}
    std::atomic<T>& at(std::int64_t i) noexcept { return slots[static_cast<std::size_t>(i) & (capacity - 1)]; }
    const std::size_t capacity;
    const std::unique_ptr<std::atomic<T>[]> slots;
  };

  Array* grow(Array* old, std::int64_t t, std::int64_t b) {
    auto bigger = std::make_unique<Array>(old->capacity * 2);
    for (std::int64_t i = t; i < b; ++i)
      bigger->at(i).store(old->at(i).load(std::memory_order_relaxed), std::memory_order_relaxed);
    retired_.emplace_back(old);  // a thief may still read it
    Array* fresh = bigger.release();
    array_.store(fresh, std::memory_order_release);
    return fresh;
  }

  alignas(64) std::atomic<std::int64_t> top_{0};
  alignas(64) std::atomic<std::int64_t> bottom_{0};
  std::atomic<Array*> array_;
  std::vector<std::unique_ptr<Array>> retired_;  // owner only
};

}  // namespace coexec::detail
