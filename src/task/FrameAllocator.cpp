// SPDX-License-Identifier: BSL-1.0
#include "coexec/detail/FrameAllocator.h"

#if defined(COEXEC_FAULT_INJECTION)
#include "coexec/detail/FaultInjection.h"
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "foundation/CoarseClock.h"
#include "foundation/NoDestructor.h"

namespace coexec::detail {
namespace {

// Every block carries a small header naming the cache that allocated it. A
// block freed on its own thread goes back to that thread's free list; a block
// freed on another thread (a frame started on a worker and finished by the
// caller, a task state created by a producer and dropped by a worker) is
// pushed onto its owner's lock-free "returned" stack, which the owner drains
// when its list runs dry. So blocks always flow back to the thread that needs
// them and steady-state traffic between threads never reaches the global
// allocator, whatever the mix of threads that free them.
//
// The caps. Per class, a cache keeps at most kMaxCachedPerClass blocks in its
// free list and spares together, and at most kMaxReturnedPerClass on its
// returned stack. The first is the owner's own count (`counts +
// spareCounts`; the same-thread free compares `counts` with `limits`, one
// number, as it always did). The second is kept by credits: a thread that
// frees a block of another thread's cache takes one (lock-free) and pushes the
// block, or, finding none left, frees the block to the global allocator; the
// owner gives back one credit per block it takes off the stack. Two caps, not
// one shared: other threads cannot see the owner's list, and a producer whose
// consumers free up to the cap's worth of its blocks at once (execute() with a
// thousand tasks in flight) must find room for all of them on the stack while
// the list still holds those it will hand out next.
//
// Caches are never destroyed: when a thread exits, its cache is parked and
// the next new thread adopts it (with whatever was returned to it meanwhile),
// so a late cross-thread free can always reach its owner. A parked cache
// stays within both caps: its credits are all a late free can use.

// The classes and the header's size are FrameAllocator's (its inline size
// arithmetic computes the class of a request and where its header sits).
constexpr std::size_t kMinClassShift = FrameAllocator::kMinClassShift;  // 64-byte blocks, header included
constexpr std::size_t kClasses = FrameAllocator::kSizeClasses;
constexpr std::size_t kMaxClassShift = kMinClassShift + kClasses - 1;  // 4 KiB
static_assert(kMaxClassShift == 12);
// Each size class has two slots in a cache: one for blocks aligned to their
// size (allocate()), one for blocks aligned as ::operator new(size) aligns
// them (allocateDefault()). A slot's blocks are alike, so any block on its
// free list serves any request of the slot; a slot index is the class, plus
// kClasses for the default-aligned slot. The two kinds differ only in what
// the global allocator is asked for when a slot runs dry: an aligned request
// (memalign with glibc) for the first, a plain one (which the C library's
// per-thread caches serve, at a fraction of the cost) for the second.
constexpr std::size_t kSlots = 2 * kClasses;
// Block layout: [payload ... | Header]. The header sits in the last kHeader
// bytes of the block, found from the payload and the size
// (FrameAllocator::headerOffset()), so the payload starts the block. An
// aligned block of class c is aligned to its own size (2^(c +
// kMinClassShift)), an aligned large block to kLargeAlign.
// An object of n bytes has an alignment that is a power of two no greater
// than n, and its block holds n + kHeader bytes rounded up to a power of two,
// so the block's alignment is a multiple of the object's, up to kLargeAlign:
// coroutine frames (whose alignment C++20 does not pass to operator new) and
// over-aligned objects come out aligned. A default-aligned block is aligned to
// a cache line (see kLinePad), more than its header needs.
constexpr std::size_t kHeader = FrameAllocator::kHeaderBytes;
constexpr std::size_t kLargeAlign = FrameAllocator::kMaxAlignment;
constexpr std::size_t kMaxLocal = FrameAllocator::kMaxCachedPerClass;
constexpr std::size_t kMaxReturned = FrameAllocator::kMaxReturnedPerClass;
// The returned blocks all fit in an empty free list (see Cache::reclaim).
static_assert(kMaxReturned <= kMaxLocal);
// When a class runs dry (free list, returned stack and spares empty), the
// cache takes spare blocks with the one it needs: an eighth of the blocks of
// the class it has in circulation now (live or cached), at least kMinSpares,
// and no more than fit under kMaxCachedPerClass. They wait in a reserve used
// only when the list and the returned stack are empty again, so a peak
// slightly above the last one (a thread preempted at the wrong moment) finds
// its block there, and blocks coming back are reused first.
constexpr std::size_t kMinSpares = 3;
// A burst: this many blocks of one class in circulation at once (16 MiB of
// 256-byte task states). When it is over (back under kBurstOver), its memory
// goes back to the system (FrameAllocator::releaseFreeMemory()): a process
// whose burst is over does not keep its peak (docs/performance.md, W6).
constexpr std::size_t kBigBurst = 64 * 1024;
constexpr std::size_t kBurstOver = kMaxLocal + kMaxReturned;  // all a cache may hold: the rest is the burst
constexpr std::int64_t kTrimInterval = 1'000'000'000;  // ns

struct Cache;

struct alignas(16) Header {
  Cache* owner;        // null: from the global allocator, freed to it
  std::uint32_t slot;  // a slot (see kSlots), or kLargeAligned / kLargeDefault
  std::uint32_t pad;   // a default-aligned slot's block: its offset in its allocation (newClassBlock())
};
static_assert(sizeof(Header) == kHeader);
static_assert(__STDCPP_DEFAULT_NEW_ALIGNMENT__ >= alignof(Header));
constexpr std::uint32_t kLargeAligned = kSlots;      // a large block from allocate()
constexpr std::uint32_t kLargeDefault = kSlots + 1;  // a large block from allocateDefault()

struct FreeBlock {
  FreeBlock* next;
};

constexpr std::size_t classBytes(std::size_t c) noexcept { return std::size_t{1} << (c + kMinClassShift); }

/// The slot of class `c` (< kClasses) for blocks aligned to their size or not.
constexpr std::size_t slotOf(std::size_t c, bool aligned) noexcept { return aligned ? c : c + kClasses; }
constexpr bool isAlignedSlot(std::size_t s) noexcept { return s < kClasses; }
constexpr std::size_t slotBytes(std::size_t s) noexcept { return classBytes(s % kClasses); }

/// The payload size of a large block rounded up so that its header is aligned.
constexpr std::size_t largePayload(std::size_t size) noexcept { return (size + kHeader - 1) & ~(kHeader - 1); }

// A default-aligned block still starts a cache line, so that blocks one
// thread hands to another (a task state made by a producer and run by a
// worker) share no line with their neighbours. It is carved from a plain
// allocation kLinePad bytes larger (a plain request, which the C library's
// per-thread caches serve; an aligned one costs several times as much), and
// its header's `pad` records where in it the block starts.
constexpr std::size_t kCacheLine = 64;
constexpr std::size_t kLinePad =
    __STDCPP_DEFAULT_NEW_ALIGNMENT__ < kCacheLine ? kCacheLine - __STDCPP_DEFAULT_NEW_ALIGNMENT__ : 0;

Header* blockHeader(void* block, std::size_t bytes) noexcept {
  return reinterpret_cast<Header*>(static_cast<char*>(block) + bytes - kHeader);
}

/// A block of slot `s` from the global allocator, aligned to its size (an
/// aligned slot) or to a cache line; null when out of memory.
FreeBlock* newClassBlock(std::size_t s) noexcept {
  const std::size_t bytes = slotBytes(s);
  if (isAlignedSlot(s)) return static_cast<FreeBlock*>(::operator new(bytes, std::align_val_t{bytes}, std::nothrow));
  void* const raw = ::operator new(bytes + kLinePad, std::nothrow);
  if (raw == nullptr) return nullptr;
  const auto address = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t start = (address + kCacheLine - 1) & ~(kCacheLine - 1);  // at most kLinePad further
  void* const block = static_cast<char*>(raw) + (start - address);
  blockHeader(block, bytes)->pad = static_cast<std::uint32_t>(start - address);  // kept: allocateBlock() writes the rest
  return static_cast<FreeBlock*>(block);
}
void deleteClassBlock(void* block, std::size_t s) noexcept {
  const std::size_t bytes = slotBytes(s);
  if (isAlignedSlot(s)) {
    ::operator delete(block, std::align_val_t{bytes});
    return;
  }
  const std::uint32_t pad = blockHeader(block, bytes)->pad;
  ::operator delete(static_cast<char*>(block) - pad);
}

struct Cache {
  Cache() noexcept {
    limits.fill(kMaxLocal);
    for (auto& credit : credits)
      credit.store(kMaxReturned, std::memory_order_relaxed);  // published with the cache itself
  }

