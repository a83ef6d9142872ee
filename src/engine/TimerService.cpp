// SPDX-License-Identifier: BSL-1.0
// The timer service (see TimerService.h for its invariants and locking), the
// clocks' compiled parts, and ManualClock::advance(), which fires the timers
// of the services registered with it.

#include "engine/TimerService.h"

#include <algorithm>
#include <utility>

#include "coexec/detail/FrameAllocator.h"
#include <cassert>
#include <atomic>
#include <stdexcept>
#include <utility>

#include <fmt/chrono.h>
#include <fmt/format.h>

namespace coexec {
namespace detail {
namespace {

/// The longest the service thread waits in one go for a deadline that is
/// not time_point::max() (which means "never"): a wait far in the future is
/// cut into pieces so that `now + wait` cannot overflow inside the standard
/// library. One wake-up a day is no cost.
constexpr std::chrono::hours kLongestWait{24};

/// Children per node of the heap.
constexpr std::size_t kArity = 4;

/// Sequence numbers order timers with equal deadlines by schedule() order,
/// across every service. relaxed: only uniqueness and per-thread order
/// matter; a timer's order against another thread's is decided by which
/// schedule() took its number first.
std::atomic<std::uint64_t> nextSequence{0};

/// Makes room for `n` elements, doubling the capacity when it must grow (a
/// bare reserve(size + 1) would reallocate on every call).
template <class Vector>
void reserveRoom(Vector& v, std::size_t n) {
  if (v.capacity() < n) v.reserve(std::max(n, 2 * v.capacity()));
}

}  // namespace

TimerService::TimerService(Clock& clock) : clock_(clock), manual_(dynamic_cast<ManualClock*>(&clock)) {
  sleepingUntil_ = Clock::time_point::min();  // not sleeping: schedule() needs no wake-up
  if (manual_ != nullptr) {
    std::lock_guard lock(manual_->mutex_);
    manual_->services_.push_back(this);
  }
  // On any other clock the thread starts with the first timer (schedule()):
  // a service that is never used (a pool that schedules nothing) costs no
  // thread.
}

TimerService::~TimerService() {
  if (manual_ != nullptr) {
    std::lock_guard lock(manual_->mutex_);  // waits out an advance() in progress
    auto& services = manual_->services_;
    services.erase(std::remove(services.begin(), services.end(), this), services.end());
    return;
  }
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

TimerId TimerService::schedule(Clock::time_point deadline, Callback callback, void* context) {
  const std::uint64_t sequence = nextSequence.fetch_add(1, std::memory_order_relaxed);
  bool wake = false;
  TimerId id;
  {
    std::lock_guard lock(mutex_);
    // The thread first, then the tables, so that nothing is half-inserted if
    // either throws. The new thread waits for mutex_ before it looks.
    if (manual_ == nullptr && !thread_.joinable()) thread_ = std::thread([this] { run(); });
    // Grow first, so that nothing is half-inserted if an allocation throws.
    // free_ has room for every slot: removeAt() pushes to it without throwing.
    if (free_.empty()) {
      reserveRoom(slots_, slots_.size() + 1);
      reserveRoom(free_, slots_.size() + 1);
    }
    reserveRoom(heap_, heap_.size() + 1);
    std::uint32_t index;
    if (free_.empty()) {
      index = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back().generation = firstGeneration_;
    } else {
      index = free_.back();
      free_.pop_back();
    }
    Slot& slot = slots_[index];
    slot.callback = callback;
    slot.context = context;
    heap_.push_back(HeapEntry{deadline, sequence, index});
    slot.heapIndex = static_cast<std::uint32_t>(heap_.size() - 1);
    siftUp(heap_.size() - 1);
    id = TimerId{index, slot.generation};
    // Wake the thread only if it sleeps past this timer's deadline.
    wake = manual_ == nullptr && heap_.front().slot == index && deadline < sleepingUntil_;
  }
  if (wake) wake_.notify_one();
  return id;
}

bool TimerService::cancel(TimerId id) noexcept {
  bool burstOver = false;
  {
    std::lock_guard lock(mutex_);
    if (id.generation == 0 || id.slot >= slots_.size()) return false;
    const Slot& slot = slots_[id.slot];
    if (slot.generation != id.generation || slot.heapIndex == kNotInHeap) return false;
    // No wake-up: if this was the earliest timer, the thread wakes at its
    // deadline, finds nothing due and sleeps on.
    removeAt(slot.heapIndex);
    burstOver = std::exchange(burstOver_, false);
  }
  if (burstOver) FrameAllocator::releaseFreeMemory();
  return true;
}

std::size_t TimerService::pendingCount() const noexcept {
  std::lock_guard lock(mutex_);
  return heap_.size();
}

std::size_t TimerService::slotCount() const noexcept {
  std::lock_guard lock(mutex_);
  return slots_.size();
}

Clock::time_point TimerService::sleepingUntil() const noexcept {
  std::lock_guard lock(mutex_);
  return sleepingUntil_;
}

std::uint64_t TimerService::wakeUpCount() const noexcept {
  std::lock_guard lock(mutex_);
  return wakeUps_;
}

// ---- heap (Requires: mutex_ held) ----------------------------------------------

void TimerService::place(std::size_t index, const HeapEntry& entry) noexcept {
  heap_[index] = entry;
  slots_[entry.slot].heapIndex = static_cast<std::uint32_t>(index);
}

void TimerService::siftUp(std::size_t index) noexcept {
  const HeapEntry moving = heap_[index];
  while (index > 0) {
    const std::size_t parent = (index - 1) / kArity;
    if (!earlier(moving, heap_[parent])) break;
    place(index, heap_[parent]);
    index = parent;
  }
  place(index, moving);
}

void TimerService::siftDown(std::size_t index) noexcept {
  const HeapEntry moving = heap_[index];
  const std::size_t size = heap_.size();
  while (true) {
    const std::size_t first = kArity * index + 1;
    if (first >= size) break;
    std::size_t child = first;
    const std::size_t end = std::min(first + kArity, size);
    for (std::size_t c = first + 1; c < end; ++c) {
      if (earlier(heap_[c], heap_[child])) child = c;
    }
    if (!earlier(heap_[child], moving)) break;
    place(index, heap_[child]);
    index = child;
  }
  place(index, moving);
}

void TimerService::removeAt(std::size_t index) noexcept {
  const std::uint32_t removed = heap_[index].slot;
  const HeapEntry last = heap_.back();
  heap_.pop_back();
  if (index < heap_.size()) {
    place(index, last);
    siftDown(index);
    siftUp(slots_[last.slot].heapIndex);
  }
  Slot& slot = slots_[removed];
  slot.heapIndex = kNotInHeap;
  slot.callback = nullptr;
  slot.context = nullptr;
  ++slot.generation;  // old ids no longer match
  if (slot.generation == 0) slot.generation = 1;
  lastGeneration_ = std::max(lastGeneration_, slot.generation);
  free_.push_back(removed);  // cannot throw: reserved by schedule()
  if (heap_.empty() && slots_.size() > kSlotsKept) releaseTables();
}

void TimerService::releaseTables() noexcept {
  // Every timer is gone: the tables go back to the allocator (a burst of a
  // million timers leaves nothing behind once they have fired or been
  // cancelled). Slots made from now on start past every generation given
  // out so far, so that an old id never matches a new timer in a slot of
  // the same index. Swapping with empty vectors neither throws nor allocates.
  burstOver_ = true;  // the caller gives the freed memory back once it has released the lock
  firstGeneration_ = lastGeneration_ + 1;
  if (firstGeneration_ == 0) firstGeneration_ = 1;
  std::vector<Slot>().swap(slots_);
  std::vector<HeapEntry>().swap(heap_);
  std::vector<std::uint32_t>().swap(free_);
}

// ---- firing ----------------------------------------------------------------------

std::optional<TimerService::Due> TimerService::earliest() const noexcept {
  std::lock_guard lock(mutex_);
  if (heap_.empty()) return std::nullopt;
  return Due{heap_.front().deadline, heap_.front().sequence};
}

bool TimerService::fireEarliest(Clock::time_point limit) noexcept {
  Callback callback;
  void* context;
  bool burstOver = false;
  {
    std::lock_guard lock(mutex_);
    if (heap_.empty() || heap_.front().deadline > limit) return false;
    const Slot& top = slots_[heap_.front().slot];
    callback = top.callback;
    context = top.context;
    removeAt(0);
    burstOver = std::exchange(burstOver_, false);
  }
  callback(context);
  if (burstOver) FrameAllocator::releaseFreeMemory();
  return true;
}

void TimerService::run() noexcept {
  // Due timers are taken in batches: one lock for up to kBatch of them, then
  // their callbacks, in deadline order, without the lock. A timer of the
  // batch is firing from then on (cancel() returns false).
  constexpr std::size_t kBatch = 64;
  Firing batch[kBatch];
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (heap_.empty() || heap_.front().deadline == Clock::time_point::max()) {
      sleepingUntil_ = Clock::time_point::max();
      wake_.wait(lock);
      ++wakeUps_;
      sleepingUntil_ = Clock::time_point::min();
      continue;
    }
    const Clock::time_point now = clock_.now();
    if (heap_.front().deadline > now) {
      const Clock::time_point deadline = heap_.front().deadline;
      sleepingUntil_ = deadline;
      wake_.wait_for(lock, std::min<Clock::duration>(deadline - now, kLongestWait));
      ++wakeUps_;
      sleepingUntil_ = Clock::time_point::min();
      continue;
    }
    std::size_t taken = 0;
    while (taken < kBatch && !heap_.empty() && heap_.front().deadline <= now) {
      const Slot& top = slots_[heap_.front().slot];
      batch[taken++] = Firing{top.callback, top.context};
      removeAt(0);
    }
    const bool burstOver = std::exchange(burstOver_, false);
    lock.unlock();
    if (batchFirer_ != nullptr) {
      batchFirer_(batchOwner_, batch, taken);
    } else {
      for (std::size_t i = 0; i < taken; ++i)
        batch[i].callback(batch[i].context);
    }
    if (burstOver) FrameAllocator::releaseFreeMemory();
    lock.lock();
  }
}

TimerService& steadyTimerService() {
  static TimerService service(steadyClock());
  return service;
}

}  // namespace detail

SteadyClock& steadyClock() noexcept {
  static SteadyClock clock;
  return clock;
}

ManualClock::~ManualClock() {
  assert(services_.empty() && "coexec::ManualClock destroyed while a timer service still runs on it");
}

void ManualClock::advance(duration d) {
  if (d < duration::zero()) {
    throw std::invalid_argument(fmt::format("coexec::ManualClock::advance: d is negative ({}); a clock never goes back",
                                            std::chrono::nanoseconds(d)));
  }
  std::lock_guard lock(mutex_);
  const duration::rep current = now_.load(std::memory_order_relaxed);  // only advance() writes, under mutex_
  const duration::rep target =
      current > 0 && d.count() > duration::max().count() - current ? duration::max().count() : current + d.count();
  const time_point limit{duration(target)};
  while (true) {
    detail::TimerService* next = nullptr;
    std::optional<detail::TimerService::Due> best;
    for (detail::TimerService* service : services_) {
      const auto due = service->earliest();
      if (!due || due->deadline > limit) continue;
      if (!best || due->deadline < best->deadline ||
          (due->deadline == best->deadline && due->sequence < best->sequence)) {
        best = due;
        next = service;
      }
    }
    if (next == nullptr) break;
    // release: a thread that reads this time sees everything fired before.
    if (best->deadline.time_since_epoch().count() > now_.load(std::memory_order_relaxed)) {
      now_.store(best->deadline.time_since_epoch().count(), std::memory_order_release);
    }
    next->fireEarliest(limit);
  }
  now_.store(target, std::memory_order_release);
}

}  // namespace coexec
