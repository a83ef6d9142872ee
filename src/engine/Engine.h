// SPDX-License-Identifier: BSL-1.0
#pragma once

// The engine: the work a pool holds and the loop its workers serve it
// with. It runs opaque work items (tasks and continuations) and knows no
// admission rule: what a task's run means, when a worker may exit, how long
// an idle one may wait, and what a task leaving a queue gives back are its
// host's (the pool's) decisions, asked for through the calls listed at
// Engine below. The loop's definitions are in EngineImpl.h.
//
// What it holds: the workers (WorkerList), each with its own local queue,
// next-continuation slot and yields (PoolWorker); the shared queue
// (SharedQueue: a lock-free ring and its locked overflow); the shared
// continuations; the due timer work (DueWork); the idle workers and the
// wake-up protocol (Parking).
//
// Order of service for a worker: its next-continuation slot, a yield that is
// due, its own local queue (newest first), due timer work, the shared ring
// (oldest first), then under the host's mutex (takeLocked()): a hand-off,
// the shared continuations, due timer work, the host's exit rule, the ring
// again, its overflow, other workers' slots, local queues (oldest first)
// and yields, a short search without the lock, and finally parking on its
// own condition variable.
//
// Invariants:
// - No lost wake-up: Parking.h states the protocol; the loop is its worker
//   side (a search, then a park that looks at every lock-free source again).
// - No lost work: a worker never exits while its yields, the shared
//   continuations or due timer work wait; whatever else it leaves behind
//   the host's exit rule has allowed it to.
// - Every task that leaves a queue (popped, stolen, moved from the overflow
//   to a worker) is reported to the host once (Host::leftQueue()).
// - activeCount counts a worker from the moment it is given work until the
//   item returns; a hand-off is counted by the thread that hands it over.
// Locks: the host's mutex (given to the constructor) for the idle stack,
// the shared queue's overflow, the continuations and the worker list; a
// worker's localMutex for its `current` task and its yields (lock order:
// the host's mutex, then localMutex).

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <mutex>

#include "coexec/Clock.h"
#include "coexec/PendingTask.h"
#include "coexec/WorkQueue.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/TaskCore.h"
#include "engine/DueWork.h"
#include "engine/Parking.h"
#include "engine/PoolWorker.h"
#include "engine/SharedQueue.h"
#include "engine/WorkerList.h"
#include "foundation/RingBuffer.h"

namespace coexec::detail {

/// What an idle worker may do, by its host's exit rule.
enum class WorkerExit : unsigned char {
  no,            // go on serving
  now,           // exit, even if yields of its own wait (none can: nothing is in flight)
  unlessYields,  // exit once its own yields have run
};

/// An idle worker's time without work, through one search for work: kept
/// by the engine, filled in by its host's rule (Host::idleExpiredLocked()).
struct IdleTime {
  bool timed = false;                                     // the worker may time out (the host's keep-alive)
  bool waited = false;                                    // it has waited on its condition variable at least once
  Clock::time_point since{};                              // first found idle (read only when timed)
  Clock::time_point deadline = Clock::time_point::max();  // when it times out (timed)
};

/// The engine of a pool whose host type is Host, which passes itself and
/// its mutex to the constructor and provides (each called on a worker's
/// thread):
///
///   void runTask(PoolWorker&, Ref<TaskCore>&)
///       runs a dequeued task: its start (which fails if it was cancelled
///       while queued), its hooks and counting; without the mutex.
///   void leftQueue(bool locked)
///       a task left a queue (`locked`: the mutex is held).
///   void leftLocalQueue(PoolWorker&)
///       a task left that worker's own local queue, on its thread (no lock
///       held).
///   void tookWork()
///       a worker took an item and holds no lock.
///   WorkerExit exitRuleLocked(std::size_t sharedQueued)
///       whether an idle worker exits now, with `sharedQueued` tasks in the
///       shared queue; asked after continuations and due work are served.
///   bool runningLocked(), bool running()
///       the host takes new work (with the mutex / a relaxed look).
///   bool idleExpiredLocked(std::size_t size, IdleTime&)
///       whether an idle worker, one of `size`, has timed out; fills in
///       `timed`, `since` and `deadline` (the host's clock).
///   void workerParkedLocked(std::unique_lock<std::mutex>&)
///       a worker went on the idle stack and found nothing to run.
///   void waitParkedLocked(PoolWorker&, std::unique_lock<std::mutex>&, const IdleTime&)
///       waits until the worker is signalled or, if timed, its deadline
///       comes (on the host's clock).
///   void workerExitedLocked(PoolWorker*, std::unique_lock<std::mutex>&)
///       the worker exits (its loop returns after this).
///   bool acceptsContinuationsLocked()
///       the host still takes continuations (a thread started now would not
///       outlive it).
///   bool startWorkerLocked(typename Host::FactoryErrors&)
///       starts a worker for waiting continuations; false if none could
///       start (the failures in the list).
///   void reportFactoryErrors(const typename Host::FactoryErrors&)
///       without the mutex: reports those failures.
///   void cancelledInQueue(PoolWorker&)
///       a task a join took off the queue was cancelled while queued.
///   void runJoined(PoolWorker&, Ref<TaskCore>&)
///       runs a task a join has started, nested on the worker's stack: its
///       hooks and counting, shutdownNow()'s record of it.
///
/// The calls are resolved at compile time: the task-by-task ones
/// (runTask(), leftQueue(), leftLocalQueue(), tookWork()) cost what a direct call costs.
template <class Host>
class Engine {
 public:
  /// One item a worker runs: a task or a continuation.
  struct Work {
    Ref<TaskCore> task;
    std::coroutine_handle<> continuation;
    bool counted = false;  // a hand-off: already counted as active
    bool yield = false;    // a continuation that yielded (see PoolWorker's yields)
    explicit operator bool() const noexcept { return task || continuation; }
  };

