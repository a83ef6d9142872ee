// SPDX-License-Identifier: BSL-1.0
#include "coexec/detail/FrameAllocator.h"

// The frame allocator: per-thread free lists by size class, blocks freed on
// another thread and returned to their owner, and the caps on what the caches
// keep. (SteadyStateAllocationTest.cpp: the promises the coroutine layer and
// the pool build on it.) The executable replaces the global operator
// new/delete with counting versions (CountingGlobalNew.cpp).

#include <algorithm>
#include <cstddef>
#include <new>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "FrameAllocatorTestSupport.h"
#include "TestSupport.h"

using coexec::detail::FrameAllocator;
using coexec::test::AllocationCount;

TEST_CASE("a request's class is the smallest block that holds it and the header, and the header ends the block",
          "[frame][allocator]") {
  // Computed at compile time where the size is known (a frame's, an object's).
  static_assert(FrameAllocator::sizeClass(0) == 0);
  static_assert(FrameAllocator::sizeClass(48) == 0 && FrameAllocator::headerOffset(48) == 48);
  static_assert(FrameAllocator::sizeClass(49) == 1 && FrameAllocator::headerOffset(49) == 112);
  static_assert(FrameAllocator::sizeClass(4080) == 6 && FrameAllocator::headerOffset(4080) == 4080);
  static_assert(FrameAllocator::sizeClass(4081) == FrameAllocator::kSizeClasses);
  static_assert(FrameAllocator::headerOffset(4081) == 4096);  // a large block: the request rounded up to 16
  // The same arithmetic at run time, for every size up to past the largest class.
  for (std::size_t size = 1; size <= 5000; ++size) {
    const std::size_t c = FrameAllocator::sizeClass(size);
    const std::size_t offset = FrameAllocator::headerOffset(size);
    REQUIRE(offset >= size);
    REQUIRE(offset % FrameAllocator::kHeaderBytes == 0);
    if (c < FrameAllocator::kSizeClasses) {
      const std::size_t block = std::size_t{64} << c;
      REQUIRE(offset + FrameAllocator::kHeaderBytes == block);
      REQUIRE((c == 0 || size + FrameAllocator::kHeaderBytes > block / 2));  // the smallest that holds it
    } else {
      REQUIRE(size + FrameAllocator::kHeaderBytes > 4096);
      REQUIRE(offset < size + FrameAllocator::kHeaderBytes);
    }
  }
}

TEST_CASE("a freed block is reused by the next allocation of its size class without the global allocator",
          "[frame][allocator]") {
  void* warm = FrameAllocator::allocate(90);  // first use on this thread sets up its cache
  FrameAllocator::deallocate(warm, 90);
  void* first = FrameAllocator::allocate(90);
  FrameAllocator::deallocate(first, 90);
  AllocationCount count;
  void* second = FrameAllocator::allocate(100);  // same class: 128 bytes with the block header
  count.stop();
  CHECK(second == first);
  CHECK(count.allocations() == 0);
  FrameAllocator::deallocate(second, 100);
}

TEST_CASE("blocks larger than the largest size class go to the global allocator", "[frame][allocator]") {
  AllocationCount count;
  void* large = FrameAllocator::allocate(5000);
  FrameAllocator::deallocate(large, 5000);
  count.stop();
  CHECK(count.allocations() == 1);
  CHECK(count.deallocations() == 1);
}

TEST_CASE("a block freed on another thread returns to the thread that allocated it", "[frame][allocator]") {
  // Drain this thread's list of the class first, so the next allocation must
  // come from what other threads returned (or from the global allocator).
  std::vector<void*> held;
  for (int i = 0; i < 4; ++i)
    held.push_back(FrameAllocator::allocate(200));
  void* block = FrameAllocator::allocate(200);
  std::size_t freedGlobally = 1;
  std::thread other([&] {
    AllocationCount count;
    FrameAllocator::deallocate(block, 200);  // not this thread's block: back to its owner
    count.stop();
    freedGlobally = count.deallocations();
  });
  other.join();
  CHECK(freedGlobally == 0);
  AllocationCount count;
  void* reused = FrameAllocator::allocate(200);
  count.stop();
  CHECK(reused == block);
  CHECK(count.allocations() == 0);
  FrameAllocator::deallocate(reused, 200);
  for (void* h : held)
    FrameAllocator::deallocate(h, 200);
}

namespace {

/// What reached the global allocator when a producer thread allocated
/// `perRound` blocks of `size` bytes and a new consumer thread freed them, for
/// `rounds` rounds (the first, which fills the circulation, not counted).
struct CrossThreadTraffic {
  std::size_t allocated = 0;
  std::size_t freed = 0;
};
CrossThreadTraffic crossThreadRounds(std::size_t size, int rounds, std::size_t perRound) {
  CrossThreadTraffic traffic;
  std::vector<void*> handed(perRound);
  std::thread producer([&] {
    for (int round = 0; round < rounds; ++round) {
      AllocationCount count;
      for (void*& block : handed)
        block = FrameAllocator::allocate(size);
      count.stop();
      if (round > 0) traffic.allocated += count.allocations();
      std::thread consumer([&] {
        AllocationCount freeing;
        for (void* block : handed)
          FrameAllocator::deallocate(block, size);
        freeing.stop();
        traffic.freed += freeing.deallocations();
      });
      consumer.join();
    }
  });
  producer.join();
  return traffic;
}

}  // namespace