  // Touched only by the owning thread (a parked cache's new owner receives
  // them through the ParkedCaches mutex). Per slot: counts + spareCounts <=
  // kMaxLocal, and limits == kMaxLocal - spareCounts.
  std::array<FreeBlock*, kSlots> heads{};
  std::array<std::size_t, kSlots> counts{};  // blocks in the free list
  std::array<std::size_t, kSlots> limits{};  // most blocks the free list may hold now
  std::array<FreeBlock*, kSlots> spares{};   // see kMinSpares
  std::array<std::size_t, kSlots> spareCounts{};

  // Shared with the threads that free this cache's blocks (on lines of their
  // own, so that their pushes do not disturb the owner's fields).
  // Blocks other threads freed; pushed by anyone, taken whole by the owner.
  alignas(64) std::array<std::atomic<FreeBlock*>, kSlots> returned{};
  // Places left on the returned stack: kMaxReturned minus the blocks on it or
  // being pushed. A pusher takes one (acquire) before it pushes; the owner
  // gives them back (release) after it has taken the blocks off. So a push
  // that uses a given-back place comes after the exchange that emptied it,
  // and the stack never holds more than kMaxReturned blocks.
  std::array<std::atomic<std::size_t>, kSlots> credits{};
  // Blocks of the slot from this cache that exist, live or cached: sizes
  // the spares. Relaxed: an estimate that no other data depends on.
  std::array<std::atomic<std::size_t>, kSlots> owned{};
  // Set when `owned` reached kBigBurst; taken (exchange) by the free that
  // brings it back under kBurstOver, which then gives the burst's memory
  // back (see deallocate()).
  std::array<std::atomic<bool>, kSlots> bigBurst{};
  // When the end of a burst of the slot last gave memory back (the coarse
  // clock's nanoseconds), and the peak of that burst; relaxed: a rate limit.
  std::array<std::atomic<std::int64_t>, kSlots> lastTrim{};
  std::array<std::atomic<std::size_t>, kSlots> trimmedPeak{};
  // The most blocks of the slot in circulation since the last burst ended
  // (written by the owner in takeSpares(), taken by the burst's end).
  std::array<std::atomic<std::size_t>, kSlots> burstPeak{};

