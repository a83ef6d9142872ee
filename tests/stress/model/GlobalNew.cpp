// SPDX-License-Identifier: BSL-1.0
// The counting global operator new of the stress driver (model/GlobalNew.h):
// every form (plain, array, nothrow, align_val_t, and their deletes, sized
// included) goes to malloc / aligned_alloc / free, and an allocation that
// globalNewFails() picks throws std::bad_alloc (the nothrow forms return
// null). Linked into stress_ModelStress only: replacing operator new is a
// decision of the whole binary.

#include <cstddef>
#include <cstdlib>
#include <new>

#include "model/GlobalNew.h"

namespace {

using coexec::stress::impl::globalNewCounters;
using coexec::stress::impl::globalNewFails;

[[maybe_unused]] const bool kInstalled = [] {
  globalNewCounters.installed.store(true, std::memory_order_relaxed);
  return true;
}();

void* allocate(std::size_t size, std::size_t alignment) noexcept {
  if (size == 0) size = 1;
  if (alignment > alignof(std::max_align_t)) {
    return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  }
  return std::malloc(size);
}

void* allocateOrThrow(std::size_t size, std::size_t alignment = 0) {
  if (globalNewFails()) throw std::bad_alloc();
  void* block = allocate(size, alignment);
  if (block == nullptr) throw std::bad_alloc();
  return block;
}

void* allocateOrNull(std::size_t size, std::size_t alignment = 0) noexcept {
  if (globalNewFails()) return nullptr;
  return allocate(size, alignment);
}

}  // namespace

void* operator new(std::size_t size) { return allocateOrThrow(size); }
void* operator new[](std::size_t size) { return allocateOrThrow(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return allocateOrNull(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return allocateOrNull(size); }
void* operator new(std::size_t size, std::align_val_t a) { return allocateOrThrow(size, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t size, std::align_val_t a) {
  return allocateOrThrow(size, static_cast<std::size_t>(a));
}
void* operator new(std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocateOrNull(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocateOrNull(size, static_cast<std::size_t>(a));
}
void operator delete(void* block) noexcept { std::free(block); }
void operator delete[](void* block) noexcept { std::free(block); }
void operator delete(void* block, std::size_t) noexcept { std::free(block); }
void operator delete[](void* block, std::size_t) noexcept { std::free(block); }
void operator delete(void* block, const std::nothrow_t&) noexcept { std::free(block); }
void operator delete[](void* block, const std::nothrow_t&) noexcept { std::free(block); }
void operator delete(void* block, std::align_val_t) noexcept { std::free(block); }
void operator delete[](void* block, std::align_val_t) noexcept { std::free(block); }
void operator delete(void* block, std::size_t, std::align_val_t) noexcept { std::free(block); }
void operator delete[](void* block, std::size_t, std::align_val_t) noexcept { std::free(block); }
void operator delete(void* block, std::align_val_t, const std::nothrow_t&) noexcept { std::free(block); }
void operator delete[](void* block, std::align_val_t, const std::nothrow_t&) noexcept { std::free(block); }
