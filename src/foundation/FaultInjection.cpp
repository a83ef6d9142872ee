// SPDX-License-Identifier: BSL-1.0
// The test-only fault points (coexec/detail/FaultInjection.h). Everything here
// is atomics with relaxed order: the counters count events and order nothing,
// and the countdown needs only that exactly one caller sees it reach 1 (a
// fetch_sub is atomic whatever its order).

#include "coexec/detail/FaultInjection.h"

#include <execinfo.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>

namespace coexec::detail {
namespace {

#if defined(COEXEC_FAULT_INJECTION)
std::atomic<std::uint64_t> countdown{0};  // 0: disarmed; else the calls left until the failing one
std::atomic<std::uint64_t> failed{0};
std::atomic<std::uint64_t> calls{0};
std::atomic<std::int64_t> live{0};
// The admission pause point: written while no submission runs (see
// setAfterLockFreePush), so relaxed loads see it.
std::atomic<void (*)(void*)> afterPushHook{nullptr};
std::atomic<void*> afterPushArg{nullptr};
// The join pause point, likewise.
std::atomic<void (*)(void*)> beforeJoinHook{nullptr};
std::atomic<void*> beforeJoinArg{nullptr};

/// COEXEC_FAULT_TRACE_LIVE: each live block's allocation number and stack.
struct LiveTrace {
  std::uint64_t call;
  int depth;
  void* frames[24];
};
const bool kTraceLive = std::getenv("COEXEC_FAULT_TRACE_LIVE") != nullptr;
std::mutex traceMutex;
std::unordered_map<void*, LiveTrace>* traces = nullptr;  // guarded by traceMutex; never freed
#endif

}  // namespace

#if defined(COEXEC_FAULT_INJECTION)

bool FaultInjection::available() noexcept { return true; }

void FaultInjection::failFrameAllocation(std::uint64_t n) noexcept { countdown.store(n, std::memory_order_relaxed); }

std::uint64_t FaultInjection::frameAllocationsFailed() noexcept { return failed.load(std::memory_order_relaxed); }

std::uint64_t FaultInjection::frameAllocationCalls() noexcept { return calls.load(std::memory_order_relaxed); }

std::int64_t FaultInjection::liveFrameBlocks() noexcept { return live.load(std::memory_order_relaxed); }

void FaultInjection::onFrameAllocate() {
  calls.fetch_add(1, std::memory_order_relaxed);
  std::uint64_t left = countdown.load(std::memory_order_relaxed);
  while (left != 0) {
    if (countdown.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) {
      if (left == 1) {
        failed.fetch_add(1, std::memory_order_relaxed);
        if (std::getenv("COEXEC_FAULT_TRACE") != nullptr) {
          void* frames[32];
          backtrace_symbols_fd(frames, backtrace(frames, 32), 2);
        }
        throw std::bad_alloc();
      }
      break;
    }
  }
}

void FaultInjection::onFrameAllocated(void* block) noexcept {
  // Counted once the block exists: an allocation that fails after the fault
  // point (the global allocator out of memory) leaves no live block.
  live.fetch_add(1, std::memory_order_relaxed);
  if (!kTraceLive) return;
  LiveTrace trace{calls.load(std::memory_order_relaxed), 0, {}};
  trace.depth = backtrace(trace.frames, 24);
  std::lock_guard lock(traceMutex);
  try {
    if (traces == nullptr) traces = new std::unordered_map<void*, LiveTrace>();
    (*traces)[block] = trace;
  } catch (...) {
  }
}

void FaultInjection::onFrameDeallocate(void* block) noexcept {
  live.fetch_sub(1, std::memory_order_relaxed);
  if (!kTraceLive) return;
  std::lock_guard lock(traceMutex);
  if (traces != nullptr) traces->erase(block);
}

void FaultInjection::setAfterLockFreePush(void (*hook)(void*), void* arg) noexcept {
  afterPushArg.store(arg, std::memory_order_relaxed);
  afterPushHook.store(hook, std::memory_order_relaxed);
}

void FaultInjection::onLockFreePush() noexcept {
  if (void (*const hook)(void*) = afterPushHook.load(std::memory_order_relaxed); hook != nullptr) {
    hook(afterPushArg.load(std::memory_order_relaxed));
  }
}

void FaultInjection::setBeforeJoin(void (*hook)(void*), void* arg) noexcept {
  beforeJoinArg.store(arg, std::memory_order_relaxed);
  beforeJoinHook.store(hook, std::memory_order_relaxed);
}

void FaultInjection::onBeforeJoin() noexcept {
  if (void (*const hook)(void*) = beforeJoinHook.load(std::memory_order_relaxed); hook != nullptr) {
    hook(beforeJoinArg.load(std::memory_order_relaxed));
  }
}

void FaultInjection::printLiveBlocks(std::uint64_t since) noexcept {
  if (!kTraceLive) return;
  std::lock_guard lock(traceMutex);
  if (traces == nullptr) return;
  for (const auto& [block, trace] : *traces) {
    if (trace.call <= since) continue;
    std::fprintf(stderr, "live frame-allocator block %p, allocation %llu:\n", block,
                 static_cast<unsigned long long>(trace.call));
    backtrace_symbols_fd(const_cast<void* const*>(trace.frames), trace.depth, 2);
  }
}

#else

bool FaultInjection::available() noexcept { return false; }
void FaultInjection::failFrameAllocation(std::uint64_t /*n*/) noexcept {}
std::uint64_t FaultInjection::frameAllocationsFailed() noexcept { return 0; }
std::uint64_t FaultInjection::frameAllocationCalls() noexcept { return 0; }
std::int64_t FaultInjection::liveFrameBlocks() noexcept { return 0; }
void FaultInjection::onFrameAllocate() {}
void FaultInjection::onFrameAllocated(void* /*block*/) noexcept {}
void FaultInjection::onFrameDeallocate(void* /*block*/) noexcept {}
void FaultInjection::setAfterLockFreePush(void (* /*hook*/)(void*), void* /*arg*/) noexcept {}
void FaultInjection::onLockFreePush() noexcept {}
void FaultInjection::setBeforeJoin(void (* /*hook*/)(void*), void* /*arg*/) noexcept {}
void FaultInjection::onBeforeJoin() noexcept {}
void FaultInjection::printLiveBlocks(std::uint64_t /*since*/) noexcept {}

#endif

}  // namespace coexec::detail