  /// A block of slot `s` freed on a thread other than the owner's: onto the
  /// returned stack if there is a place left, else false (the caller frees it
  /// to the global allocator).
  bool tryReturn(std::size_t s, FreeBlock* block) noexcept {
    std::size_t places = credits[s].load(std::memory_order_relaxed);
    do {
      if (places == 0) return false;
    } while (
        !credits[s].compare_exchange_weak(places, places - 1, std::memory_order_acquire, std::memory_order_relaxed));
    FreeBlock* head = returned[s].load(std::memory_order_relaxed);
    do {
      block->next = head;
      // release: the owner that takes the stack sees `next` and the block.
    } while (!returned[s].compare_exchange_weak(head, block, std::memory_order_release, std::memory_order_relaxed));
    return true;
  }

  /// The list of slot `s` is empty: moves the returned blocks to it and gives
  /// their places back. Spares that no longer fit under kMaxLocal beside them
  /// go back to the global allocator.
  void reclaim(std::size_t s) noexcept {
    FreeBlock* block = returned[s].exchange(nullptr, std::memory_order_acquire);
    if (block == nullptr) return;
    std::size_t moved = 0;
    while (block) {
      FreeBlock* next = block->next;
      block->next = heads[s];
      heads[s] = block;
      ++moved;
      block = next;
    }
    counts[s] = moved;  // the list was empty; moved <= kMaxReturned <= kMaxLocal
    credits[s].fetch_add(moved, std::memory_order_release);
    std::size_t dropped = 0;
    while (counts[s] + spareCounts[s] > kMaxLocal) {
      FreeBlock* spare = spares[s];
      spares[s] = spare->next;
      --spareCounts[s];
      deleteClassBlock(spare, s);
      ++dropped;
    }
    if (dropped > 0) {
      limits[s] = kMaxLocal - spareCounts[s];
      owned[s].fetch_sub(dropped, std::memory_order_relaxed);
    }
  }

