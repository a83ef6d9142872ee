// SPDX-License-Identifier: BSL-1.0
#pragma once

// The FrameAllocatorTest executable replaces the global operator new and
// delete with counting versions (CountingGlobalNew.cpp); its tests count
// the global allocations made while an AllocationCount lives.

#include <array>
#include <atomic>
#include <cstddef>
#include <string>

namespace coexec::test {

/// While true, every global allocation and deallocation, on any thread, is
/// counted. Relaxed is enough: the tests switch it on and off on one thread
/// and read the counters after the counted work has been joined with it (a
/// Future or syncWait returning, a thread joined).
extern std::atomic<bool> gCounting;
extern std::atomic<std::size_t> gAllocations;
extern std::atomic<std::size_t> gDeallocations;
/// The sizes of the first counted allocations, for the failure message.
extern std::array<std::atomic<std::size_t>, 8> gFirstSizes;

/// Counts the global allocations and deallocations made, on any thread, while
/// it lives.
class AllocationCount {
 public:
  AllocationCount() {
    gAllocations = 0;
    gDeallocations = 0;
    for (auto& size : gFirstSizes)
      size = 0;
    gCounting = true;
  }
  AllocationCount(const AllocationCount&) = delete;
  AllocationCount& operator=(const AllocationCount&) = delete;
  ~AllocationCount() { stop(); }

  void stop() { gCounting = false; }
  [[nodiscard]] std::size_t allocations() const { return gAllocations.load(); }
  [[nodiscard]] std::size_t deallocations() const { return gDeallocations.load(); }
  /// "sizes of the first allocations: 512 96 ..." for a failure message.
  [[nodiscard]] std::string describe() const {
    std::string text = "sizes of the first counted allocations:";
    for (std::size_t i = 0; i < gFirstSizes.size() && i < allocations(); ++i) {
      text += ' ' + std::to_string(gFirstSizes[i].load());
    }
    return text;
  }
};

}  // namespace coexec::test
