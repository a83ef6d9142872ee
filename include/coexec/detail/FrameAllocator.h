#pragma once

#include <cstddef>

#include "coexec/Export.h"

namespace coexec::detail {

/// Recycles coroutine frames and task states through per-thread free lists of
/// a few size classes (64 bytes to 4 KiB, powers of two), so that steady-state
/// submit/await does not reach the global allocator. Larger blocks go straight
/// to ::operator new. Each block remembers the thread cache that allocated it:
/// freed on that thread it returns to the local list (which keeps at most
/// kMaxCachedPerClass blocks; a burst's surplus goes back to the global
/// allocator); freed on another thread it is pushed, lock-free, onto its
/// owner's return stack, which the owner drains when its list runs dry. When
/// that stack is empty too (more blocks live than ever before), it takes a
/// reserve of spare blocks along with the one it needs (an eighth of what it
/// has taken, at least three), used only when list and stack are empty again,
/// so that a later peak slightly higher does not reach the global allocator.
/// The cache of an exited thread is adopted by the next new thread.
///
/// Thread safety: every function may be called from any thread.
struct COEXEC_EXPORT FrameAllocator {
  static constexpr std::size_t kMaxCachedPerClass = 1024;
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
