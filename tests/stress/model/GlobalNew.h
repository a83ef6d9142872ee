// SPDX-License-Identifier: BSL-1.0
#pragma once

// The fault site globalNew (model/Program.h): the global operator new of a
// binary that links model/GlobalNew.cpp counts the allocations made inside a
// producer's pool API call (a window: LibraryCall) and fails the N-th of
// them, so that the failure lands in the library (a worker's name, launch
// block or list node, its std::thread, a queue's array growing, a task
// state), under the pool's lock or not.
//
// Invariants:
// - only a thread inside a window counts, and only while no harness code
//   runs on it (HarnessCode: a task body the call runs on the producer, the
//   uncaught handler, a hook, the model's records and reports): a failure
//   never lands in the harness's own bookkeeping;
// - a window resets its thread's harness depth when it opens and when it
//   closes, and a HarnessCode leaves the depth alone when it ends on another
//   thread or in another window than where it began: a coroutine body that
//   suspends inside a window keeps the rest of that window uncounted (fewer
//   calls counted, never a harness allocation counted), and its end
//   elsewhere disturbs no other window. Only producers open windows, so the
//   depth of any other thread never matters.
//
// Header-only: the model's sources (Program.cpp, Runner.cpp, Bodies.cpp,
// Checks.cpp) are also built into fuzz_Program, which keeps the standard
// operator new; there nothing counts and nothing fails.

#include <atomic>
#include <cstdint>

namespace coexec::stress::impl {

/// The calling thread's part.
struct GlobalNewThread {
  bool inCall = false;       ///< a window is open on this thread
  int harnessDepth = 0;      ///< HarnessCode scopes open on this thread (in this window)
  std::uint64_t window = 0;  ///< counts the opening and closing of windows on this thread
};
inline thread_local GlobalNewThread tlsGlobalNew;

/// The process's part (relaxed atomics: they count events and order nothing;
/// the program's run reads them after its producers were joined).
struct GlobalNewCounters {
  std::atomic<bool> installed{false};    ///< this binary's operator new is the counting one
  std::atomic<bool> counting{false};     ///< windows count (a program with the globalNew plan runs)
  std::atomic<std::uint64_t> nth{0};     ///< the counted call that fails; 0: none
  std::atomic<std::uint64_t> calls{0};   ///< counted calls so far
  std::atomic<std::uint64_t> failed{0};  ///< calls made to fail so far
};
inline GlobalNewCounters globalNewCounters;

/// Called by the counting operator new on every allocation: true if this one
/// is to fail. Never throws.
inline bool globalNewFails() noexcept {
  const GlobalNewThread& self = tlsGlobalNew;
  if (!self.inCall || self.harnessDepth != 0) return false;
  const std::uint64_t call = globalNewCounters.calls.fetch_add(1, std::memory_order_relaxed) + 1;
  if (call != globalNewCounters.nth.load(std::memory_order_relaxed)) return false;
  globalNewCounters.failed.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Out of line, so that a coroutine that suspends between the two calls
// reads the thread-local of the thread it runs on at each (a compiler may
// keep a thread-local's address across a co_await of the same function).
[[gnu::noinline]] inline GlobalNewThread* enterHarness(std::uint64_t& window) noexcept {
  GlobalNewThread& self = tlsGlobalNew;
  ++self.harnessDepth;
  window = self.window;
  return &self;
}
[[gnu::noinline]] inline void leaveHarness(const GlobalNewThread* thread, std::uint64_t window) noexcept {
  GlobalNewThread& self = tlsGlobalNew;
  if (&self == thread && self.window == window) --self.harnessDepth;
}

/// Marks the scope of harness code: nothing allocated in it counts.
class HarnessCode {
 public:
  HarnessCode() noexcept : thread_(enterHarness(window_)) {}
  ~HarnessCode() { leaveHarness(thread_, window_); }
  HarnessCode(const HarnessCode&) = delete;
  HarnessCode& operator=(const HarnessCode&) = delete;

 private:
  std::uint64_t window_ = 0;
  const GlobalNewThread* thread_;
};

/// A producer's pool API call: the allocations it makes on this thread count
/// (while globalNewCounters.counting is set). Not nested; not in a coroutine.
class LibraryCall {
 public:
  LibraryCall() noexcept {
    if (!globalNewCounters.counting.load(std::memory_order_relaxed)) return;
    GlobalNewThread& self = tlsGlobalNew;
    self.harnessDepth = 0;
    ++self.window;
    self.inCall = true;
    open_ = true;
  }
  ~LibraryCall() {
    if (!open_) return;
    GlobalNewThread& self = tlsGlobalNew;
    self.inCall = false;
    self.harnessDepth = 0;
    ++self.window;
  }
  LibraryCall(const LibraryCall&) = delete;
  LibraryCall& operator=(const LibraryCall&) = delete;

 private:
  bool open_ = false;
};

}  // namespace coexec::stress::impl
