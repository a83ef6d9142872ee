// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstddef>
#include <new>
#include <utility>

#include "coexec/detail/FrameAllocator.h"

namespace coexec::detail {

/// A fixed array of `n` default-constructed T in one block from the frame
/// allocator (recycled per thread up to 4 KiB, so a combinator's per-child
/// states usually cost no heap allocation). Not copyable, not movable: the
/// children refer to their slots.
///
/// Thread safety: none of its own; the slots are the caller's to share.
template <class T>
class SlotArray {
  static_assert(alignof(T) <= alignof(std::max_align_t), "coexec: over-aligned combinator results are not supported");

 public:
  SlotArray() noexcept = default;
  SlotArray(const SlotArray&) = delete;
  SlotArray& operator=(const SlotArray&) = delete;
  ~SlotArray() { reset(); }

  /// Replaces the slots by `n` new ones. \throws std::bad_alloc, or what T's
  /// default constructor throws.
  void assign(std::size_t n) {
    reset();
    if (n == 0) return;
    T* data = static_cast<T*>(FrameAllocator::allocateDefault(n * sizeof(T)));  // T is not over-aligned
    std::size_t built = 0;
    try {
      for (; built < n; ++built)
        new (data + built) T();
    } catch (...) {
      destroy(data, built, n);
      throw;
    }
    data_ = data;
    size_ = n;
  }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] T* data() noexcept { return data_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }

 private:
  void reset() noexcept {
    if (data_ != nullptr) destroy(data_, size_, size_);
    data_ = nullptr;
    size_ = 0;
  }
  /// Destroys the first `built` slots of a block of `n`, and the block.
  static void destroy(T* data, std::size_t built, std::size_t n) noexcept {
    for (std::size_t i = built; i > 0; --i)
      data[i - 1].~T();
    FrameAllocator::deallocate(data, n * sizeof(T));
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace coexec::detail
