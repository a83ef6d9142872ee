// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <chrono>
#include <thread>

namespace coexec::detail {

/// Tells the CPU this is a spin-wait loop (frees the core's resources for its
/// hyper-thread sibling and avoids a memory-order flush on exit).
inline void cpuRelax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

/// Polls `ready()` until it returns true (then returns true) or `window` has
/// passed (then false). Between polls it pauses the CPU, and every 32 polls
/// it yields the thread, so that on a machine with fewer cores than runnable
/// threads the thread it waits for gets to run. Never blocks.
template <class Ready>
bool spinUntil(Ready ready, std::chrono::nanoseconds window) {
  const auto until = std::chrono::steady_clock::now() + window;
  for (unsigned i = 1;; ++i) {
    if (ready()) return true;
    cpuRelax();
    if (i % 32 == 0) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::yield();
    }
  }
}

}  // namespace coexec::detail
