// SPDX-License-Identifier: BSL-1.0
// Heap allocations per operation on coexec, counted by a replacement global
// operator new (every thread; coexec's frame recycler falls back to
// ::operator new, so a block it cannot recycle is counted too). Each
// measurement first runs the same operations once so that per-thread caches
// are in their steady state, then counts over `ops` more. The execute rows
// keep at most 1,000 tasks in flight; the burst row submits all at once.
//
// Usage as every bench binary: `bench_alloc alloc [runs] [scale]`.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <vector>

#include <coexec/coexec.h>

#include "CoexecTasks.h"
#include "Harness.h"

namespace {
std::atomic<std::uint64_t> gAllocations{0};

void* countedAlloc(std::size_t size, std::size_t alignment) {
  gAllocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  void* p = alignment <= alignof(std::max_align_t)
                ? std::malloc(size)
                : std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t size) { return countedAlloc(size, 0); }
void* operator new(std::size_t size, std::align_val_t a) { return countedAlloc(size, static_cast<std::size_t>(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

using namespace std::chrono_literals;
using bench::fib;
using bench::hops;
using coexec::Future;
using coexec::Task;
using coexec::ThreadPoolExecutor;

/// Allocations per op over `ops` operations of `body(ops)`, after one
/// uncounted pass of `body(ops)`.
template <class F>
double allocationsPer(std::size_t ops, F&& body) {
  body(ops);
  const std::uint64_t before = gAllocations.load();
  body(ops);
  return static_cast<double>(gAllocations.load() - before) / static_cast<double>(ops);
}

/// `ops` execute()s of a callable of `Bytes` bytes (copies of one pointer).
/// `execute` of a callable of `Bytes` bytes, `window` at a time: each window
/// is waited for before the next, so the pool holds at most `window` tasks.
/// With a window of all `ops`, the queue's peak (which the first run sets
/// and the second may exceed by chance) is measured as much as execute.
template <std::size_t Bytes>
double perExecute(ThreadPoolExecutor& pool, std::size_t ops, std::size_t window) {
  bench::Countdown done;
  return allocationsPer(ops, [&](std::size_t n) {
    std::array<bench::Countdown*, Bytes / sizeof(void*)> capture;
    capture.fill(&done);
    static_assert(sizeof(capture) == Bytes);
    for (std::size_t start = 0; start < n; start += window) {
      const std::size_t count = std::min(window, n - start);
      done.reset(count);
      for (std::size_t i = 0; i < count; ++i)
        pool.execute([capture] { capture.back()->hit(); });
      done.wait();
    }
  });
}

std::size_t fibCalls(int n) { return n < 2 ? 1 : 1 + fibCalls(n - 1) + fibCalls(n - 2); }

void allocations(bench::Run& run) {
  ThreadPoolExecutor pool(2, 2, 60s, coexec::WorkQueue::unbounded());
  pool.prestartAllCoreThreads();
  const std::size_t ops = run.count(100'000);
  constexpr auto lower = bench::Better::lower;
  constexpr std::size_t kWindow = 1'000;  // tasks in flight: a steady state
  run.record("execute 8 B callable", "allocs/op", lower, perExecute<8>(pool, ops, kWindow));
  run.record("execute 48 B callable", "allocs/op", lower, perExecute<48>(pool, ops, kWindow));
  run.record("execute 64 B callable", "allocs/op", lower, perExecute<64>(pool, ops, kWindow));
  // One burst of `ops` executes: the queue grows as deep as the producer
  // outruns the workers (with the lock-free submit path, tens of thousands).
  // The task states of a burst beyond the frame allocator's caps
  // (FrameAllocator.h: 1,024 kept per class in the producer's free list, and
  // 1,024 returned by the workers) go back to the global allocator when they
  // finish, so each such burst allocates its surplus again: close to 1 per op
  // at the full scale, not a steady-state cost.
  run.record("execute 48 B in one burst", "allocs/op", lower, perExecute<48>(pool, ops, ops));
  const std::size_t batches = (ops + 63) / 64;
  run.record("submit + get", "allocs/op", lower, allocationsPer(batches * 64, [&](std::size_t n) {
               for (std::size_t i = 0; i < n; i += 64) {
                 std::array<Future<int>, 64> futures;
                 for (auto& f : futures)
                   f = pool.submit([] { return 1; });
                 for (auto& f : futures)
                   f.get();
               }
             }));
  run.record("resumeOn hop", "allocs/op", lower,
             allocationsPer(ops, [&](std::size_t n) { pool.submit(hops(pool, n)).get(); }));
  // invokeAll of 64 tasks, from one coroutine on the pool (its task's token,
  // created by the first round, is not counted per round): void tasks (the
  // combinator alone: its 64 task states and their slot array come from the
  // frame allocator), then tasks returning an int (plus the result vector).
  const std::size_t rounds = std::max<std::size_t>(1, ops / 64);
  std::vector<void (*)()> voidTasks(64, [] {});
  run.record("invokeAll of 64 void tasks per round", "allocs/op", lower, allocationsPer(rounds, [&](std::size_t n) {
               pool.submit(bench::invokeAllVoidRounds(pool, voidTasks, n)).get();
             }));
  std::vector<bench::Trivial> intTasks;
  for (int i = 0; i < 64; ++i)
    intTasks.push_back(bench::Trivial{i});
  run.record("invokeAll of 64 int tasks per round (its result vector)", "allocs/op", lower,
             allocationsPer(rounds, [&](std::size_t n) {
               if (pool.submit(bench::invokeAllRounds(pool, intTasks, n)).get() != 63 * static_cast<long>(n)) {
                 throw std::runtime_error("invokeAll returned wrong values");
               }
             }));
  const int depth = run.depth(20);
  run.record("fib call (W4)", "allocs/op", lower, allocationsPer(fibCalls(depth), [&](std::size_t) {
               if (pool.submit(fib(pool, depth)).get() <= 0) throw std::runtime_error("fib returned a wrong value");
             }));
}

const bench::Workload kWorkloads[] = {
    {"alloc", "global operator new calls per execute / submit / resumeOn hop / fib call / invokeAll round",
     allocations},
};

}  // namespace

int main(int argc, char** argv) { return bench::main("coexec", kWorkloads, argc, argv); }
