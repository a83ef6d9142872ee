// SPDX-License-Identifier: BSL-1.0
#include "coexec/detail/FrameAllocator.h"

// Over-aligned types in the pool: results, captures and coroutine frames with
// 32-, 64- and 128-byte alignment come out aligned (the frame allocator's
// blocks are aligned to their size, and task states take the aligned path of
// their operator new). Built with -mavx where the compiler and the CPU have
// it, so that the AVX types' aligned loads and stores fault on a misaligned
// address; UBSan (the asan build) reports any misaligned access.

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "Assertions.h"

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "TestSupport.h"
#include "coexec/Future.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/WhenAll.h"
#include "coexec/detail/FaultInjection.h"

using coexec::Future;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::detail::FrameAllocator;

namespace {

bool isAligned(const void* p, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

/// The address as the compiler cannot see it (so that a check of an
/// over-aligned object's address is not folded to "aligned" by the type).
const void* opaque(const void* p) {
  const void* volatile laundered = p;
  return laundered;
}

#if defined(__AVX__)
struct alignas(32) Vec4 {
  __m256d x;
  double sum() const {
    alignas(32) double lanes[4];
    _mm256_store_pd(lanes, x);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
  }
};
Vec4 makeVec4(double a) { return Vec4{_mm256_set_pd(a, a + 1, a + 2, a + 3)}; }
#else
struct alignas(32) Vec4 {
  double x[4];
  double sum() const { return x[0] + x[1] + x[2] + x[3]; }
};
Vec4 makeVec4(double a) { return Vec4{{a, a + 1, a + 2, a + 3}}; }
#endif

/// A cache-line padded counter, as servers keep per-core statistics.
struct alignas(64) PaddedCounter {
  std::int64_t value = 0;
  std::array<char, 56> padding{};
};

struct alignas(128) Wide {
  std::int64_t value = 0;
};

ThreadPoolOptions poolOf(std::size_t threads) {
  ThreadPoolOptions options;
  options.name = "aligned";
  options.corePoolSize = threads;
  options.maximumPoolSize = threads;
  options.workQueue = WorkQueue::unbounded();
  return options;
}

}  // namespace

TEST_CASE("the frame allocator's blocks are aligned to their size, up to kMaxAlignment", "[frames][aligned]") {
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t size : {1u, 16u, 32u, 48u, 64u, 100u, 112u, 128u, 200u, 256u, 1000u, 4000u, 5000u, 70000u}) {
    for (int i = 0; i < 3; ++i) {
      void* block = FrameAllocator::allocate(size);
      // An object of `size` bytes has an alignment that divides it (a power of
      // two no greater than it): the block must be aligned to that much.
      std::size_t wanted = 1;
      while (wanted * 2 <= size && wanted * 2 <= FrameAllocator::kMaxAlignment && size % (wanted * 2) == 0)
        wanted *= 2;
      INFO("size " << size << " block " << block);
      CHECK(isAligned(opaque(block), wanted));
      CHECK(isAligned(opaque(block), 16));
      blocks.emplace_back(block, size);
    }
  }
  for (auto [block, size] : blocks)
    FrameAllocator::deallocate(block, size);
}

TEST_CASE("a submitted callable returning a 32-byte-aligned value delivers it aligned and intact",
          "[frames][aligned][submit]") {
  ThreadPoolExecutor pool(poolOf(2));
  std::vector<Future<Vec4>> futures;
  for (int i = 0; i < 200; ++i)
    futures.push_back(pool.submit([i] { return makeVec4(i); }));
  for (int i = 0; i < 200; ++i) {
    const Vec4 v = futures[static_cast<std::size_t>(i)].get();
    CHECK(v.sum() == 4.0 * i + 6.0);
  }
}

TEST_CASE("a callable capturing 64- and 128-byte-aligned values sees them aligned", "[frames][aligned][submit]") {
  ThreadPoolExecutor pool(poolOf(2));
  PaddedCounter counter;
  counter.value = 7;
  Wide wide;
  wide.value = 9;
  std::vector<Future<bool>> futures;
  for (int i = 0; i < 100; ++i) {
    futures.push_back(pool.submit([counter, wide] {
      return isAligned(opaque(&counter), 64) && isAligned(opaque(&wide), 128) && counter.value == 7 &&
             wide.value == 9;
    }));
  }
  for (auto& future : futures)
    CHECK(future.get());
}

