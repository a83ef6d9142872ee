// The test-only fault points (coexec/detail/FaultInjection.h). Everything here
// is atomics with relaxed order: the counters count events and order nothing,
// and the countdown needs only that exactly one caller sees it reach 1 (a
// fetch_sub is atomic whatever its order).

#include "coexec/detail/FaultInjection.h"

#include <execinfo.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace coexec::detail {
namespace {

#if defined(COEXEC_FAULT_INJECTION)
std::atomic<std::uint64_t> countdown{0};  // 0: disarmed; else the calls left until the failing one
std::atomic<std::uint64_t> failed{0};
std::atomic<std::uint64_t> calls{0};
std::atomic<std::int64_t> live{0};
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
  live.fetch_add(1, std::memory_order_relaxed);
}

void FaultInjection::onFrameDeallocate() noexcept { live.fetch_sub(1, std::memory_order_relaxed); }

#else

bool FaultInjection::available() noexcept { return false; }
void FaultInjection::failFrameAllocation(std::uint64_t /*n*/) noexcept {}
std::uint64_t FaultInjection::frameAllocationsFailed() noexcept { return 0; }
std::uint64_t FaultInjection::frameAllocationCalls() noexcept { return 0; }
std::int64_t FaultInjection::liveFrameBlocks() noexcept { return 0; }
void FaultInjection::onFrameAllocate() {}
void FaultInjection::onFrameDeallocate() noexcept {}

#endif

}  // namespace coexec::detail