TEST_CASE("blocks allocated on one thread and freed on another never reach the global allocator in steady state",
          "[frame][allocator]") {
  // A producer allocates, a consumer frees: the blocks flow back to the
  // producer through its return stack. 4 KiB blocks: a class no frame here uses.
  const CrossThreadTraffic traffic = crossThreadRounds(4000, 200, 64);
  CHECK(traffic.allocated == 0);
  CHECK(traffic.freed == 0);
}

TEST_CASE("the cache of an exited thread, with the blocks returned to it, is adopted by a new thread",
          "[frame][allocator]") {
  constexpr std::size_t kSize = 3000;
  constexpr int kBlocks = 32;
  std::vector<void*> blocks;
  std::thread first([&] {
    for (int i = 0; i < kBlocks; ++i)
      blocks.push_back(FrameAllocator::allocate(kSize));
  });
  first.join();  // its cache is parked; the blocks are still in use here
  for (void* block : blocks)
    FrameAllocator::deallocate(block, kSize);  // returned to the parked cache
  std::size_t allocatedGlobally = 1;
  std::thread second([&] {
    std::vector<void*> mine;
    mine.reserve(kBlocks);
    AllocationCount count;
    for (int i = 0; i < kBlocks; ++i)
      mine.push_back(FrameAllocator::allocate(kSize));
    count.stop();
    allocatedGlobally = count.allocations();
    for (void* block : mine)
      FrameAllocator::deallocate(block, kSize);
  });
  second.join();
  CHECK(allocatedGlobally == 0);
}

// ---- the caps ---------------------------------------------------------------------
//
// A thread's cache keeps at most kMaxCachedPerClass blocks of each class in
// its free list and spares, and at most kMaxReturnedPerClass that other
// threads returned to it. Each case checks them twice: by the cache's own
// counts, and by the global allocator's, whose net allocations over a window
// that frees every block it allocates are what the caches kept.

namespace {

constexpr std::size_t kCap = FrameAllocator::kMaxCachedPerClass;
constexpr std::size_t kReturnedCap = FrameAllocator::kMaxReturnedPerClass;

/// Global allocations minus deallocations while `count` counted, or 0 if it
/// freed more than it allocated (blocks cached before the window).
std::size_t netAllocations(const AllocationCount& count) {
  return count.allocations() > count.deallocations() ? count.allocations() - count.deallocations() : 0;
}

/// What the calling thread's cache holds of one class.
struct Cached {
  std::size_t local = 0;     // free list and spares
  std::size_t returned = 0;  // returned by other threads, not taken back yet
};

Cached cachedOf(std::size_t size) { return {FrameAllocator::cachedBlocks(size), FrameAllocator::returnedBlocks(size)}; }


/// Every round's cache within its caps, and the net global allocations of
/// the whole test within what the caps can hold.
void checkWithinCaps(const std::vector<Cached>& cached, std::size_t net) {
  for (std::size_t round = 0; round < cached.size(); ++round) {
    INFO("round " << round << ": " << cached[round].local << " in the free list and spares, " << cached[round].returned
                  << " returned");
    CHECK(cached[round].local <= kCap);
    CHECK(cached[round].returned <= kReturnedCap);
  }
  INFO("net global allocations: " << net);
  CHECK(net <= kCap + kReturnedCap);
}

/// `rounds` rounds of: this thread allocates `blocks` blocks of `size` bytes;
/// another thread frees the first `freedElsewhere` while this one frees the
/// rest. Then checkWithinCaps on every round and the whole run.
void checkCapRounds(std::size_t size, std::size_t blocks, std::size_t freedElsewhere, int rounds) {
  FrameAllocator::deallocate(FrameAllocator::allocate(size), size);  // sets up the cache
  std::vector<void*> held(blocks);
  std::vector<Cached> cached;
  cached.reserve(static_cast<std::size_t>(rounds));
  AllocationCount count;
  for (int round = 0; round < rounds; ++round) {
    for (void*& block : held)
      block = FrameAllocator::allocate(size);
    std::thread other([&] {
      for (std::size_t i = 0; i < freedElsewhere; ++i)
        FrameAllocator::deallocate(held[i], size);
    });
    for (std::size_t i = freedElsewhere; i < blocks; ++i)
      FrameAllocator::deallocate(held[i], size);
    other.join();
    cached.push_back(cachedOf(size));
  }
  count.stop();
  checkWithinCaps(cached, netAllocations(count));
}

}  // namespace

