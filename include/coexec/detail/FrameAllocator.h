// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <bit>
#include <cstddef>
#include <new>

#include "coexec/Export.h"

namespace coexec::detail {

/// Recycles coroutine frames and task states through per-thread free lists of a
/// few size classes (64 bytes to 4 KiB, powers of two), so that steady-state
/// submit/await does not reach the global allocator. Larger blocks go straight
/// to ::operator new. Each block remembers the thread cache that allocated it:
/// freed on that thread it returns to the local list; freed on another thread
/// it is pushed, lock-free, onto its owner's return stack, which the owner
/// drains when its list runs dry. When that stack is empty too (more blocks
/// live than the cache holds), the cache takes a few spare blocks along with
/// the one it needs (an eighth of the blocks of that class it has live or
/// cached, at least three), kept in a reserve used only when list and stack are
/// empty again, so that a later peak slightly higher does not reach the global
/// allocator. The cache of an exited thread is adopted by the next new thread.
///
/// The caps: whatever the pattern of allocations and frees, each thread's cache
/// keeps, per size class, at most kMaxCachedPerClass blocks in its free list
/// and spare reserve together, and at most kMaxReturnedPerClass blocks that
/// other threads freed and it has not taken back yet. A block freed beyond
/// either cap goes back to the global allocator. So a cache holds at most
/// kMaxCachedPerClass + kMaxReturnedPerClass blocks of each class and
/// alignment kind (see Alignment), about 32 MiB over the seven classes. There
/// is one cache per thread that has allocated here, and an exited thread's
/// cache is adopted by the next new thread, so there are never more caches
/// than the most such threads that were ever alive at once. Blocks in use are
/// not counted: they are the program's.
///
/// Alignment: a block from allocate(size) is aligned to the smallest power of
/// two of at least `size + 16` bytes, capped at kMaxAlignment. An object's
/// alignment divides its size, so any object up to kMaxAlignment-aligned fits
/// a block of its size aligned: over-aligned objects, and coroutine frames
/// with over-aligned locals (C++20 passes no alignment to a promise's operator
/// new; the frame's size is all it gets). Types aligned beyond kMaxAlignment
/// (4096, a page) are not supported in task states, results or frames. A block
/// from allocateDefault(size), for objects whose type is not over-aligned,
/// starts a cache line (64 bytes), so that blocks threads hand to each other
/// share no line with their neighbours. The two kinds are cached apart; a
/// cache that runs dry asks the global allocator for an aligned block for the
/// first kind, and for a plain one, a line larger, for the second (an aligned
/// request costs the C library several times a plain one).
///
/// Thread safety: every function may be called from any thread.
struct COEXEC_EXPORT FrameAllocator {
  static constexpr std::size_t kMaxCachedPerClass = 1024;
  static constexpr std::size_t kMaxReturnedPerClass = 1024;
  /// The most alignment a block is guaranteed (see Alignment above).
  static constexpr std::size_t kMaxAlignment = 4096;
  /// A block of at least `size` bytes, aligned to its size as said above.
  /// \throws std::bad_alloc.
  static void* allocate(std::size_t size) { return allocateInClass(size, sizeClass(size), true); }
  /// A block of at least `size` bytes that starts a cache line (see
  /// Alignment above). \throws std::bad_alloc.
  static void* allocateDefault(std::size_t size) { return allocateInClass(size, sizeClass(size), false); }
  /// Frees a block of allocate() or allocateDefault(); `size` must be the
  /// size given to it. Never throws.
  static void deallocate(void* block, std::size_t size) noexcept {
    deallocateWithHeader(block, static_cast<char*>(block) + headerOffset(size));
  }

