#pragma once

#include <cstddef>

#include "coexec/Export.h"

namespace coexec::detail {

/// Recycles coroutine frames and task states through per-thread free lists of
/// a few size classes (64 bytes to 4 KiB, powers of two), so that steady-state
/// submit/await does not reach the global allocator. Larger blocks go straight
/// to ::operator new. A block may be freed on another thread than the one that
/// allocated it: it joins that thread's list. A list that grows past
/// kMaxCachedPerClass moves half of its blocks, as one batch, to a shared
/// depot, and an empty list refills with a batch from it, so blocks flow back
/// from the threads that free them to the threads that allocate them. The
/// depot keeps a bounded number of batches; the rest go back to the global
/// allocator.
///
/// Thread safety: every function may be called from any thread.
struct COEXEC_EXPORT FrameAllocator {
  static constexpr std::size_t kMaxCachedPerClass = 64;
  /// \throws std::bad_alloc.
  static void* allocate(std::size_t size);
  /// `size` must be the size given to allocate(). Never throws.
  static void deallocate(void* block, std::size_t size) noexcept;
};

/// Base for types whose instances come from the FrameAllocator.
struct Recycled {
  static void* operator new(std::size_t size) { return FrameAllocator::allocate(size); }
  static void operator delete(void* block, std::size_t size) noexcept { FrameAllocator::deallocate(block, size); }
};

}  // namespace coexec::detail
