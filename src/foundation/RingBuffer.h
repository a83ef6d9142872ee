// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace coexec::detail {

/// A FIFO on a growable circular array whose capacity is a power of two:
/// unlike std::deque it does not allocate and free blocks as elements pass
/// through, so a queue in steady state never reaches the allocator. Not
/// synchronised. Elements must be handles whose moved-from state owns
/// nothing (PendingTask, Ref, coroutine_handle): popped slots are not reset.
template <class T>
class RingBuffer {
 public:
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

  /// Appends `value`. \throws std::bad_alloc when the array must grow and
  /// cannot: then `value` is left as it was (it is moved only once there is
  /// room), so a caller that keeps it loses nothing.
  void push(T&& value) {
    if (size_ == slots_.size()) grow();
    slots_[(head_ + size_) & mask_] = std::move(value);
    ++size_;
  }
  void push(const T& value) {
    if (size_ == slots_.size()) grow();
    slots_[(head_ + size_) & mask_] = value;
    ++size_;
  }
  /// Precondition: !empty().
  T pop() {
    T value = std::move(slots_[head_]);  // leaves the slot empty (a moved-from handle)
    head_ = (head_ + 1) & mask_;
    --size_;
    return value;
  }
  /// Precondition: !empty(). The newest element.
  T popBack() {
    const std::size_t last = (head_ + size_ - 1) & mask_;
    T value = std::move(slots_[last]);
    --size_;
    return value;
  }
  /// Element i from the front (0 = next to pop).
  T& at(std::size_t i) noexcept { return slots_[(head_ + i) & mask_]; }
  /// Makes room for `n` elements in all, so that pushes up to that size
  /// do not allocate (or throw). \throws std::bad_alloc.
  void reserve(std::size_t n) {
    while (slots_.size() < n) grow();
  }
  /// Keeps the elements for which `keep` is true, in order; returns the others.
  template <class Pred>
  std::vector<T> extractIf(Pred remove) {
    std::vector<T> kept;
    std::vector<T> removed;
    while (!empty()) {
      T value = pop();
      (remove(value) ? removed : kept).push_back(std::move(value));
    }
    for (T& value : kept)
      push(std::move(value));
    return removed;
  }

 private:
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 16 : slots_.size() * 2);
    for (std::size_t i = 0; i < size_; ++i)
      bigger[i] = std::move(at(i));
    slots_.swap(bigger);
    head_ = 0;
    mask_ = slots_.size() - 1;
  }

  std::vector<T> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
  std::size_t mask_ = 0;  // slots_.size() - 1
};

}  // namespace coexec::detail