  // The size arithmetic, inline so that a caller whose size the compiler
  // knows (a coroutine frame's, an object's) pays nothing for it; the rest
  // is out of line. A block of class c holds 2^(c + kMinClassShift) bytes,
  // its last kHeaderBytes the allocator's own; larger requests are large
  // blocks, their header after the request rounded up to kHeaderBytes.
  static constexpr std::size_t kHeaderBytes = 16;
  static constexpr std::size_t kMinClassShift = 6;  // 64-byte blocks, header included
  static constexpr std::size_t kSizeClasses = 7;    // up to 4 KiB
  /// The class of a request of `size` bytes (0 or more): the smallest block
  /// that holds it and the header; kSizeClasses for a large block.
  static constexpr std::size_t sizeClass(std::size_t size) noexcept {
    const auto shift = static_cast<std::size_t>(std::bit_width(size + kHeaderBytes - 1));
    if (shift <= kMinClassShift) return 0;
    return shift - kMinClassShift < kSizeClasses ? shift - kMinClassShift : kSizeClasses;
  }
  /// Where the header of a block given `size` sits, from the block's start.
  static constexpr std::size_t headerOffset(std::size_t size) noexcept {
    const std::size_t c = sizeClass(size);
    return c < kSizeClasses ? (std::size_t{1} << (c + kMinClassShift)) - kHeaderBytes
                            : (size + kHeaderBytes - 1) & ~(kHeaderBytes - 1);
  }
  /// allocate() and allocateDefault() (`aligned` false) with the class of
  /// `size` computed: `cls` is sizeClass(size). \throws std::bad_alloc.
  static void* allocateInClass(std::size_t size, std::size_t cls, bool aligned);
  /// deallocate() with the block's header found (headerOffset()). Never throws.
  static void deallocateWithHeader(void* block, void* header) noexcept;
  /// After a burst (many more blocks alive than the caches keep) has ended:
  /// drops the calling thread's spare blocks and asks the C library to give
  /// the free memory of its heap back to the system (malloc_trim() with
  /// glibc; nothing elsewhere), so that a process whose burst is over does
  /// not keep its peak. Cost: one pass over the C library's free lists (a
  /// few milliseconds after a burst of a million blocks); call it rarely.
  /// Never blocks on coexec's locks; never throws.
  static void releaseFreeMemory() noexcept;
  /// Blocks of `size`'s class, of allocate()'s kind, in the calling
  /// thread's free list and spare reserve (at most kMaxCachedPerClass; 0 for
  /// sizes above the largest class). For tests and diagnostics. Never throws.
  static std::size_t cachedBlocks(std::size_t size) noexcept;
  /// Blocks of `size`'s class, of allocate()'s kind, that other threads
  /// freed and the calling thread's cache has not taken back yet (at most
  /// kMaxReturnedPerClass). For tests and diagnostics. Never throws.
  static std::size_t returnedBlocks(std::size_t size) noexcept;
};

/// Base for types whose instances come from the FrameAllocator. A type that
/// is not over-aligned gets a default-aligned block (allocateDefault()) and is
/// freed by the sized form. An over-aligned one (up to
/// FrameAllocator::kMaxAlignment) goes through the aligned forms C++17 calls
/// for it; in class scope a delete-expression (and the deallocation when a
/// constructor throws) picks the unsized aligned form, so its block records
/// its own size: the object sits `alignment` bytes into a block of
/// allocate(size + alignment), aligned to its size, whose first word is that
/// size. Over-aligned instances are rare (a task state of an over-aligned
/// result or capture); the padding is their cost.
struct Recycled {
  static void* operator new(std::size_t size) { return FrameAllocator::allocateDefault(size); }
  static void operator delete(void* object, std::size_t size) noexcept { FrameAllocator::deallocate(object, size); }

  /// \throws std::bad_alloc, also for an alignment above kMaxAlignment.
  static void* operator new(std::size_t size, std::align_val_t alignment) {
    const auto offset = static_cast<std::size_t>(alignment);
    if (offset > FrameAllocator::kMaxAlignment) throw std::bad_alloc();
    const std::size_t blockSize = size + offset;
    void* block = FrameAllocator::allocate(blockSize);  // aligned to at least blockSize's power of two >= offset
    *static_cast<std::size_t*>(block) = blockSize;
    return static_cast<char*>(block) + offset;
  }
  static void operator delete(void* object, std::align_val_t alignment) noexcept {
    void* block = static_cast<char*>(object) - static_cast<std::size_t>(alignment);
    FrameAllocator::deallocate(block, *static_cast<std::size_t*>(block));
  }
};

}  // namespace coexec::detail