  /// The slot ran dry and the caller's block came from the global
  /// allocator: takes spares into the reserve (see kMinSpares).
  void takeSpares(std::size_t s) noexcept {
    const std::size_t room = kMaxLocal - counts[s] - spareCounts[s];
    const std::size_t wanted = std::min(room, std::max(kMinSpares, owned[s].load(std::memory_order_relaxed) / 8));
    std::size_t taken = 0;
    for (; taken < wanted; ++taken) {
      FreeBlock* extra = newClassBlock(s);
      if (extra == nullptr) break;
      extra->next = spares[s];
      spares[s] = extra;
    }
    spareCounts[s] += taken;
    limits[s] = kMaxLocal - spareCounts[s];
    const std::size_t now = owned[s].fetch_add(1 + taken, std::memory_order_relaxed) + 1 + taken;  // the caller's and the spares
    if (now >= kBigBurst && !bigBurst[s].load(std::memory_order_relaxed)) bigBurst[s].store(true, std::memory_order_relaxed);
    if (now > burstPeak[s].load(std::memory_order_relaxed)) burstPeak[s].store(now, std::memory_order_relaxed);
  }

  /// Gives the spare reserve of slot `s` back to the global allocator.
  void dropSpares(std::size_t s) noexcept {
    const std::size_t dropped = spareCounts[s];
    while (FreeBlock* spare = spares[s]) {
      spares[s] = spare->next;
      deleteClassBlock(spare, s);
    }
    spareCounts[s] = 0;
    limits[s] = kMaxLocal;
    owned[s].fetch_sub(dropped, std::memory_order_relaxed);
  }

  /// Blocks of slot `s` on the returned stack. Owner only: only the owner
  /// takes blocks off, so the chain from the head stays intact while it is
  /// walked; acquire (as in reclaim) makes each block's `next` visible.
  [[nodiscard]] std::size_t returnedCount(std::size_t s) const noexcept {
    std::size_t n = 0;
    for (FreeBlock* b = returned[s].load(std::memory_order_acquire); b != nullptr; b = b->next)
      ++n;
    return n;
  }
};

/// Caches of exited threads, waiting to be adopted.
class ParkedCaches {
 public:
  void park(Cache* cache) {
    std::lock_guard lock(mutex_);
    parked_.push_back(cache);
  }
  Cache* adopt() {
    std::lock_guard lock(mutex_);
    if (parked_.empty()) return nullptr;
    Cache* cache = parked_.back();
    parked_.pop_back();
    return cache;
  }

