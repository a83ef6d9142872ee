#include "coexec/detail/FrameAllocator.h"

#include <array>
#include <mutex>
#include <new>

namespace coexec::detail {
namespace {

// Blocks are recycled through a per-thread cache of free lists (no
// synchronisation) backed by a process-wide depot that moves whole batches
// between threads. A frame is often allocated on one thread and freed on
// another (a coroutine started on a worker and finished on the caller): the
// freeing thread's list overflows into the depot, and the allocating thread's
// empty list refills from it, so steady-state traffic between threads never
// reaches the global allocator.

constexpr std::size_t kMinClassShift = 6;   // 64 bytes
constexpr std::size_t kMaxClassShift = 12;  // 4 KiB
constexpr std::size_t kClasses = kMaxClassShift - kMinClassShift + 1;
constexpr std::size_t kBatch = FrameAllocator::kMaxCachedPerClass / 2;
constexpr std::size_t kMaxDepotBatches = 256;

struct FreeBlock {
  FreeBlock* next;
  FreeBlock* nextBatch;  // only in the first block of a batch in the depot
};

/// Index of the smallest class that holds `size`, or kClasses if none does.
std::size_t classOf(std::size_t size) noexcept {
  std::size_t shift = kMinClassShift;
  while (shift <= kMaxClassShift && (std::size_t{1} << shift) < size) ++shift;
  return shift - kMinClassShift;
}

void freeChain(FreeBlock* block) noexcept {
  while (block) {
    FreeBlock* next = block->next;
    ::operator delete(block);
    block = next;
  }
}

/// Batches of kBatch free blocks per class, shared by all threads.
class Depot {
 public:
  /// Takes a chain of exactly kBatch blocks; false if the depot is full.
  bool put(std::size_t c, FreeBlock* batch) noexcept {
    std::lock_guard lock(mutex_);
    if (counts_[c] >= kMaxDepotBatches) return false;
    batch->nextBatch = batches_[c];
    batches_[c] = batch;
    ++counts_[c];
    return true;
  }
  /// A chain of kBatch blocks, or null.
  FreeBlock* take(std::size_t c) noexcept {
    std::lock_guard lock(mutex_);
    FreeBlock* batch = batches_[c];
    if (batch) {
      batches_[c] = batch->nextBatch;
      --counts_[c];
    }
    return batch;
  }

 private:
  std::mutex mutex_;
  std::array<FreeBlock*, kClasses> batches_{};  // guarded by mutex_
  std::array<std::size_t, kClasses> counts_{};  // guarded by mutex_
};

Depot& depot() noexcept {
  static Depot* instance = new Depot;  // never destroyed: threads may free blocks during static destruction
  return *instance;
}

// Set once this thread's cache is destroyed (thread exit): blocks freed after
// that go straight to the global allocator. Trivially destructible on purpose.
thread_local bool cacheGone = false;

struct ThreadCache {
  std::array<FreeBlock*, kClasses> heads{};
  std::array<std::size_t, kClasses> counts{};

  /// Moves kBatch blocks from the local list to the depot (or frees them).
  void spill(std::size_t c) noexcept {
    FreeBlock* batch = heads[c];
    FreeBlock* last = batch;
    for (std::size_t i = 1; i < kBatch; ++i) last = last->next;
    heads[c] = last->next;
    counts[c] -= kBatch;
    last->next = nullptr;
    if (!depot().put(c, batch)) freeChain(batch);
  }

  ~ThreadCache() {
    cacheGone = true;
    for (std::size_t c = 0; c < kClasses; ++c) {
      while (counts[c] >= kBatch) spill(c);  // leave full batches for other threads
      freeChain(heads[c]);
    }
  }
};

thread_local ThreadCache cache;

}  // namespace

void* FrameAllocator::allocate(std::size_t size) {
  const std::size_t c = classOf(size);
  if (c >= kClasses || cacheGone) return ::operator new(size);
  if (!cache.heads[c]) {
    if (FreeBlock* batch = depot().take(c)) {
      cache.heads[c] = batch;
      cache.counts[c] = kBatch;
    }
  }
  if (FreeBlock* block = cache.heads[c]) {
    cache.heads[c] = block->next;
    --cache.counts[c];
    return block;
  }
  return ::operator new(std::size_t{1} << (c + kMinClassShift));
}

void FrameAllocator::deallocate(void* block, std::size_t size) noexcept {
  const std::size_t c = classOf(size);
  if (c >= kClasses || cacheGone) {
    ::operator delete(block);
    return;
  }
  auto* free = static_cast<FreeBlock*>(block);
  free->next = cache.heads[c];
  cache.heads[c] = free;
  if (++cache.counts[c] > kMaxCachedPerClass) cache.spill(c);
}

}  // namespace coexec::detail
