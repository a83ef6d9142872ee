// SPDX-License-Identifier: BSL-1.0
#pragma once

// A timer service: callbacks run once when their deadline comes on a Clock.
//
// Timers live in a slot table; a binary min-heap of slot indices orders them
// by (deadline, sequence number), and each slot knows its heap position, so
// cancel() removes a timer at once in O(log n) and its slot is reused by the
// next schedule() (memory is bounded by the most timers pending at once, not
// by how many were ever scheduled; tables larger than kSlotsKept are freed
// once no timer is pending). The heap is 4-ary (half the depth of a
// binary one, and a node's children share cache lines). A TimerId carries the slot's generation,
// so an id whose timer has fired or been cancelled never matches a reused
// slot.
//
// Who fires the timers:
// - on a ManualClock, nobody but ManualClock::advance(), on its calling
//   thread (the service registers with the clock; no thread of its own);
// - on any other clock, one service thread (started by the first schedule(),
//   so an unused service costs no thread) that sleeps on a condition
//   variable until the earliest deadline, or without a timeout while no
//   timer is pending: an idle service uses no CPU. schedule() wakes it only
//   when the new timer is earlier than the deadline it sleeps until.
//
// Locking: mutex_ guards the slots, the heap, the free list and the thread's
// state. Callbacks run without mutex_ held, so they may schedule and cancel.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "coexec/Clock.h"
#include "coexec/Export.h"

namespace coexec::detail {

/// A scheduled timer, for cancel(). Default-constructed: no timer.
struct TimerId {
  std::uint32_t slot = 0;
  std::uint32_t generation = 0;  // 0: no timer (slots start at generation 1)
};

class COEXEC_EXPORT TimerService {
 public:
  /// Run once when the timer is due, on the firing thread (the service
  /// thread, or the thread in ManualClock::advance()), without locks held.
  using Callback = void (*)(void* context) noexcept;

  /// A due timer the service thread fires.
  struct Firing {
    Callback callback;
    void* context;
  };
  /// Fires a batch of due timers, in deadline order, on the service thread:
  /// what an owner installs (setBatchFirer) to handle many timers under one
  /// lock of its own. It must run every callback of the batch, or do what
  /// that callback would. Without one, the service calls them one by one.
  using BatchFirer = void (*)(void* owner, Firing* batch, std::size_t count) noexcept;

  /// Tables of up to this many slots stay allocated when the last timer
  /// goes (a steady trickle of timers reuses them); larger ones are freed.
  static constexpr std::size_t kSlotsKept = 1024;

  /// A service on `clock`, which must outlive it. On a ManualClock it
  /// registers with the clock; on any other clock its thread starts with the
  /// first schedule(). Starts no thread. \throws std::bad_alloc.
  explicit TimerService(Clock& clock);
  TimerService(const TimerService&) = delete;
  TimerService& operator=(const TimerService&) = delete;
  /// Blocks until the service thread (if any) has stopped; a callback
  /// running on it finishes first. Timers still pending are dropped without
  /// running. Must not be called from a callback of this service.
  ~TimerService();

  /// Runs `callback(context)` once, at or after `deadline` on the clock.
  /// Never blocks beyond the service lock. Cost: O(log n).
  /// \throws std::bad_alloc if the tables must grow and cannot;
  /// std::system_error if the service thread must start and cannot.
  TimerId schedule(Clock::time_point deadline, Callback callback, void* context);

  /// Removes the timer if it has not started firing: returns true and the
  /// callback never runs; its slot is free when this returns. Returns false
  /// if it has fired, is firing (the callback may still be running: cancel()
  /// does not wait for it) or was cancelled. Never blocks beyond the service
  /// lock. Cost: O(log n).
  bool cancel(TimerId id) noexcept;

  /// Installs `firer` for the batches the service thread fires (not for
  /// ManualClock::advance(), which fires timers one by one). Call it before
  /// the first schedule(). Never blocks; never throws.
  void setBatchFirer(BatchFirer firer, void* owner) noexcept {
    batchFirer_ = firer;
    batchOwner_ = owner;
  }

  /// Timers scheduled and neither fired nor cancelled.
  [[nodiscard]] std::size_t pendingCount() const noexcept;

