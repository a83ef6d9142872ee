#include "coexec/detail/FrameAllocator.h"

#include <array>
#include <new>

namespace coexec::detail {
namespace {

constexpr std::size_t kMinClassShift = 6;   // 64 bytes
constexpr std::size_t kMaxClassShift = 12;  // 4 KiB
constexpr std::size_t kClasses = kMaxClassShift - kMinClassShift + 1;

struct FreeBlock {
  FreeBlock* next;
};

/// Index of the smallest class that holds `size`, or kClasses if none does.
std::size_t classOf(std::size_t size) noexcept {
  std::size_t shift = kMinClassShift;
  while (shift <= kMaxClassShift && (std::size_t{1} << shift) < size) ++shift;
  return shift - kMinClassShift;
}

// Set once this thread's cache is destroyed (thread exit): blocks freed after
// that go straight to the global allocator. Trivially destructible on purpose.
thread_local bool cacheGone = false;

struct ThreadCache {
  std::array<FreeBlock*, kClasses> heads{};
  std::array<std::size_t, kClasses> counts{};
  ~ThreadCache() {
    cacheGone = true;
    for (FreeBlock* head : heads) {
      while (head) {
        FreeBlock* next = head->next;
        ::operator delete(head);
        head = next;
      }
    }
  }
};

thread_local ThreadCache cache;

}  // namespace

void* FrameAllocator::allocate(std::size_t size) {
  const std::size_t c = classOf(size);
  if (c >= kClasses || cacheGone) return ::operator new(size);
  if (FreeBlock* block = cache.heads[c]) {
    cache.heads[c] = block->next;
    --cache.counts[c];
    return block;
  }
  return ::operator new(std::size_t{1} << (c + kMinClassShift));
}

void FrameAllocator::deallocate(void* block, std::size_t size) noexcept {
  const std::size_t c = classOf(size);
  if (c >= kClasses || cacheGone || cache.counts[c] >= kMaxCachedPerClass) {
    ::operator delete(block);
    return;
  }
  auto* free = static_cast<FreeBlock*>(block);
  free->next = cache.heads[c];
  cache.heads[c] = free;
  ++cache.counts[c];
}

}  // namespace coexec::detail