 private:
  std::mutex mutex_;
  std::vector<Cache*> parked_;
};

ParkedCaches& parkedCaches() {
  static NoDestructor<ParkedCaches> instance;  // never destroyed: threads exit during static destruction
  return instance.get();
}

// Set once this thread's cache is parked (thread exit): later allocations on
// this thread come from the global allocator. Trivially destructible.
thread_local bool cacheGone = false;

// This thread's cache once it has one, until it is parked: what the hot
// paths read (constinit and trivially destructible: a plain thread-local
// load, with no initialisation guard or wrapper call, which the
// destructor-bearing ThreadCache below would need on every access).
constinit thread_local Cache* tlsCache = nullptr;

struct ThreadCache {
  Cache* cache = nullptr;
  Cache& get() {
    if (!cache) {
      cache = parkedCaches().adopt();
      if (!cache) cache = new Cache;
    }
    return *cache;
  }
  ~ThreadCache() {
    cacheGone = true;
    tlsCache = nullptr;
    if (cache) {
      try {
        parkedCaches().park(cache);
      } catch (...) {
        // Out of memory while exiting: the cache (and its blocks) stay reachable
        // by nobody; the blocks were memory the process already had.
      }
    }
  }
};

thread_local ThreadCache threadCache;

/// The calling thread's cache, set up on its first use; null once the thread
/// is exiting (its cache parked). The slow path of allocateBlock().
[[gnu::noinline]] Cache* attachCache() {
  if (cacheGone) return nullptr;
  tlsCache = &threadCache.get();
  return tlsCache;
}

/// Asks the C library to give its free memory back to the system: with
/// glibc, also the free pages in the middle of its heap, which its automatic
/// trim (the top of the heap only) leaves when a few live blocks sit above
/// them. Elsewhere nothing.
void trimHeap() noexcept {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

/// The header of the block whose payload is `payload`, given to allocate() with
/// `size`: the last kHeader bytes of the block (see kHeader).
Header* headerOf(void* payload, std::size_t size) noexcept {
  return reinterpret_cast<Header*>(static_cast<char*>(payload) + FrameAllocator::headerOffset(size));
}

}  // namespace

namespace {
/// A block for a request of `size` bytes of class `c` (FrameAllocator::sizeClass()).
void* allocateBlock(std::size_t size, std::size_t c, bool aligned) {
  Cache* const mine = c < kClasses ? (tlsCache != nullptr ? tlsCache : attachCache()) : nullptr;
  if (mine == nullptr) {  // a large block, or a thread that is exiting
    void* block = nullptr;
    std::uint32_t slot = 0;
    if (c < kClasses) {
      slot = static_cast<std::uint32_t>(slotOf(c, aligned));
      block = newClassBlock(slot);
      if (block == nullptr) throw std::bad_alloc();
    } else if (aligned) {
      slot = kLargeAligned;
      block = ::operator new(largePayload(size) + kHeader, std::align_val_t{kLargeAlign});
    } else {
      slot = kLargeDefault;
      block = ::operator new(largePayload(size) + kHeader);
    }
    Header* header = headerOf(block, size);
    header->owner = nullptr;
    header->slot = slot;
    return block;
  }
  const std::size_t s = slotOf(c, aligned);
  Cache& cache = *mine;
  if (!cache.heads[s]) cache.reclaim(s);
  void* block = nullptr;
  if (FreeBlock* head = cache.heads[s]) {
    cache.heads[s] = head->next;
    --cache.counts[s];
    block = head;
  } else if (FreeBlock* spare = cache.spares[s]) {
    cache.spares[s] = spare->next;
    --cache.spareCounts[s];
    ++cache.limits[s];
    block = spare;
  } else {
    // The slot ran dry: more blocks are live than the cache holds.
    block = newClassBlock(s);
    if (block == nullptr) throw std::bad_alloc();
    cache.takeSpares(s);
  }
  Header* header = blockHeader(block, classBytes(c));
  header->owner = &cache;
  header->slot = static_cast<std::uint32_t>(s);
  return block;
}
}  // namespace

void* FrameAllocator::allocateInClass(std::size_t size, std::size_t c, bool aligned) {
#if defined(COEXEC_FAULT_INJECTION)
  FaultInjection::onFrameAllocate();  // may throw std::bad_alloc (tests only)
  void* const block = allocateBlock(size, c, aligned);
  FaultInjection::onFrameAllocated(block);
  return block;
#else
  return allocateBlock(size, c, aligned);
#endif
}

std::size_t FrameAllocator::cachedBlocks(std::size_t size) noexcept {
  const std::size_t c = FrameAllocator::sizeClass(size);
  if (c >= kClasses || tlsCache == nullptr) return 0;
  return tlsCache->counts[c] + tlsCache->spareCounts[c];  // slotOf(c, true) == c
}

void FrameAllocator::releaseFreeMemory() noexcept {
  if (Cache* cache = tlsCache) {
    for (std::size_t s = 0; s < kSlots; ++s)
      if (cache->spareCounts[s] > 0) cache->dropSpares(s);
  }
  trimHeap();
}

std::size_t FrameAllocator::returnedBlocks(std::size_t size) noexcept {
  const std::size_t c = FrameAllocator::sizeClass(size);
  if (c >= kClasses || tlsCache == nullptr) return 0;
  return tlsCache->returnedCount(c);
}

void FrameAllocator::deallocateWithHeader(void* block, void* at) noexcept {
#if defined(COEXEC_FAULT_INJECTION)
  FaultInjection::onFrameDeallocate(block);
#endif
  Header* header = static_cast<Header*>(at);
  Cache* owner = header->owner;
  const std::size_t s = header->slot;
  if (owner == nullptr) {
    if (s < kSlots)
      deleteClassBlock(block, s);
    else if (s == kLargeAligned)
      ::operator delete(block, std::align_val_t{kLargeAlign});
    else
      ::operator delete(block);
    return;
  }
  auto* free = static_cast<FreeBlock*>(block);
  if (owner == tlsCache) {  // null on a thread without a cache or exiting: never an owner
    if (owner->counts[s] < owner->limits[s]) {
      free->next = owner->heads[s];
      owner->heads[s] = free;
      ++owner->counts[s];
      return;
    }
    // The list is full: a burst is receding, so its spares go too. They
    // were taken last, so they sit at the top of the allocator's heap, where
    // they would keep everything the burst frees below them from going back
    // to the system.
    if (owner->spareCounts[s] > 0) owner->dropSpares(s);
  } else if (owner->tryReturn(s, free)) {
    return;
  }
  // Over the cap: a burst is over, give the surplus back.
  const std::size_t left = owner->owned[s].fetch_sub(1, std::memory_order_relaxed) - 1;
  deleteClassBlock(block, s);
  // The end of a big burst: the C library's heap is full of free memory that
  // a few live blocks above it keep from going back to the system on its
  // own. Once per burst, on whichever thread frees the block that ends it.
  if (left <= kBurstOver && owner->bigBurst[s].load(std::memory_order_relaxed) &&
      owner->bigBurst[s].exchange(false, std::memory_order_relaxed)) {
    // A program that repeats its bursts back to back keeps their memory
    // between them (giving it back only to fault it in again would cost more
    // than it saves): within a second of the last trim, a burst no larger
    // than the one trimmed then keeps its memory for the next. A larger one
    // is given back at once: what it leaves is not what the last trim left.
    const std::size_t peak = owner->burstPeak[s].exchange(0, std::memory_order_relaxed);
    const std::int64_t now = coarseNowNanos();
    if (now - owner->lastTrim[s].load(std::memory_order_relaxed) >= kTrimInterval ||
        peak > owner->trimmedPeak[s].load(std::memory_order_relaxed)) {
      owner->lastTrim[s].store(now, std::memory_order_relaxed);
      owner->trimmedPeak[s].store(peak, std::memory_order_relaxed);
      trimHeap();
    }
  }
}

}  // namespace coexec::detail