TEST_CASE("repeated same-thread bursts above the cap keep at most the cap cached", "[frame][allocator][cap]") {
  // Bursts of three times the cap, allocated and freed on one thread with
  // nothing live in between.
  constexpr std::size_t kSize = 1000;  // the 1 KiB class
  constexpr std::size_t kBurst = 3 * kCap;
  constexpr int kBursts = 40;
  std::size_t most = 0;
  int firstOver = -1;
  std::size_t net = 0;
  std::thread owner([&] {
    FrameAllocator::deallocate(FrameAllocator::allocate(kSize), kSize);  // sets up the cache
    std::vector<void*> blocks(kBurst);
    AllocationCount count;
    for (int burst = 0; burst < kBursts; ++burst) {
      for (void*& block : blocks)
        block = FrameAllocator::allocate(kSize);
      for (void* block : blocks)
        FrameAllocator::deallocate(block, kSize);
      const Cached cached = cachedOf(kSize);
      const std::size_t all = cached.local + cached.returned;
      most = std::max(most, all);
      if (all > kCap && firstOver < 0) firstOver = burst;
    }
    count.stop();
    net = netAllocations(count);
  });
  owner.join();
  INFO("most blocks cached after a burst: " << most << " (first over the cap after burst " << firstOver
                                            << "); net global allocations: " << net);
  CHECK(most <= kCap);
  CHECK(net <= kCap);
}

TEST_CASE("frames freed on another thread are cached up to the cap only", "[frame][allocator][cap]") {
  // This thread allocates four times the cap, another thread frees them all:
  // they go back to this thread's cache, which must keep no more than its
  // caps. Three rounds, so the later ones start from what the first kept.
  constexpr std::size_t kSize = 400;  // the 512-byte class (with the 16-byte block header)
  constexpr std::size_t kBlocks = 4 * kCap;
  constexpr int kRounds = 3;
  checkCapRounds(kSize, kBlocks, kBlocks, kRounds);
}

TEST_CASE("blocks freed on their own thread and on another at once keep at most the cap cached",
          "[frame][allocator][cap]") {
  // Three times the cap allocated here; another thread frees the first half
  // while this one frees the second, so the cache's own frees race with
  // returns, and then this thread allocates again, taking the returned blocks
  // back beside the ones it kept.
  constexpr std::size_t kSize = 2000;  // the 2 KiB class
  constexpr std::size_t kBlocks = 3 * kCap;
  constexpr int kRounds = 10;
  checkCapRounds(kSize, kBlocks, kBlocks / 2, kRounds);
}

TEST_CASE("blocks freed on another thread a thousand at a time never reach the global allocator in steady state",
          "[frame][allocator][cap]") {
  // As a producer that execute()s a thousand tasks and waits for them: each
  // round this thread allocates 1,000 blocks and another thread frees them
  // all, so the return stack must take nearly the cap's worth at once while
  // the producer's free list keeps what it will hand out next.
  constexpr std::size_t kPerRound = 1000;
  static_assert(kPerRound <= kReturnedCap && kPerRound <= kCap);
  const CrossThreadTraffic traffic = crossThreadRounds(200, 30, kPerRound);  // the 256-byte class
  CHECK(traffic.allocated == 0);
  CHECK(traffic.freed == 0);
}

TEST_CASE("a steady mix of same-thread and cross-thread frees below the cap never reaches the global allocator",
          "[frame][allocator][cap]") {
  // Each round this thread allocates 64 blocks, another thread frees half of
  // them and this thread the other half: the cache must keep enough of both
  // kinds of room that, once the circulation is set up, nothing is allocated
  // or freed globally.
  constexpr std::size_t kSize = 40;  // the 64-byte class, which no case before this one uses
  constexpr int kRounds = 200;
  constexpr std::size_t kPerRound = 64;
  std::size_t allocatedGlobally = 0;
  std::size_t freedGlobally = 0;
  std::vector<void*> blocks(kPerRound);
  for (int round = 0; round < kRounds; ++round) {
    AllocationCount count;
    for (void*& block : blocks)
      block = FrameAllocator::allocate(kSize);
    count.stop();
    if (round > 0) allocatedGlobally += count.allocations();  // round 0 fills the circulation
    std::size_t freedThere = 0;
    std::thread other([&] {
      AllocationCount freeing;
      for (std::size_t i = 0; i < kPerRound; i += 2)
        FrameAllocator::deallocate(blocks[i], kSize);
      freeing.stop();
      freedThere = freeing.deallocations();
    });
    other.join();
    AllocationCount freeing;
    for (std::size_t i = 1; i < kPerRound; i += 2)
      FrameAllocator::deallocate(blocks[i], kSize);
    freeing.stop();
    freedGlobally += freedThere + freeing.deallocations();
  }
  CHECK(allocatedGlobally == 0);
  CHECK(freedGlobally == 0);
}