  /// Slots allocated: the most timers pending at once since the tables were
  /// last freed (slots are reused; tables of more than kSlotsKept slots are
  /// freed when no timer is pending). For tests of memory use.
  [[nodiscard]] std::size_t slotCount() const noexcept;

  /// How often the service thread has woken from a wait (notified, timed
  /// out or spuriously); 0 on a ManualClock. For tests of idle behaviour.
  [[nodiscard]] std::uint64_t wakeUpCount() const noexcept;

  /// What the service thread waits for now: the deadline it sleeps until,
  /// time_point::max() while it waits with no timeout (nothing pending), or
  /// time_point::min() while it is not waiting. For tests of idle behaviour.
  [[nodiscard]] Clock::time_point sleepingUntil() const noexcept;

  [[nodiscard]] Clock& clock() const noexcept { return clock_; }

 private:
  friend class coexec::ManualClock;

  // A timer's callback and identity; its ordering key lives in the heap
  // entry, so that sifting compares entries it already holds instead of
  // chasing slot indices (a cache miss per comparison with a large heap).
  struct Slot {
    Callback callback = nullptr;
    void* context = nullptr;
    std::uint32_t generation = 1;
    std::uint32_t heapIndex = kNotInHeap;
  };
  struct HeapEntry {
    Clock::time_point deadline;
    std::uint64_t sequence;  // schedule() order, for ties (process-wide, so ties across services order too)
    std::uint32_t slot;
  };
  static constexpr std::uint32_t kNotInHeap = UINT32_MAX;

  // Requires: mutex_ held.
  [[nodiscard]] static bool earlier(const HeapEntry& a, const HeapEntry& b) noexcept {
    return a.deadline < b.deadline || (a.deadline == b.deadline && a.sequence < b.sequence);
  }
  void siftUp(std::size_t index) noexcept;
  void siftDown(std::size_t index) noexcept;
  void place(std::size_t index, const HeapEntry& entry) noexcept;
  void removeAt(std::size_t index) noexcept;  // frees the slot; the tables too once none is pending
  void releaseTables() noexcept;              // Requires: mutex_ held, no timer pending


  // For ManualClock::advance (no lock held): the earliest timer's
  // (deadline, sequence), and firing the earliest timer if it is due by
  // `limit`.
  struct Due {
    Clock::time_point deadline;
    std::uint64_t sequence;
  };
  [[nodiscard]] std::optional<Due> earliest() const noexcept;
  bool fireEarliest(Clock::time_point limit) noexcept;

  void run() noexcept;  // the service thread

  Clock& clock_;
  ManualClock* const manual_;  // clock_ if it is a ManualClock
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Slot> slots_;          // guarded by mutex_
  std::vector<HeapEntry> heap_;      // a min-heap by (deadline, sequence); guarded by mutex_
  std::vector<std::uint32_t> free_;  // free slot indices; guarded by mutex_
  // The generation a new slot starts at, and the highest one given out:
  // after releaseTables(), new slots start past every id ever issued.
  // Guarded by mutex_.
  std::uint32_t firstGeneration_ = 1;
  std::uint32_t lastGeneration_ = 1;
  // Set by releaseTables(): a burst of timers is over; whoever removed the
  // last timer calls FrameAllocator::releaseFreeMemory() once it has
  // released mutex_. Guarded by mutex_.
  bool burstOver_ = false;
  Clock::time_point sleepingUntil_;  // the thread's wake-up time (max: none); guarded by mutex_
  bool stopping_ = false;            // guarded by mutex_
  std::uint64_t wakeUps_ = 0;        // guarded by mutex_
  BatchFirer batchFirer_ = nullptr;  // set before the first schedule(), then read by the thread only
  void* batchOwner_ = nullptr;
  std::thread thread_;               // started by the first schedule() on a clock that is not a ManualClock; guarded by mutex_
};

/// The process-wide service on the steady clock, for sleeps outside pools.
/// Created on first use (its thread starts with its first timer); stopped
/// at program exit. Never throws.
COEXEC_EXPORT TimerService& steadyTimerService();

}  // namespace coexec::detail
