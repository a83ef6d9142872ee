// SPDX-License-Identifier: BSL-1.0
#pragma once

// A pool's timer items as the pool keeps them: ScheduledItem (what the pool
// knows of one timer, and the pin protocol that reaches the pool from it)
// and LiveItems (the pool's list of live items and its armed count). Their
// rules are stated at each class; PoolTimers.cpp has the timers' whole
// protocol and its locking.

#include <atomic>
#include <cstddef>

#include "coexec/Clock.h"
#include "engine/TimerService.h"
#include "foundation/IntrusiveLinks.h"
#include "foundation/SpinWait.h"

namespace coexec::detail {

class PoolImpl;

/// What a pool knows of one of its timers, as a mix-in of the refcounted
/// object it belongs to. A timer item is *live* from the moment it is
/// scheduled until it has nothing more to do for the pool (a one-shot: it
/// fired or was cancelled; a periodic schedule: it ended), and *armed* while
/// its timer is pending in the pool's timer service. The pool's list holds a
/// reference to each live item.
///
/// Reaching the pool from an item (a Future's cancel(), a handle's cancel(),
/// the timer's callback) goes through the pin protocol: under `guard`, read
/// `pool` (null once the item is no longer live) and, if set, add a pin to
/// the pool (Lifecycle::pin()); the pool does not terminate while a pin
/// is held or an item is live, so it stays alive until the pin holder has
/// taken its lock, done its work and dropped the pin under that lock.
class ScheduledItem {
 public:
  virtual void retainItem() noexcept = 0;
  virtual void releaseItem() noexcept = 0;
  [[nodiscard]] virtual bool isPeriodic() const noexcept = 0;

  /// The pool through a pin, or null if the item is no longer live.
  PoolImpl* pinPool() noexcept;

  // Guarded by the pool's mutex_:
  TimerId timer;                  // valid while armed
  bool armed = false;
  Clock::time_point deadline{};   // of the pending timer (or of the run that fired last)
  ScheduledItem* prev = nullptr;  // the pool's list of live items
  ScheduledItem* next = nullptr;

  /// A one-byte lock for `pool` (held for a few instructions; a std::mutex
  /// would make the item 40 bytes larger, per pending timer).
  class Guard {
   public:
    void lock() noexcept {
      while (locked_.exchange(true, std::memory_order_acquire)) {
        while (locked_.load(std::memory_order_relaxed)) cpuRelax();
      }
    }
    void unlock() noexcept { locked_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool> locked_{false};
  };
  Guard guard;
  PoolImpl* pool = nullptr;  // set while live; guarded by `guard`

 protected:
  ~ScheduledItem() = default;
};

/// The pool's live timer items and how many of them are armed (an
/// intrusive list through each item's prev / next; guarded by the pool's
/// mutex, like the items' fields it writes).
///
/// Invariants:
/// - An item is on the list exactly while it is live, and the list holds a
///   reference to it: taken by addLocked(), handed to the caller by
///   removeLocked() (to drop once the pool's mutex is released).
/// - armedLocked() counts the items whose `armed` is set (PoolStats::
///   scheduledCount): `armed` changes only here, set with a timer
///   (armLocked()) and cleared by whoever disarms it first, a canceller
///   whose TimerService::cancel() succeeded (disarmLocked()) or the firing
///   (firedLocked()).
class LiveItems {
 public:
  [[nodiscard]] ScheduledItem* firstLocked() const noexcept { return head_; }
  [[nodiscard]] std::size_t countLocked() const noexcept { return count_; }
  [[nodiscard]] std::size_t armedLocked() const noexcept { return armed_; }
  [[nodiscard]] bool anyLocked() const noexcept { return count_ > 0; }

  /// Makes `item` live: the list takes a reference to it.
  void addLocked(ScheduledItem& item) noexcept {
    item.retainItem();
    Links::pushFront(head_, item);
    ++count_;
  }
  /// Takes `item` (live) off the list; returns the list's reference in it.
  ScheduledItem& removeLocked(ScheduledItem& item) noexcept {
    Links::unlink(head_, item);
    --count_;
    return item;
  }
  /// `item` (live, not armed) waits for `timer`, due at `deadline`.
  void armLocked(ScheduledItem& item, TimerId timer, Clock::time_point deadline) noexcept {
    item.timer = timer;
    item.armed = true;
    item.deadline = deadline;
    ++armed_;
  }
  /// Disarms `item` if it is armed and its timer can still be cancelled;
  /// false if it is not armed or its timer is firing (the firing decides).
  bool disarmLocked(ScheduledItem& item, TimerService& timers) noexcept {
    if (!item.armed || !timers.cancel(item.timer)) return false;
    item.armed = false;
    --armed_;
    return true;
  }
  /// `item`'s timer fired: it is no longer armed.
  void firedLocked(ScheduledItem& item) noexcept {
    item.armed = false;
    --armed_;
  }

 private:
  using Links = IntrusiveLinks<ScheduledItem, &ScheduledItem::prev, &ScheduledItem::next>;
  ScheduledItem* head_ = nullptr;
  std::size_t count_ = 0;
  std::size_t armed_ = 0;
};

}  // namespace coexec::detail
