// SPDX-License-Identifier: BSL-1.0
// The counting global operator new and delete of the FrameAllocatorTest
// executable (FrameAllocatorTestSupport.h): every form replaced, each
// allocation and deallocation counted while gCounting is true.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "FrameAllocatorTestSupport.h"

namespace coexec::test {

// The counters FrameAllocatorTestSupport.h declares (and states the rules of).
std::atomic<bool> gCounting{false};
std::atomic<std::size_t> gAllocations{0};
std::atomic<std::size_t> gDeallocations{0};
std::array<std::atomic<std::size_t>, 8> gFirstSizes{};

}  // namespace coexec::test

namespace {

using coexec::test::gAllocations;
using coexec::test::gCounting;
using coexec::test::gDeallocations;
using coexec::test::gFirstSizes;

void* countedAllocate(std::size_t size, std::size_t alignment = 0) {
  if (gCounting.load(std::memory_order_relaxed)) {
    const std::size_t n = gAllocations.fetch_add(1, std::memory_order_relaxed);
    if (n < gFirstSizes.size()) gFirstSizes[n].store(size, std::memory_order_relaxed);
  }
  if (size == 0) size = 1;
  void* block = nullptr;
  if (alignment > alignof(std::max_align_t)) {
    const std::size_t rounded = (size + alignment - 1) / alignment * alignment;
    block = std::aligned_alloc(alignment, rounded);
  } else {
    block = std::malloc(size);
  }
  return block;
}

void countedFree(void* block) noexcept {
  if (block == nullptr) return;
  if (gCounting.load(std::memory_order_relaxed)) gDeallocations.fetch_add(1, std::memory_order_relaxed);
  std::free(block);
}

void* allocateOrThrow(std::size_t size, std::size_t alignment = 0) {
  void* block = countedAllocate(size, alignment);
  if (block == nullptr) throw std::bad_alloc();
  return block;
}

}  // namespace

void* operator new(std::size_t size) { return allocateOrThrow(size); }
void* operator new[](std::size_t size) { return allocateOrThrow(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return countedAllocate(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return countedAllocate(size); }
void* operator new(std::size_t size, std::align_val_t a) { return allocateOrThrow(size, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t size, std::align_val_t a) {
  return allocateOrThrow(size, static_cast<std::size_t>(a));
}
void* operator new(std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return countedAllocate(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return countedAllocate(size, static_cast<std::size_t>(a));
}
void operator delete(void* block) noexcept { countedFree(block); }
void operator delete[](void* block) noexcept { countedFree(block); }
void operator delete(void* block, std::size_t) noexcept { countedFree(block); }
void operator delete[](void* block, std::size_t) noexcept { countedFree(block); }
void operator delete(void* block, const std::nothrow_t&) noexcept { countedFree(block); }
void operator delete[](void* block, const std::nothrow_t&) noexcept { countedFree(block); }
void operator delete(void* block, std::align_val_t) noexcept { countedFree(block); }
void operator delete[](void* block, std::align_val_t) noexcept { countedFree(block); }
void operator delete(void* block, std::size_t, std::align_val_t) noexcept { countedFree(block); }
void operator delete[](void* block, std::size_t, std::align_val_t) noexcept { countedFree(block); }
void operator delete(void* block, std::align_val_t, const std::nothrow_t&) noexcept { countedFree(block); }
void operator delete[](void* block, std::align_val_t, const std::nothrow_t&) noexcept { countedFree(block); }