TEST_CASE("a Task whose frame holds 32-, 64- and 128-byte-aligned locals across suspensions keeps them aligned",
          "[frames][aligned][coroutine]") {
  ThreadPoolExecutor pool(poolOf(2));
  auto child = [&pool](int i) -> Task<Vec4> {
    Vec4 local = makeVec4(i);
    auto other = pool.submit([i] { return makeVec4(i + 1); });
    const Vec4 fromPool = co_await other;  // suspends: `local` lives in the frame
    co_return Vec4{makeVec4(local.sum() + fromPool.sum())};
  };
  auto parent = [&]() -> Task<std::string> {
    PaddedCounter counter;
    Wide wide;
    std::string report;
    for (int i = 0; i < 50; ++i) {
      auto future = pool.submit(child(i));
      const Vec4 v = co_await future;
      counter.value += 1;
      wide.value += 2;
      if (v.sum() != 4.0 * (8.0 * i + 16.0) + 6.0) report += "wrong sum at " + std::to_string(i) + "; ";
      if (!isAligned(opaque(&counter), 64) || !isAligned(opaque(&wide), 128)) report += "misaligned local; ";
    }
    if (counter.value != 50 || wide.value != 100) report += "counters lost";
    co_return report;
  };
  auto future = pool.submit(parent());
  CHECK(future.get() == "");
}

TEST_CASE("whenAll of Tasks returning over-aligned values returns them aligned", "[frames][aligned][combinators]") {
  ThreadPoolExecutor pool(poolOf(2));
  auto make = [](double a) -> Task<Vec4> { co_return makeVec4(a); };
  auto both = [&]() -> Task<double> {
    auto [a, b] = co_await coexec::whenAll(make(1), make(10));
    co_return a.sum() + b.sum();
  };
  CHECK(coexec::syncWait(both()) == (4.0 + 6.0) + (40.0 + 6.0));
}

namespace {

// Recycled types as the task layer has them: plain and over-aligned, one whose
// constructor throws, and a polymorphic one deleted through its base.
struct alignas(64) ThrowsAligned : coexec::detail::Recycled {
  ThrowsAligned() { throw std::runtime_error("constructor"); }
  std::array<char, 64> bytes{};
};
struct ThrowsPlain : coexec::detail::Recycled {
  ThrowsPlain() { throw std::runtime_error("constructor"); }
  std::array<char, 48> bytes{};
};
struct RecycledBase : coexec::detail::Recycled {
  virtual ~RecycledBase() = default;
  std::array<char, 24> bytes{};
};
struct alignas(128) WideDerived final : RecycledBase {
  std::array<char, 200> more{};
};
struct PlainDerived final : RecycledBase {
  std::array<char, 100> more{};
};

}  // namespace

TEST_CASE("a Recycled object's block goes back when its constructor throws or it is deleted through its base",
          "[frames][aligned]") {
  using coexec::detail::FaultInjection;
  const std::int64_t before = FaultInjection::liveFrameBlocks();
  for (int i = 0; i < 3; ++i) {
    CHECK_THROWS_AS(new ThrowsAligned, std::runtime_error);
    CHECK_THROWS_AS(new ThrowsPlain, std::runtime_error);
    RecycledBase* wide = new WideDerived;
    RecycledBase* plain = new PlainDerived;
    CHECK(isAligned(opaque(wide), 128));
    CHECK(isAligned(opaque(plain), __STDCPP_DEFAULT_NEW_ALIGNMENT__));
    if (FaultInjection::available()) CHECK(FaultInjection::liveFrameBlocks() == before + 2);
    delete wide;
    delete plain;
  }
  if (!FaultInjection::available()) {
    WARN("this build has no fault points (COEXEC_FAULT_INJECTION=OFF): the blocks are not counted");
    return;
  }
  CHECK(FaultInjection::liveFrameBlocks() == before);
}

TEST_CASE("default-aligned blocks start a cache line, from the cache and from the global allocator, on every path back",
          "[frames][aligned]") {
  // More blocks than a cache keeps (so that some come from the global
  // allocator and some go back to it), freed half on this thread and half on
  // another (the returned stack and, over its cap, the global allocator);
  // twice, so that the second round takes blocks from the cache. ASan checks
  // that each block goes back to the allocation it was carved from.
  constexpr std::size_t kBlocks = FrameAllocator::kMaxCachedPerClass + FrameAllocator::kMaxReturnedPerClass + 100;
  for (std::size_t size : {1u, 40u, 100u, 200u, 1000u, 4000u}) {
    INFO("size " << size);
    for (int round = 0; round < 2; ++round) {
      std::vector<void*> blocks(kBlocks);
      std::size_t misaligned = 0;
      for (void*& block : blocks) {
        block = FrameAllocator::allocateDefault(size);
        if (!isAligned(opaque(block), 64)) ++misaligned;
        static_cast<unsigned char*>(block)[size - 1] = 0xA5;  // the whole payload is ours
      }
      CHECK(misaligned == 0);
      std::thread other([&] {
        for (std::size_t i = 0; i < kBlocks / 2; ++i)
          FrameAllocator::deallocate(blocks[i], size);
      });
      other.join();
      for (std::size_t i = kBlocks / 2; i < kBlocks; ++i)
        FrameAllocator::deallocate(blocks[i], size);
    }
  }
}
