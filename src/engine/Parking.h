// SPDX-License-Identifier: BSL-1.0
#pragma once

// Parking: the pool's idle workers, and the protocol that wakes them.
//
// A worker with nothing to run searches for a moment (spins without the
// pool's lock, counted in `searching`), then parks: it goes on the idle
// stack (LIFO: the most recently idle worker is woken first, its cache still
// warm) and waits on its own condition variable. Whoever makes work
// available wakes a parked worker only if nobody searches (a searcher will
// find the work) and somebody is parked (else every worker is busy, and one
// takes the work when its current item returns).
//
// Invariants (the whole no-lost-wake-up argument; the producers (the
// engine's post() and pushLocal(), PoolAdmission.cpp, PoolTimers.cpp) and
// the worker loop in Engine.h follow it):
// - Work made available without the pool's lock: the producer publishes it
//   (a seq_cst store or read-modify-write), then reads the counts with
//   seq_cst loads (wakeWanted(), anySearching(), anyParked()). A worker
//   about to park pushes itself (parkLocked(): a seq_cst store of the
//   count), then looks at every lock-free source again with seq_cst loads,
//   and takes itself off (unparkLocked()) if it finds work. In the single
//   order of seq_cst operations one of the two comes first: either the
//   producer sees the worker parked and wakes it, or the worker sees the
//   work.
// - A searcher counts itself (beginSearch()) before it polls and uncounts
//   itself (endSearch(), seq_cst) before it takes the lock to look again: a
//   producer that saw it searching, and so woke nobody, had published its
//   work before, and that look finds it.
// - Work made available under the pool's lock needs neither: a worker looks
//   at it under the same lock before it parks, and the producer, holding
//   the lock, sees a parked worker on the stack.
// - A worker is on the stack at most once, and a woken one is off it (its
//   `signalled` set under the lock), so no wake-up is spent on a worker
//   that is already awake.
// - Parking never allocates: the pool reserves a place on the stack for
//   each worker before it adds the worker (reserveLocked()).
//
// Locks: the pool's mutex guards the stack and each worker's `signalled`
// (the *Locked functions); the counts and signals are readable anywhere.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <vector>

#include "engine/PoolWorker.h"

namespace coexec::detail {

class Parking {
 public:
  // ---- for producers, without the lock ---------------------------------------

  /// Some worker is searching (it will find work published before it stops).
  [[nodiscard]] bool anySearching() const noexcept { return searching_.load(std::memory_order_seq_cst) > 0; }
  /// Some worker is parked.
  [[nodiscard]] bool anyParked() const noexcept { return idle_.load(std::memory_order_seq_cst) > 0; }
  /// After publishing work: nobody searches and somebody is parked, so the
  /// producer must wake one (wakeOneLocked(), under the lock).
  [[nodiscard]] bool wakeWanted() const noexcept { return !anySearching() && anyParked(); }

  // ---- the idle stack (requires the pool's mutex) ----------------------------

  /// Makes room for `workers` workers on the stack. \throws std::bad_alloc.
  void reserveLocked(std::size_t workers) { stack_.reserve(workers); }
  /// Wakes the most recently parked worker; false if none is parked.
  bool wakeOneLocked() noexcept {
    if (stack_.empty()) return false;
    PoolWorker* worker = stack_.back();
    stack_.pop_back();
    idle_.store(stack_.size(), std::memory_order_relaxed);
    worker->signalled = true;
    worker->wake.notify_one();
    return true;
  }
  /// Wakes every parked worker (shutdown, a change of configuration, a
  /// ManualClock's advance()).
  void wakeAllLocked() noexcept {
    while (wakeOneLocked()) {
    }
  }
  /// The worker wakeOneLocked() would wake next, or null.
  [[nodiscard]] PoolWorker* nextLocked() const noexcept { return stack_.empty() ? nullptr : stack_.back(); }
  /// True if `worker` is parked (for dumpThreads()).
  [[nodiscard]] bool parkedLocked(const PoolWorker& worker) const noexcept {
    return std::find(stack_.begin(), stack_.end(), &worker) != stack_.end();
  }
  /// Puts `worker`, which is not parked, on the stack (seq_cst: see the
  /// rule above). The caller then looks at every lock-free source again
  /// before it waits for `worker.signalled`.
  void parkLocked(PoolWorker& worker) noexcept {
    worker.signalled = false;
    stack_.push_back(&worker);  // within the reserved room
    idle_.store(stack_.size(), std::memory_order_seq_cst);
  }
  /// Takes `worker`, parked and not woken, off the stack: it found work
  /// after parkLocked(), or its wait timed out.
  void unparkLocked(PoolWorker& worker) noexcept {
    if (!stack_.empty() && stack_.back() == &worker) {
      stack_.pop_back();
    } else {
      stack_.erase(std::find(stack_.begin(), stack_.end(), &worker));
    }
    idle_.store(stack_.size(), std::memory_order_relaxed);
  }

  // ---- searching --------------------------------------------------------------

  /// Counts the caller as searching; returns the local signal to poll
  /// (localWorkSignalled()).
  [[nodiscard]] std::size_t beginSearch() noexcept {
    searching_.fetch_add(1, std::memory_order_seq_cst);
    return localSignal_.load(std::memory_order_relaxed);
  }
  /// Uncounts a searcher, before it takes the lock to look again.
  void endSearch() noexcept { searching_.fetch_sub(1, std::memory_order_seq_cst); }
  /// Requires: the pool's mutex held. The number of items in the pool's
  /// locked shared queues, after they changed: what a searcher polls.
  void publishSharedLocked(std::size_t items) noexcept { sharedWork_.store(items, std::memory_order_seq_cst); }
  /// The items last published by publishSharedLocked().
  [[nodiscard]] std::size_t sharedWork() const noexcept { return sharedWork_.load(std::memory_order_seq_cst); }
  /// A task pushed to a local queue while a worker searches, beyond the one
  /// its owner takes next: tells the searchers (local queues have no shared
  /// size to poll).
  void signalLocalWork() noexcept { localSignal_.fetch_add(1, std::memory_order_relaxed); }
  /// True if signalLocalWork() was called since beginSearch() returned `since`.
  [[nodiscard]] bool localWorkSignalled(std::size_t since) const noexcept {
    return localSignal_.load(std::memory_order_relaxed) != since;
  }

 private:
  // The number of parked workers (stack_.size()), readable without the
  // lock. On its own line: every park and wake-up writes it, and every
  // submission reads the lines around it.
  alignas(64) std::atomic<std::size_t> idle_{0};
  // Workers searching, and the signals they poll.
  alignas(64) std::atomic<std::size_t> searching_{0};
  std::atomic<std::size_t> sharedWork_{0};
  std::atomic<std::size_t> localSignal_{0};
  // The parked workers, most recent last. Guarded by the pool's mutex.
  alignas(64) std::vector<PoolWorker*> stack_;
};

}  // namespace coexec::detail
