// SPDX-License-Identifier: BSL-1.0
#pragma once

// A pool worker's state and the per-thread counters of PoolImpl (PoolImpl.h
// names them Worker, Counters and Launch). Which lock guards which field is
// noted at the field: `mutex_` is the pool's (PoolImpl::mutex_), taken
// before a worker's localMutex. PoolImpl.h describes how the pool uses them.

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
/// admission under the lock) use `outside_`, which also receives the counts
/// of exited workers. stats() sums them under the pool's lock, the outcomes
/// of every set before the task counts (see statsLocked()).
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
  // as a hint); unused in outside_.
  std::atomic<std::uint64_t> running{0};  // 0: no task
  // Coroutine tasks the worker started, and coroutine tasks that finished on
  // its thread (whoever started them): see InFlight.h.
  // Written by the worker alone (addOwn); unused in outside_.
  std::atomic<std::uint64_t> coroutinesStarted{0};
  std::atomic<std::uint64_t> coroutinesFinished{0};
};

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
/// the work handed or posted to it. An element of PoolImpl::workers_
/// (guarded by the pool's mutex_) while its thread runs (PoolWorker.cpp).
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
  // workers take it only on their way to parking (stealLocked), so a
  // worker that blocks after the hop cannot strand it. Written with
  // exchange by the owner (post) and by thieves.
  alignas(64) std::atomic<void*> nextContinuation{nullptr};
  // Coroutines that yielded on this worker (resumeOn of the pool it runs
  // on), oldest first, each with the number of items that were waiting
  // when it yielded: the worker runs that many other items (or runs out of
  // other work) before it resumes the yield, so a yield goes behind the
  // work already waiting and is not starved by work that comes later.
  // Guarded by localMutex; other workers take them on their way to parking
  // (stealLocked), so a worker that blocks cannot strand them.
  struct Yield {
    std::coroutine_handle<> handle;
    std::size_t waiting = 0;
  };
  RingBuffer<Yield> yields;
  std::atomic<std::size_t> yieldCount{0};  // yields.size(), readable without localMutex
  // Items the owner ran since the oldest yield was queued (reset when one is
  // taken); relaxed: a count, read to decide when a yield is due.
  std::atomic<std::size_t> ranSinceYield{0};
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
