// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstdint>

#include "coexec/Export.h"

namespace coexec::detail {

/// Test-only fault points inside the library, compiled in when the library is
/// configured with COEXEC_FAULT_INJECTION=ON (the dev, asan, tsan, clang and
/// fuzz presets) and absent otherwise (release and installed builds: there
/// every function below is a no-op that reports available() == false, and the
/// frame allocator carries no extra instruction).
///
/// The frame allocator point: FrameAllocator::allocate() (coroutine frames,
/// task states, the combinators' slot arrays) can be told to throw
/// std::bad_alloc on its n-th call from now, counting calls on every thread,
/// and it keeps a count of the blocks it handed out and not yet taken back
/// (live blocks: a leaked frame or task state stays in it forever).
///
/// The admission pause point: a hook that runs on a submitting thread right
/// after its task's lock-free push into the shared queue landed, before the
/// submission wakes or starts a thread for it, so that a race test can run
/// shutdownNow() (or anything else) in that window.
///
/// The join pause point: a hook that runs where a pool thread is about to
/// run a queued task inside the co_await of its Future (a join), before it
/// takes the task.
///
/// The faults of user-supplied code (thread factory, hooks, the uncaught
/// handler, a rejection handler) need no switch here: a test supplies that
/// code and makes it throw (tests/stress/FaultPlan.h).
///
/// Thread safety: every function may be called from any thread; the counters
/// are atomics (relaxed: they count events, they order nothing).
struct COEXEC_EXPORT FaultInjection {
  /// True if the library was built with the fault points. Never blocks.
  static bool available() noexcept;

  /// Arms the frame allocator: its `n`-th call from now (n >= 1), on any
  /// thread, throws std::bad_alloc instead of allocating; the calls after it
  /// allocate again. 0 disarms. Never blocks. No-op unless available().
  static void failFrameAllocation(std::uint64_t n) noexcept;
  /// How many allocations the armed point made fail so far. Never blocks.
  static std::uint64_t frameAllocationsFailed() noexcept;
  /// How many times FrameAllocator::allocate() was called (including those
  /// that failed). Never blocks.
  static std::uint64_t frameAllocationCalls() noexcept;
  /// Blocks handed out by FrameAllocator::allocate() and not yet given back
  /// to FrameAllocator::deallocate(), on all threads. Never blocks.
  static std::int64_t liveFrameBlocks() noexcept;

  /// Called by FrameAllocator::allocate() first thing when available().
  /// \throws std::bad_alloc when the armed call is reached.
  static void onFrameAllocate();
  /// Called by FrameAllocator::allocate() with the block it hands out.
  /// Never throws.
  static void onFrameAllocated(void* block) noexcept;
  /// Called by FrameAllocator::deallocate() when available(). Never throws.
  static void onFrameDeallocate(void* block) noexcept;

  /// Arms the admission pause point: `hook(arg)` runs, on the submitting
  /// thread, after every lock-free push into a pool's shared queue (see
  /// above) until disarmed with a null `hook`. Arm and disarm while no
  /// submission runs. Never blocks. No-op unless available().
  static void setAfterLockFreePush(void (*hook)(void*), void* arg) noexcept;
  /// Called by the admission after a lock-free push when available(): runs
  /// the armed hook, if any. Never throws (the hook must not).
  static void onLockFreePush() noexcept;

  /// Arms the join pause point: `hook(arg)` runs on a pool thread whose
  /// coroutine is about to run a queued task where it awaits it (a join,
  /// src/pool/PoolTaskRun.cpp), before the join takes the task, until disarmed
  /// with a null `hook`; a race test cancels the task there. Arm and disarm
  /// while no join runs. Never blocks. No-op unless available().
  static void setBeforeJoin(void (*hook)(void*), void* arg) noexcept;
  /// Called by the join at that point when available(): runs the armed
  /// hook, if any. Never throws (the hook must not).
  static void onBeforeJoin() noexcept;

  /// With COEXEC_FAULT_TRACE_LIVE=1 in the environment, the allocator
  /// remembers where each live block was allocated (slow: for hunting a
  /// leak), and this prints the stack of every block still live that was
  /// allocated after `since` calls (frameAllocationCalls()) to stderr.
  /// Otherwise it prints nothing. Never throws.
  static void printLiveBlocks(std::uint64_t since) noexcept;
};

}  // namespace coexec::detail
