// SPDX-License-Identifier: BSL-1.0
#pragma once

// The pool's lifecycle tracker: the state (RUNNING -> SHUTDOWN, no new
// tasks, queued ones and continuations finish; or -> STOP, shutdownNow();
// then -> TERMINATED), and what holds a pool that is shut down from
// terminating besides its queues, timers and threads: coroutine tasks in
// flight and guests' holds (InFlight.h), pins of threads on their way to the
// pool from a timer item, and whenTerminated() awaiters being handed back.
// The pool decides when it terminates (PoolImpl::tryTerminateLocked(),
// PoolLifecycle.cpp) from what this tracker and its queues say; the tracker
// knows no queue, thread or timer.
//
// Invariants:
// - The state only moves forward, under the pool's mutex (advanceLocked()),
//   and is mirrored for the lock-free paths (seq_cst: a lock-free admission
//   or a finish on another thread announces itself and then reads the
//   mirror; shutdown() and shutdownNow() store it and then wait the
//   announcements out).
// - TERMINATED is entered once (endTerminationLocked()), after the
//   terminated hook, which runs with the mutex released while terminating()
//   is true: the pool then starts no thread and queues no continuation
//   (aliveLocked() is false), since either would outlive it.
// - The pool is not freed (close()) before it is TERMINATED and no
//   whenTerminated() awaiter is being handed back (closableLocked()).
// - A pin is taken (pin()) under a live timer item's guard or under the
//   pool's mutex before the pool may terminate, and dropped (unpin()) under
//   the pool's mutex, which then decides whether the pool can terminate; the
//   pool does not terminate while one is held (pinned()).

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>

#include "coexec/PoolStats.h"
#include "lifecycle/InFlight.h"

namespace coexec::detail {

class TerminationWait;

class Lifecycle {
 public:
  /// `mirror` is the pool's lock-free copy of the state, which the tracker
  /// writes (it lives with the pool's other mirrors, which submissions read
  /// together).
  explicit Lifecycle(std::atomic<PoolState>& mirror) noexcept : mirror_(mirror) {}

  /// Requires: the pool's mutex held.
  [[nodiscard]] PoolState stateLocked() const noexcept { return state_; }
  /// Requires: the pool's mutex held; `state` comes after the current one.
  void advanceLocked(PoolState state) noexcept {
    state_ = state;
    mirror_.store(state, std::memory_order_seq_cst);  // seq_cst: see the invariants
  }
  /// Requires: the pool's mutex held. False once the pool is TERMINATED or
  /// runs its terminated hook: nothing may start a thread or queue work.
  [[nodiscard]] bool aliveLocked() const noexcept { return state_ != PoolState::terminated && !terminating_; }
  /// Requires: the pool's mutex held; shut down, not terminated, not
  /// terminating. The terminated hook is about to run, with the mutex
  /// released meanwhile.
  void beginTerminationLocked() noexcept { terminating_ = true; }
  /// Requires: the pool's mutex held, after beginTerminationLocked(). Enters
  /// TERMINATED; the caller then hands the whenTerminated() awaiters back and
  /// notifies `terminated`.
  void endTerminationLocked() noexcept {
    advanceLocked(PoolState::terminated);
    terminating_ = false;
  }
  /// Requires: the pool's mutex held. The pool may be freed.
  [[nodiscard]] bool closableLocked() const noexcept { return state_ == PoolState::terminated && handOvers_ == 0; }

  /// A thread on its way to the pool from a timer item (see the invariants).
  void pin() noexcept { pins_.fetch_add(1, std::memory_order_seq_cst); }
  /// Requires: the pool's mutex held. Drops a pin; the caller then sees
  /// whether the pool can terminate.
  void unpinLocked() noexcept { pins_.fetch_sub(1, std::memory_order_seq_cst); }
  [[nodiscard]] bool pinned() const noexcept { return pins_.load(std::memory_order_seq_cst) > 0; }

  /// Requires: the pool's mutex held. A whenTerminated() awaiter is being
  /// handed back with the mutex released (PoolTermination.cpp).
  void beginHandOverLocked() noexcept { ++handOvers_; }
  /// Requires: the pool's mutex held. Ends beginHandOverLocked(); true if it
  /// was the last (the caller notifies `terminated`).
  bool endHandOverLocked() noexcept { return --handOvers_ == 0; }

  /// InFlight::leaveIfRunning() against the state's mirror: one less in
  /// flight in `shard`, from a thread that may not keep the pool alive; true
  /// if the pool was running (and must not be touched afterwards). Never
  /// throws.
  bool leaveIfRunning(std::uint8_t shard) noexcept { return inFlight.leaveIfRunning(shard, mirror_); }

  /// Coroutine tasks in flight and guests' holds (InFlight.h).
  InFlight inFlight;
  /// awaitTermination() and close() wait here, with the pool's mutex, for
  /// TERMINATED (and closableLocked()).
  std::condition_variable terminated;
  /// whenTerminated()'s awaiters (PoolTermination.cpp); guarded by the
  /// pool's mutex.
  TerminationWait* waiters = nullptr;

 private:
  std::atomic<PoolState>& mirror_;
  PoolState state_ = PoolState::running;  // guarded by the pool's mutex
  bool terminating_ = false;              // the terminated hook runs; guarded by the pool's mutex
  std::size_t handOvers_ = 0;             // guarded by the pool's mutex
  std::atomic<std::size_t> pins_{0};
};

}  // namespace coexec::detail
