// SPDX-License-Identifier: BSL-1.0
#pragma once

// A pool worker's state and the per-thread counters of PoolImpl (PoolImpl.h
// names them Worker, Counters and Launch), and the operations on the work
// a worker keeps to itself. Which lock guards which field is noted at the
// field: `mutex_` is the pool's (PoolImpl::mutex_), taken before a worker's
// localMutex. PoolImpl.h describes how the pool uses them.
//
// Invariants of a worker's own work (its local queue, its next-continuation
// slot, its yields):
// - The owner (the worker's thread) pushes and pops its local queue at the
//   newest end; thieves take the oldest (steal()), under the pool's mutex.
//   Each entry holds a reference to its task.
// - The next-continuation slot holds at most one coroutine; whoever
//   exchanges it out (the owner, or a thief on its way to parking) resumes
//   it, so it is resumed once.
// - A yield is resumed once the owner has run as many other items as were
//   waiting when it yielded (noteRan()), or when there is nothing else to
//   run, or by a thief (force): never before, so it goes behind the work
//   that was waiting, and never stranded behind a worker that blocks.
// - hasLocalWork() reads every part with seq_cst loads: a worker about to
//   park announces itself and then reads it (Parking.h).

#include <atomic>
#include <condition_variable>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "metrics/LatencyRecorder.h"
#include "foundation/CoarseClock.h"
#include "foundation/RingBuffer.h"
#include "engine/TimerService.h"
#include "foundation/WorkStealingDeque.h"
#include "coexec/TaskOptions.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/TaskCore.h"

namespace coexec::detail {

/// Counters one thread updates without the pool's lock. Each worker has its
/// own set, on its own cache line, so that workers never write to a line
/// another worker's counters live on; threads outside the pool (and
/// admission under the lock) use the outside set (the pool's Tallies), which
/// also receives the counts of exited workers. stats() sums them under the
/// pool's lock, the outcomes of every set before the task counts
/// (Tallies.h).
///
/// A worker's set is written by that worker while it runs, with a plain
/// load and store (addOwn: no read-modify-write), and by the thread that
/// gives a parked or new worker its first task, under the pool's lock, with
/// a read-modify-write; the lock orders the two, so no update is lost.
struct alignas(64) PoolCounters {
  std::atomic<std::uint64_t> tasks{0};
  std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> cancelled{0};
  std::atomic<std::size_t> active{0};  // running a task or a continuation
  // Not a counter: the task a worker runs now, for dumpThreads(), on the
  // line the worker writes for every task anyway: one word, so that a
  // task's start costs one store and a coarse clock read (see
  // runningWord()). Written by the worker alone (relaxed: a dump reads it
  // as a hint); unused in the outside set.
  std::atomic<std::uint64_t> running{0};  // 0: no task
  // Coroutine tasks the worker started, and coroutine tasks that finished on
  // its thread (whoever started them): see InFlight.h.
  // Written by the worker alone (addOwn); unused in the outside set.
  std::atomic<std::uint64_t> coroutinesStarted{0};
  std::atomic<std::uint64_t> coroutinesFinished{0};
};

/// Adds `n` to a counter of the calling worker's own set (PoolCounters): a
/// plain load and store, for a counter no other thread writes meanwhile.
template <class T>
void addOwn(std::atomic<T>& counter, T n, std::memory_order order) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + n, order);
}

/// Counters::running for a task named `nameId` starting now: the coarse
/// clock's time in units of 1024 ns (a shift, no division) above the name's
/// index (ThreadDump.cpp reads it back).
inline constexpr unsigned kRunningNameBits = 13;
inline constexpr unsigned kRunningTimeShift = 10;
static_assert(TaskOptions::kMaxTaskNames + 2 <= (1u << kRunningNameBits), "task name indexes fit the running word");
inline std::uint64_t runningWord(std::uint32_t nameId) noexcept {
  return (static_cast<std::uint64_t>(coarseNowNanos() >> kRunningTimeShift) << kRunningNameBits) | nameId;
}