  /// An engine for `host`, whose `mutex` guards the parts noted above.
  /// `localQueues`: workers keep local queues and submissions from outside
  /// go to a lock-free ring of `ringCapacity` (else the shared queue is
  /// the locked queue `spec` describes alone).
  Engine(Host& host, std::mutex& mutex, const WorkQueue& spec, std::size_t ringCapacity, bool localQueues)
      : localQueues(localQueues), shared(spec, localQueues ? ringCapacity : 0), host_(host), mutex_(mutex) {}
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// The loop of `worker`, on its own thread: runs `first` (if valid,
  /// counted active already by whoever started the worker), then serves
  /// work in order until the host's exit rule lets the worker go; returns
  /// after Host::workerExitedLocked(), with the mutex released. Throws
  /// what the host's calls throw.
  void run(PoolWorker& worker, Ref<TaskCore> first);

  /// Queues the continuation `handle`. On `here` (the calling thread's own
  /// worker, or null) it goes to the worker's next-continuation slot, whose
  /// previous occupant, if any, goes on in its place; otherwise to the
  /// shared continuations, waking a parked worker or, with no worker at all,
  /// asking the host to start one. Returns null once queued, or the
  /// continuation the caller must resume itself: the host takes no more
  /// continuations, no thread could be started, or there was no memory to
  /// queue it. Takes the mutex unless the slot takes it. Never throws.
  std::coroutine_handle<> post(PoolWorker* here, std::coroutine_handle<> handle) noexcept;
  /// From `here`'s own thread: queues `handle` behind the work waiting now
  /// (its slot, its local queue, the shared queues), or posts it when
  /// nothing waits. Returns what post() returns.
  [[gnu::always_inline]] inline std::coroutine_handle<> postYield(PoolWorker& here,
                                                                  std::coroutine_handle<> handle) noexcept;
  /// From `worker`'s own thread: pushes `task` on its local queue (the
  /// queue takes the reference), then tells a searching worker or wakes a
  /// parked one as Parking.h's protocol asks. \throws std::bad_alloc if
  /// the queue cannot grow (`task` untouched).
  [[gnu::always_inline]] inline void pushLocal(PoolWorker& worker, Ref<TaskCore>& task);
  /// From `worker`'s own thread, whose coroutine is about to await `task`
  /// (a task of its local queues, joinable): runs it here and now unless
  /// another thread started it (PoolTaskRun.cpp states the rules). Never
  /// throws.
  void join(PoolWorker& worker, TaskCore& task) noexcept;

  /// Requires: the mutex held. Gives `task` to a parked worker (counted as
  /// active and as a task of that worker) and wakes it; false, `task`
  /// untouched, if none is parked.
  bool handOffLocked(PendingTask& task);
  /// Requires: the mutex held. A worker took shared work: if more is
  /// queued and nobody searches, wakes one more worker.
  void wakeHelperLocked();
  /// Requires: the mutex held. After the locked shared queues changed.
  void publishSharedWorkLocked() noexcept {
    parking.publishSharedLocked(shared.lockedSizeLocked() + continuations.size());
  }
  /// Requires: the mutex held. True if some worker has work of its own waiting.
  [[nodiscard]] bool anyLocalWorkLocked() const noexcept { return workers.anyLocalWorkLocked(); }

  /// Whether workers keep local queues (and the shared queue has a ring).
  const bool localQueues;
  /// workers.size(), readable without the mutex (written by `workers`).
  std::atomic<std::size_t> sizeMirror{0};
  /// The idle workers and the wake-up protocol (Parking.h states the rules).
  Parking parking;
  /// The shared queue: for bounded() and unbounded() queues a ring that
  /// submissions from outside push to without the mutex, and its overflow;
  /// for priority() and synchronous() the locked queue alone (SharedQueue.h
  /// states the rules).
  SharedQueue shared;
  /// Continuations with no worker's slot to go to; guarded by the mutex.
  RingBuffer<std::coroutine_handle<>> continuations;
  /// The workers (WorkerList.h states the rules); guarded by the mutex.
  WorkerList workers{sizeMirror};
  /// Timer work that became due, run like continuations (DueWork.h states
  /// the rules; pushed under the mutex).
  DueWork due;

 private:
  // Requires: the mutex held. The next work for a worker; empty if it must exit.
  Work takeLocked(PoolWorker& worker, std::unique_lock<std::mutex>& lock);
  // The newest task of the worker's own local queue, without the mutex.
  Work popLocal(PoolWorker& worker);
  // The oldest due timer task, without the mutex; empty if none.
  Work popDue();
  // The oldest task of the shared ring, without the mutex (or with it, `locked`).
  Work popInject(bool locked);
  // Requires: the mutex held. What `thief` takes from the other workers
  // (WorkerList::stealLocked(): its order).
  Work stealLocked(PoolWorker& thief);
  // Requires: the mutex held (released while spinning, held again on
  // return). Spins for a short window, without the lock, until work appears
  // anywhere; the caller then looks for it under the lock, and parks if it
  // finds none. Every idle worker spins, so that no worker parks between two
  // bursts (docs/performance.md, "Idle workers").
  void spinForWorkLocked(std::unique_lock<std::mutex>& lock);
  // Runs one work item without the mutex.
  void execute(PoolWorker& worker, Work work);

  Host& host_;
  std::mutex& mutex_;
};

}  // namespace coexec::detail
