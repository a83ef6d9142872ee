#include "coexec/detail/FrameAllocator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

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
// Caches are never destroyed: when a thread exits, its cache is parked and
// the next new thread adopts it (with whatever was returned to it meanwhile),
// so a late cross-thread free can always reach its owner.

constexpr std::size_t kMinClassShift = 6;   // 64-byte blocks, header included
constexpr std::size_t kMaxClassShift = 12;  // 4 KiB
constexpr std::size_t kClasses = kMaxClassShift - kMinClassShift + 1;
constexpr std::size_t kHeader = 16;  // keeps the payload aligned to 16 (max_align_t)
// When a class runs dry (free list and return stack empty), the cache takes
// spare blocks with the one it needs: an eighth of what it has taken so far,
// at least kMinSpares (geometric growth, like a vector's). They wait in a
// reserve used only when the list and the return stack are empty again, so a
// peak slightly above the last one (a thread preempted at the wrong moment)
// finds its block there, and blocks coming back are reused first.
constexpr std::size_t kMinSpares = 3;

struct Cache;

struct alignas(16) Header {
  Cache* owner;       // null: from the global allocator, freed to it
  std::uint32_t cls;  // size class, or kClasses for a large block
  std::uint32_t unused;
};
static_assert(sizeof(Header) == kHeader);

struct FreeBlock {
  FreeBlock* next;
};

std::size_t classOf(std::size_t size) noexcept {
  std::size_t shift = kMinClassShift;
  while (shift <= kMaxClassShift && (std::size_t{1} << shift) < size)
    ++shift;
  return shift - kMinClassShift;
}

struct Cache {
  // Touched only by the owning thread.
  std::array<FreeBlock*, kClasses> heads{};
  std::array<std::size_t, kClasses> counts{};
  std::array<std::size_t, kClasses> taken{};   // blocks ever taken from the global allocator
  std::array<FreeBlock*, kClasses> reserve{};  // spares (see kMinSpares)
  // Blocks other threads freed; pushed by anyone, taken whole by the owner.
  std::array<std::atomic<FreeBlock*>, kClasses> returned{};

  void pushReturned(std::size_t c, FreeBlock* block) noexcept {
    FreeBlock* head = returned[c].load(std::memory_order_relaxed);
    do {
      block->next = head;
      // release: the owner that takes the stack sees `next` and the block.
    } while (!returned[c].compare_exchange_weak(head, block, std::memory_order_release, std::memory_order_relaxed));
  }
  /// Moves the returned blocks of class `c` to the local list.
  void reclaim(std::size_t c) noexcept {
    FreeBlock* block = returned[c].exchange(nullptr, std::memory_order_acquire);
    while (block) {
      FreeBlock* next = block->next;
      block->next = heads[c];
      heads[c] = block;
      ++counts[c];
      block = next;
    }
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
  static ParkedCaches* instance = new ParkedCaches;  // never destroyed: threads exit during static destruction
  return *instance;
}

// Set once this thread's cache is parked (thread exit): later allocations on
// this thread come from the global allocator. Trivially destructible.
thread_local bool cacheGone = false;

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

void* payloadOf(Header* header) noexcept { return reinterpret_cast<char*>(header) + kHeader; }
Header* headerOf(void* payload) noexcept { return reinterpret_cast<Header*>(static_cast<char*>(payload) - kHeader); }

}  // namespace

void* FrameAllocator::allocate(std::size_t size) {
  const std::size_t total = size + kHeader;
  const std::size_t c = classOf(total);
  if (c >= kClasses || cacheGone) {
    auto* header = static_cast<Header*>(::operator new(total));
    header->owner = nullptr;
    header->cls = static_cast<std::uint32_t>(kClasses);
    return payloadOf(header);
  }
  Cache& cache = threadCache.get();
  if (!cache.heads[c]) cache.reclaim(c);
  Header* header = nullptr;
  if (FreeBlock* block = cache.heads[c]) {
    cache.heads[c] = block->next;
    --cache.counts[c];
    header = reinterpret_cast<Header*>(block);
  } else if (FreeBlock* spare = cache.reserve[c]) {
    cache.reserve[c] = spare->next;
    header = reinterpret_cast<Header*>(spare);
  } else {
    // The class ran dry: more blocks are live than ever before. Take spares
    // into the reserve (see kMinSpares).
    const std::size_t blockSize = std::size_t{1} << (c + kMinClassShift);
    header = static_cast<Header*>(::operator new(blockSize));
    ++cache.taken[c];
    const std::size_t spares = std::max(kMinSpares, cache.taken[c] / 8);
    for (std::size_t i = 0; i < spares; ++i) {
      auto* extra = static_cast<FreeBlock*>(::operator new(blockSize, std::nothrow));
      if (extra == nullptr) break;
      extra->next = cache.reserve[c];
      cache.reserve[c] = extra;
      ++cache.taken[c];
    }
  }
  header->owner = &cache;
  header->cls = static_cast<std::uint32_t>(c);
  return payloadOf(header);
}

void FrameAllocator::deallocate(void* block, std::size_t /*size*/) noexcept {
  Header* header = headerOf(block);
  Cache* owner = header->owner;
  const std::size_t c = header->cls;
  if (owner == nullptr) {
    ::operator delete(header);
    return;
  }
  auto* free = reinterpret_cast<FreeBlock*>(header);
  if (!cacheGone && owner == threadCache.cache) {
    if (owner->counts[c] >= kMaxCachedPerClass) {
      ::operator delete(header);  // a burst is over: give the surplus back
      return;
    }
    free->next = owner->heads[c];
    owner->heads[c] = free;
    ++owner->counts[c];
    return;
  }
  owner->pushReturned(c, free);
}

}  // namespace coexec::detail