/// One thread of the pool: its counters, its thread, its local queue and
/// the work handed or posted to it. An element of the pool's WorkerList
/// (guarded by the pool's mutex_) while its thread runs (Engine::run()).
struct PoolWorker {
  PoolCounters counters;
  std::size_t number = 0;
  std::string name;
  std::thread thread;
  Ref<TaskCore> handoff;   // a task handed to it while idle; guarded by mutex_
  bool signalled = false;  // woken by the pool; guarded by mutex_
  std::condition_variable wake;
  // Lock order: the pool's mutex_, then a worker's localMutex.
  std::mutex localMutex;
  Ref<TaskCore> current;  // the task it runs now (if it has a token); guarded by localMutex
  // Tasks submitted from this worker's thread, each holding a reference:
  // the worker pops newest first, other workers steal oldest first.
  WorkStealingDeque<TaskCore*> local;
  // The continuation this worker made ready last (a coroutine that hopped
  // back onto this pool from one of its threads): the worker resumes it as
  // soon as the current item returns, with no lock and no wake-up. Other
  // workers take it only on their way to parking (WorkerList.h), so a
  // worker that blocks after the hop cannot strand it. Written with
  // exchange by the owner (post) and by thieves.
  alignas(64) std::atomic<void*> nextContinuation{nullptr};
  // Coroutines that yielded on this worker (resumeOn of the pool it runs
  // on), oldest first, each with the number of items that were waiting
  // when it yielded: the worker runs that many other items (or runs out of
  // other work) before it resumes the yield, so a yield goes behind the
  // work already waiting and is not starved by work that comes later.
  // Guarded by localMutex; other workers take them on their way to parking
  // (WorkerList.h), so a worker that blocks cannot strand them.
  struct Yield {
    std::coroutine_handle<> handle;
    std::size_t waiting = 0;
  };
  RingBuffer<Yield> yields;
  std::atomic<std::size_t> yieldCount{0};  // yields.size(), readable without localMutex
  // Items the owner ran since the oldest yield was queued (reset when one is
  // taken); relaxed: a count, read to decide when a yield is due.
  std::atomic<std::size_t> ranSinceYield{0};
  /// Owner: takes the continuation in the next-continuation slot, if any.
  std::coroutine_handle<> takeNext() noexcept {
    return std::coroutine_handle<>::from_address(nextContinuation.exchange(nullptr, std::memory_order_acquire));
  }
  /// Thief (the pool's mutex held): takes a continuation the worker has not
  /// resumed yet (it may be blocked); a relaxed look first.
  std::coroutine_handle<> stealNext() noexcept {
    if (nextContinuation.load(std::memory_order_relaxed) == nullptr) return {};
    return takeNext();
  }
  /// Owner: puts `handle` in the slot (a seq_cst exchange, which publishes
  /// it: Parking.h) and returns what was there (null if nothing).
  std::coroutine_handle<> putNext(std::coroutine_handle<> handle) noexcept {
    return std::coroutine_handle<>::from_address(
        nextContinuation.exchange(handle.address(), std::memory_order_seq_cst));
  }
  /// Owner: the items waiting on this worker alone (its local queue and
  /// its slot), read without a lock: a moment's count.
  [[nodiscard]] std::size_t waitingHere() const noexcept {
    return local.size() + (nextContinuation.load(std::memory_order_relaxed) != nullptr ? 1 : 0);
  }
  /// Thief (the pool's mutex held): takes the oldest task of the local
  /// queue into `out` (its reference with it); false if the queue is empty.
  bool steal(TaskCore*& out) noexcept {
    while (true) {
      switch (local.steal(out)) {
        case WorkStealingDeque<TaskCore*>::Steal::taken: return true;
        case WorkStealingDeque<TaskCore*>::Steal::empty: return false;
        case WorkStealingDeque<TaskCore*>::Steal::contended: break;  // someone else took that one: look again
      }
    }
  }
  /// Any of the worker's own work is waiting (seq_cst: see the invariants).
  [[nodiscard]] bool hasLocalWork() const noexcept {
    return local.size() > 0 || nextContinuation.load(std::memory_order_seq_cst) != nullptr ||
           yieldCount.load(std::memory_order_seq_cst) > 0;
  }
  /// Owner: `handle` yields behind the `waiting` items waiting now. False
  /// (nothing queued) if the yields' ring cannot grow. Takes localMutex.
  bool pushYield(std::coroutine_handle<> handle, std::size_t waiting) noexcept {
    std::lock_guard lock(localMutex);
    if (yields.empty()) ranSinceYield.store(0, std::memory_order_relaxed);
    bool pushed = true;
    try {
      yields.push(Yield{handle, waiting});
    } catch (...) {  // out of memory
      pushed = false;
    }
    yieldCount.store(yields.size(), std::memory_order_relaxed);
    return pushed;
  }
  /// The oldest yield if it is due (`force`: whatever the items run since;
  /// a thief's, or the owner's with nothing else to run), else an empty
  /// handle. Takes localMutex if any yield waits.
  std::coroutine_handle<> takeYield(bool force) noexcept {
    if (yieldCount.load(std::memory_order_relaxed) == 0) return {};
    std::lock_guard lock(localMutex);
    if (yields.empty()) return {};
    if (!force && ranSinceYield.load(std::memory_order_relaxed) < yields.at(0).waiting) return {};
    const std::coroutine_handle<> handle = yields.pop().handle;
    yieldCount.store(yields.size(), std::memory_order_relaxed);
    ranSinceYield.store(0, std::memory_order_relaxed);
    return handle;
  }
  /// Owner: an item that was not a yield is about to run; it counts toward
  /// the yields waiting.
  void noteRan() noexcept {
    if (yieldCount.load(std::memory_order_relaxed) > 0) {
      ranSinceYield.store(ranSinceYield.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
  }

  // ManualClock only: the keep-alive alarm of this idle worker (see
  // onKeepAliveAlarm); guarded by mutex_.
  TimerId keepAliveAlarm;
  // ThreadPoolOptions::recordLatency: this worker's histograms (null when
  // off), recorded by this worker alone; read by stats() and latency().
  std::unique_ptr<WorkerLatency> latency;
};

/// Whether the pool kept the thread the factory made for a worker: the
/// worker's body waits for it before it touches the pool. Shared by the
/// pool and the body, so a refused (say, detached) thread can still read
/// it after the pool is gone.
struct WorkerLaunch {
  std::mutex mutex;
  std::condition_variable decided;
  int verdict = -1;  // -1 pending, 0 refused, 1 kept; guarded by mutex
  void decide(bool kept) {
    std::lock_guard lock(mutex);
    verdict = kept ? 1 : 0;
    decided.notify_all();
  }
  bool awaitVerdict() {
    std::unique_lock lock(mutex);
    decided.wait(lock, [this] { return verdict >= 0; });
    return verdict == 1;
  }
};

}  // namespace coexec::detail
