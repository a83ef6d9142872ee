// SPDX-License-Identifier: BSL-1.0
#include "coexec/ThreadPoolExecutor.h"

// Allocation failures from the standard library under the pool's lock: the
// global operator new of this binary fails the N-th allocation of the thread
// that arms it, for every N until a call goes through without one. Whatever
// allocation fails (the task's state, a worker's name, launch block or list
// node, the thread, a queue growing), the call throws std::bad_alloc and the
// pool stays consistent: no phantom worker, no lost bounded place, no task
// lost or run twice, and it runs new tasks and terminates afterwards.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "Assertions.h"

#include "AdmissionTestSupport.h"
#include "TestSupport.h"
#include "coexec/Future.h"
#include "foundation/RingBuffer.h"

// ---- the failing global allocator -------------------------------------------------

namespace {

/// Allocations of this thread left before one fails: -1 disarmed, 0 fails the
/// next one (which disarms it).
thread_local long tlsFailIn = -1;

bool failHere() noexcept {
  if (tlsFailIn < 0) return false;
  return tlsFailIn-- == 0;
}

void* allocate(std::size_t size, std::size_t alignment) noexcept {
  if (size == 0) size = 1;
  if (alignment > alignof(std::max_align_t)) {
    return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  }
  return std::malloc(size);
}

void* allocateOrThrow(std::size_t size, std::size_t alignment = 0) {
  if (failHere()) throw std::bad_alloc();
  void* block = allocate(size, alignment);
  if (block == nullptr) throw std::bad_alloc();
  return block;
}

void* allocateOrNull(std::size_t size, std::size_t alignment = 0) noexcept {
  if (failHere()) return nullptr;
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

// ---- tests ------------------------------------------------------------------------

namespace coexec::test {
namespace {

using namespace std::chrono_literals;

/// Runs `call` with the N-th allocation of this thread failing, for N = 0, 1,
/// 2, ... until a run makes no allocation fail; `afterFailure` checks the
/// state after each std::bad_alloc. Returns how many runs failed.
template <class Call, class Check>
int sweepFailures(Call call, Check afterFailure) {
  int failures = 0;
  for (long n = 0; n < 1000; ++n) {
    tlsFailIn = n;
    bool threw = false;
    try {
      call();
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    const bool injected = tlsFailIn < 0 && n >= 0;
    tlsFailIn = -1;
    if (threw) {
      ++failures;
      afterFailure();
    } else if (!injected) {
      return failures;  // ran to the end without reaching the N-th allocation
    }
  }
  FAIL("the call kept allocating beyond the sweep");
  return failures;
}

// A name too long for the small-string buffer: worker names allocate.
constexpr const char* kLongName = "allocation-failure-under-the-pool-lock";

}  // namespace

TEST_CASE("an allocation failure while a worker is added leaves no phantom worker: the pool runs tasks and closes",
          "[executor][faults][allocation]") {
  int failures = 0;
  // A fresh pool for each N: the first execute() starts the one core thread.
  for (long n = 0;; ++n) {
    ThreadPoolExecutor pool(poolOptions(kLongName, 1, 1, WorkQueue::bounded(8)));
    tlsFailIn = n;
    bool threw = false;
    try {
      pool.execute([] {});
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    const bool injected = tlsFailIn < 0;
    tlsFailIn = -1;
    if (!threw && !injected) break;
    ++failures;  // thrown to the caller, or absorbed (a worker that could not be added is the factory's failure)
    INFO("allocation " << n << " failed: " << (threw ? "execute threw std::bad_alloc" : "absorbed"));
    const PoolStats before = pool.stats();
    CHECK(before.poolSize <= 1);
    // The pool works: a task runs (on the thread the failed call left, or on a
    // new one), and the pool terminates (close() would hang on a phantom).
    Future<int> f = pool.submit([] { return 5; });
    REQUIRE(f.waitFor(kLong));
    CHECK(f.get() == 5);
    const PoolStats s = finalStats(pool);
    CHECK(s.poolSize == 0);
    checkLedgerAddsUp(s);
  }
  CHECK(failures > 3);  // the sweep reached the worker's allocations, not just the task's
}

TEST_CASE("an allocation failure while queueing into bounded(n) keeps every place: exactly n tasks still fit",
          "[executor][faults][allocation]") {
  // Past the 4096-slot inject ring, a bounded queue's overflow grows an
  // array under the pool's lock: the failures land there.
  constexpr std::size_t kCapacity = 4200;
  ThreadPoolExecutor pool(poolOptions("bounded-alloc", 1, 1, WorkQueue::bounded(kCapacity)));
  Gate gate;
  OpenOnExit release{gate};
  std::atomic<std::size_t> ran{0};
  pool.execute([&] { gate.wait(); });
  REQUIRE(eventually([&] { return pool.stats().activeCount == 1; }));
  std::size_t admitted = 0;
  int failures = 0;
  for (;;) {
    bool full = false;
    failures += sweepFailures(
        [&] {
          try {
            pool.execute([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
            ++admitted;
          } catch (const RejectedExecution&) {
            full = true;
          }
        },
        [&] { CHECK(pool.stats().queueSize == admitted); });
    if (full) break;
    REQUIRE(admitted <= kCapacity);
  }
  CHECK(failures > 0);
  CHECK(admitted == kCapacity);  // no place was lost to a failed push
  gate.open();
  const PoolStats s = finalStats(pool);
  CHECK(ran.load() == kCapacity);  // every admitted task ran, once
  checkLedgerAddsUp(s);
}

TEST_CASE("an allocation failure in purge() loses no queued task: purge() throws before any task has moved",
          "[executor][faults][allocation][purge]") {
  ThreadPoolExecutor pool(poolOptions("purge-alloc", 1, 1, WorkQueue::bounded(64)));
  Gate gate;
  OpenOnExit release{gate};
  std::atomic<int> ran{0};
  pool.execute([&] { gate.wait(); });
  REQUIRE(eventually([&] { return pool.stats().activeCount == 1; }));
  std::vector<Future<void>> futures;
  for (int i = 0; i < 40; ++i)
    futures.push_back(pool.submit([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));
  for (int i = 0; i < 40; i += 4)
    CHECK(futures[static_cast<std::size_t>(i)].cancel());
  std::size_t purged = 0;  // over every run: a failure absorbed inside one does not end the sweep
  const int failures = sweepFailures([&] { purged += pool.purge(); },
                                     [&] { CHECK(pool.stats().queueSize == 40); });  // nothing moved out
  CHECK(failures > 0);
  CHECK(purged == 10);
  gate.open();
  for (int i = 0; i < 40; ++i) {
    if (i % 4 == 0) {
      CHECK_THROWS_AS(futures[static_cast<std::size_t>(i)].get(), OperationCancelled);
    } else {
      CHECK_NOTHROW(futures[static_cast<std::size_t>(i)].get());  // not lost: no BrokenPromise
    }
  }
  CHECK(ran.load() == 30);
  checkLedgerAddsUp(finalStats(pool));
}

TEST_CASE("an allocation failure while newThreadRuns() starts a temporary thread keeps no place, and the pool "
          "terminates",
          "[executor][faults][allocation][policy]") {
  ThreadPoolExecutor pool(
      poolOptions("tmp-alloc", 1, 1, WorkQueue::bounded(1), RejectionPolicy::newThreadRuns(1000)));
  Gate gate;
  OpenOnExit release{gate};
  std::atomic<int> ran{0};
  pool.execute([&] { gate.wait(); });
  REQUIRE(eventually([&] { return pool.stats().activeCount == 1; }));
  pool.execute([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });  // fills the queue
  int admitted = 1;
  const int failures = sweepFailures(
      [&] {
        try {
          pool.execute([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });  // a temporary thread runs it
          ++admitted;
        } catch (const RejectedExecution&) {
          // No thread could be started (its name or the thread itself failed
          // to allocate): newThreadRuns() then refuses, as documented.
        }
      },
      [] {});
  CHECK(failures > 0);
  gate.open();
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));  // no temporary thread's place left taken
  CHECK(ran.load() == admitted);
}

TEST_CASE("a RingBuffer push that cannot grow leaves the value with the caller", "[scheduler][faults][allocation]") {
  coexec::detail::RingBuffer<std::vector<int>> ring;
  int failures = 0;
  for (int i = 0; i < 100; ++i) {
    std::vector<int> value{i};
    failures += sweepFailures([&] { ring.push(std::move(value)); },
                              [&] { REQUIRE(value == std::vector<int>{i}); });  // still ours
  }
  CHECK(failures > 0);
  REQUIRE(ring.size() == 100);
  for (int i = 0; i < 100; ++i)
    CHECK(ring.pop() == std::vector<int>{i});
}

}  // namespace coexec::test
