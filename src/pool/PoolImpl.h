// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <atomic>
#include <condition_variable>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "coro/Runtime.h"
#include "foundation/CoarseClock.h"
#include "foundation/MpmcRing.h"
#include "foundation/RingBuffer.h"
#include "foundation/WorkStealingDeque.h"
#include "engine/TaskQueue.h"
#include "engine/TimerService.h"
#include "engine/Engine.h"
#include "lifecycle/Lifecycle.h"
#include "admission/PoolSizes.h"
#include "admission/Room.h"
#include "admission/ThreadStarts.h"
#include "pool/PoolTaskState.h"
#include "pool/ScheduledItem.h"
#include "pool/Tallies.h"
#include "engine/PoolWorker.h"
#include "pool/UncaughtSink.h"
#include "coexec/PendingTask.h"
#include "coexec/PoolStats.h"
#include "coexec/ThreadDump.h"
#include "coexec/TaskOptions.h"
#include "coexec/ThreadPoolOptions.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/Scheduler.h"
#include "coexec/detail/TaskCore.h"

namespace coexec {
class ThreadPoolExecutor;
}

namespace coexec::detail {

class RoomWaiter;
class TerminationWait;
struct TemporaryJob;
class OneShotTimer;
class PeriodicState;
class PeriodicRun;
struct TimerWork;
template <class T, std::size_t N>
class SmallList;

/// The state of a ThreadPoolExecutor: the admission front, the lifecycle,
/// timers, statistics and reports, over its engine (engine_: the workers,
/// their queues, the continuations, parking; Engine.h states its order of
/// service and wake-up rules), whose host it is: the engine asks it for
/// each decision of the Java contract (Engine.h lists the calls). The
/// pool's mutex guards admission's slow path, the lifecycle, and the
/// engine's worker list, idle stack and locked queues; the hot paths take
/// no lock:
///
/// - Submissions from outside (bounded and unbounded queues, with at least
///   corePoolSize threads) push to the engine's shared ring, lock-free.
/// - Submissions from the pool's own threads go to the submitting worker's
///   local queue (tryPushLocal(): the pool's checks, then the engine's
///   push and wake-up).
/// - The bound of bounded(n) covers the shared and the local queues
///   together (places reserved in room_, given back by leftQueue()).
///   Priority and synchronous queues keep every task in the locked path; a
///   synchronous() queue hands a task straight to a parked worker.
///
/// Besides admitted tasks, workers run continuations: coroutines resuming on
/// this pool after an await. Continuations bypass admission (never rejected,
/// even after shutdown) and run before queued tasks. `life_.inFlight` counts
/// coroutine tasks that started and have not finished; the pool does not
/// terminate while any is in flight.
class PoolImpl final : public Scheduler, public CoroutineObserver, public Joiner {
 public:
  PoolImpl(ThreadPoolExecutor& owner, ThreadPoolOptions options);

  /// Per-thread counters and a worker's state: PoolWorker.h.
  using Counters = PoolCounters;
  using Worker = PoolWorker;
  using Launch = WorkerLaunch;

  /// Failures of the thread factory, collected under the lock and reported to
  /// the uncaught handler after it is released.
  using FactoryErrors = std::vector<std::exception_ptr>;

  // Requires: mutex_ held. Admission steps 1-3; true if the task was taken.
  bool tryAdmitLocked(PendingTask& task, FactoryErrors& errors);
  // Requires: mutex_ held. Starts a worker (with `first` if valid).
  bool addWorkerLocked(PendingTask& first, FactoryErrors& errors);
  // Requires: mutex_ held. Enters TERMINATED if the pool is done; may release
  // and re-acquire the lock to run the terminated hook.
  void tryTerminateLocked(std::unique_lock<std::mutex>& lock);
  // Requires: mutex_ held. withLatency false: a RejectedExecution's snapshot.
  PoolStats statsLocked(bool withLatency = true) const;
  PoolLatency latencyLocked() const;  // requires: mutex_ held (PoolLatency.cpp)
  // Requires: mutex_ held. dumpThreads() (ThreadDump.cpp).
  ThreadDump dumpLocked() const;
  const char* saturationReasonLocked(bool factoryFailed) const;

  void runWorker(Worker* worker, Ref<TaskCore> first);
  // The engine's loop on `worker` (PoolTaskRun.cpp, where the calls it makes
  // on a task are inlined); returns when the worker exits.
  void runLoop(Worker& worker, Ref<TaskCore> first);
  /// The lock-free admission of `task` from outside the pool (step 2 for
  /// bounded and unbounded queues with at least corePoolSize threads). False,
  /// task untouched, if it needs the locked path: below core, the queue full
  /// or overflowing, the pool not running, or another queue kind.
  bool tryInject(PendingTask& task);
  /// Requires: mutex_ held. Step 2: puts `task` in the shared queue (whose
  /// place, for bounded(n), the caller has reserved).
  bool pushSharedLocked(PendingTask& task);
  /// pushSharedLocked() for a task that reserved a place (Room::reserve()):
  /// gives the place back if it throws (std::bad_alloc; the task is then
  /// left with the caller).
  bool pushQueuedLocked(PendingTask& task);
  /// Requires: mutex_ held. Tasks in the shared queue.
  [[nodiscard]] std::size_t sharedQueuedLocked() const noexcept { return engine_.shared.sizeLocked(); }
  /// Requires: mutex_ held. Waits out the lock-free admissions under way
  /// (after a change of state). They never take the lock while counted.
  void waitAdmissionsLocked() const noexcept;
  /// Requires: mutex_ held, and no lock-free push under way (admitting_
  /// drained after a change of state, or purging_ set). Every task of the
  /// shared queue in order (SharedQueue::drainLocked()).
  std::vector<PendingTask> drainSharedLocked() { return engine_.shared.drainLocked(); }
  /// From one of this pool's threads: queues `task` on that worker's local
  /// queue. False (task untouched) if the pool is not running or the queue
  /// kind keeps every task shared.
  bool tryPushLocal(PendingTask& task);
  // Scheduler: resume a continuation on this pool.
  void post(std::coroutine_handle<> handle) noexcept override;
  /// From one of this pool's threads: resumes `handle` on this pool after the
  /// work already waiting (resumeOn(pool) from the pool itself). Never
  /// rejected.
  void postYield(std::coroutine_handle<> handle) noexcept;
  // CoroutineObserver: a coroutine task of this pool ended. Counted, then
  // settled, then its hook and report, then out of flight.
  void coroutineEnded(TaskCore& task, std::exception_ptr error) noexcept override;
  // Its afterExecute hook and failure report, when there is one of them.
  void coroutineEndedSlow(TaskCore& task, const RunResult& result) noexcept;
  // CoroutineObserver: a coroutine task of this pool created its token on
  // demand; tracked in life_.inFlight from now on.
  void coroutineTokenCreated(TaskCore& task) override;

  /// Where runOutside() runs a task: the name its reports give the thread.
  enum class Outside : unsigned char { caller, temporaryThread };
  /// Starts the coroutine task `task` (not started yet) on the calling
  /// thread, a thread that does not run it as one of the pool's workers (a
  /// caller under callerRuns(), a temporary thread of newThreadRuns()), and
  /// watches it to its end, wherever it finishes: a fire-and-forget
  /// coroutine's failure reaches the uncaught handler, and a submitted one's
  /// failure that nobody reads is armed as on a worker ("(caller)" or
  /// "(temporary thread)" as the thread name). Counts in no pool counter
  /// (the task was never admitted), but holds the pool in flight
  /// (an InFlight hold) until the coroutine has finished and the
  /// task's reference is dropped: the pool does not terminate while such a
  /// coroutine runs, so neither the task's state nor its report outlives
  /// the pool. Returns at the coroutine's first suspension, true; for a
  /// task cancelled meanwhile, at once, true. Returns false, `task`
  /// untouched, for a caller when the pool no longer runs (callerRuns()
  /// refuses the task then). Takes mutex_ for a caller (not held by it); a
  /// temporary thread keeps the pool from terminating already. Never throws.
  bool runOutside(Ref<TaskCore>& task, Outside where) noexcept;
  // Joiner: the runtime's joinInline() on one of our workers (PoolTaskRun.cpp).
  void join(TaskCore& task) noexcept override;
  /// The engine's join (Engine::join()) found `task` cancelled while
  /// queued: counted as the loop counts it.
  void cancelledInQueue(Worker& worker) noexcept;
  /// Runs `task`, which the engine's join has started on `worker`'s thread
  /// (the calling thread), nested inside the await: its hooks and counting,
  /// shutdownNow()'s record of it (PoolTaskRun.cpp). Never throws.
  /// Inlined into the engine's join (its one caller, in PoolTaskRun.cpp).
  [[gnu::always_inline]] inline void runJoined(Worker& worker, Ref<TaskCore>& task) noexcept;
  /// A task settled as cancelled when it was submitted (its token, or the
  /// task submitting it, was cancelled already): counted in taskCount and
  /// cancelledCount, never admitted.
  void countCancelledAtSubmission() noexcept {
    countersHere().tasks.fetch_add(1, std::memory_order_relaxed);
    count(Outcome::cancelled);  // release: after the task count (see statsLocked)
  }
  /// Reports each failure of the thread factory to the uncaught handler
  /// (inline: admission calls it on every submission, nearly always empty).
  void reportFactoryErrors(const FactoryErrors& errors) {
    if (!errors.empty()) reportFactoryErrorsSlow(errors);
  }
  void reportFactoryErrorsSlow(const FactoryErrors& errors);
  void reportUncaught(const std::exception_ptr& error, const TaskInfo& info) noexcept;
  /// RejectionPolicy::newThreadRuns(): runs `task` on a new temporary thread
  /// (taking it) and returns true, or leaves it and returns false when the
  /// pool is not running, `maxThreads` temporary threads are alive, or no
  /// thread can be started. Takes mutex_ (not held by the caller).
  bool runOnTemporaryThread(PendingTask& task, std::size_t maxThreads);
  /// The body of a temporary thread (TemporaryThreads.cpp).
  void runTemporary(std::unique_ptr<TemporaryJob> job) noexcept;
  /// Starts up to `count` threads for queued work (core resize); after unlock,
  /// reports factory errors.
  std::size_t startWorkers(std::size_t count, bool onlyForQueuedWork);

  ThreadPoolExecutor& owner_;
  const std::string name_;
  const WorkQueue queueSpec_;
  const RejectionPolicy policy_;
  const ThreadFactory factory_;
  const Hooks hooks_;
  // The uncaught-exception handler, shared with the armed reports of
  // unobserved failures (which may outlive the pool).
  const Ref<UncaughtSink> sink_;

  /// The observer of the coroutine tasks runOutside() starts from one kind
  /// of thread: on the thread that finishes each, it reports a failure,
  /// drops the task's reference, then the pool's hold taken for it.
  class OutsideWatch final : public CoroutineObserver {
   public:
    OutsideWatch(PoolImpl& pool, std::string_view threadName) noexcept : pool_(pool), threadName_(threadName) {}
    void coroutineEnded(TaskCore& task, std::exception_ptr error) noexcept override;
    /// Nothing: a task run outside the pool is not the pool's to cancel.
    void coroutineTokenCreated(TaskCore& /*task*/) override {}

   private:
    PoolImpl& pool_;
    const std::string_view threadName_;
  };
  OutsideWatch callerWatch_{*this, "(caller)"};
  OutsideWatch temporaryWatch_{*this, "(temporary thread)"};

  alignas(64) mutable std::mutex mutex_;
  // Hands life_'s whenTerminated() awaiters back (PoolTermination.cpp).
  void resumeTerminationWaitersLocked(std::unique_lock<std::mutex>& lock);  // Requires: mutex_ held; TERMINATED

  // The counters of threads that are not workers (and of exited workers),
  // the rejected, discarded and drained counts, the latency recorded
  // outside the workers (Tallies.h states the rules).
  Tallies tallies_;
  /// The counters the calling thread updates: its worker's, or the outside
  /// ones (tallies_).
  Counters& countersHere() noexcept;  // defined below: inline on the submit path
  // The engine: the workers, their local queues, the shared queue, the
  // continuations, the due timer work, the idle workers (Engine.h states
  // the rules); guarded by mutex_ where it says so.
  Engine<PoolImpl> engine_;
  alignas(64) std::atomic<PoolState> stateMirror_{PoolState::running};  // life_'s state, readable without the lock
  std::atomic<std::size_t> coreMirror_{0};                              // sizes_' corePoolSize, ditto
  // purge() calls under way: lock-free submissions take the locked path
  // meanwhile (a count, for concurrent purges).
  std::atomic<std::size_t> purging_{0};
  // Submissions between their check of the pool's state and their push to
  // the shared ring (on its own line: only submitters write it). shutdown() and shutdownNow() change the state, then
  // wait for this to drain: afterwards every push either landed or saw the new state.
  alignas(64) std::atomic<std::size_t> admitting_{0};
  // The places of a bounded(n) queue and the producers waiting for room
  // (Room.h states the rules).
  Room room_;

  /// A task left a queue without the pool's lock (`locked`: with it): gives
  /// its place back and wakes the block() producers waiting for room.
  void leftQueue(bool locked) noexcept;
  /// A task left `worker`'s own local queue, on its thread: as leftQueue(),
  /// but the place may stay as the worker's credit (Room.h).
  void leftLocalQueue(PoolWorker& worker) noexcept;
  /// After a place was given back: wakes the block() producers and serves
  /// submitWhenRoom()'s (`locked`: the pool's mutex is held).
  void servePlaceLeft(bool locked) noexcept;
  // submitWhenRoom()'s FIFO (RoomWait.cpp). *Locked: mutex_ held. Serving
  // admits from the head while there is room; the waits it ends, and those
  // a shutdown ends (refused, counted), are chained for finishRoomWaits(),
  // which hands their coroutines back without the lock.
  void appendRoomWaiterLocked(RoomWaiter& waiter) noexcept;
  void removeRoomWaiterLocked(RoomWaiter& waiter) noexcept;
  void serveRoomWaitersLocked(RoomWaiter*& ended, FactoryErrors& errors);
  void serveRoomWaiters() noexcept;  // takes mutex_
  RoomWaiter* endRoomWaitsLocked() noexcept;
  void finishRoomWaits(RoomWaiter* ended) noexcept;
  static void onRoomTimeout(void* context) noexcept;  // a timeout's timer (context: the pool)

  // The lifecycle: the state (stateMirror_ is its mirror), and what holds a
  // pool that is shut down from terminating besides its queues, timers and
  // threads: coroutine tasks in flight, guests' holds, timer pins,
  // whenTerminated() hand-overs (Lifecycle.h, InFlight.h state the rules).
  Lifecycle life_{stateMirror_};
  /// Drops one count of `shard` (InFlight::leaveIfRunning()), terminating
  /// the pool if that was the last thing it waited for. Touches the pool no
  /// more afterwards.
  void leaveFlight(std::uint8_t shard) noexcept;
  /// Requires: mutex_ held. The total in flight (InFlight::totalLocked()).
  [[nodiscard]] std::size_t inFlightLocked() const noexcept;

  // corePoolSize, maximumPoolSize, keepAliveTime, allowCoreThreadTimeOut
  // and the largest size (PoolSizes.h states the rules; coreMirror_ is its
  // mirror).
  PoolSizes sizes_;

  // Everything below is guarded by mutex_.
  std::vector<std::thread> exited_;  // threads of exited workers, not yet joined
  // Worker numbers, the retry of a failed start, the places of
  // RejectionPolicy::newThreadRuns()'s temporary threads (ThreadStarts.h
  // states the rules).
  ThreadStarts starts_;

  // ---- timers (PoolTimers.cpp) ----------------------------------------------
  Clock& clock_;
  ManualClock* const manualClock_;  // clock_, if it is a ManualClock (keep-alive then waits on it)
  const bool runDelayedAfterShutdown_;
  const bool continuePeriodicAfterShutdown_;
  const bool recordLatency_;  // ThreadPoolOptions::recordLatency
  // Guarded by mutex_:
  LiveItems liveItems_;  // the live timer items, the armed count (PoolTimers.h states the rules)

  /// Requires: mutex_ held. Makes `item` live (the list takes a reference)
  /// and arms its timer for `deadline`, or hands its work over at once if it
  /// is already due by `now`. \throws RejectedExecution if the pool is shut down
  /// (counted); what the timer service throws (the item is then not live).
  void addItemLocked(ScheduledItem& item, Clock::time_point deadline, Clock::time_point now, TimerWork& work);
  /// Requires: mutex_ held; `item` live and not armed. Arms its timer (or
  /// hands its work over at once if due by `now`, the clock's time read by
  /// the caller). \throws what the timer service throws.
  void armLocked(ScheduledItem& item, Clock::time_point deadline, Clock::time_point now, TimerWork& work);
  /// Requires: mutex_ held; `item` live. Takes it off the live list; the
  /// list's reference goes to `released` (dropped after unlocking).
  void removeItemLocked(ScheduledItem& item, SmallList<ScheduledItem*, 2>& released) noexcept;
  /// Requires: mutex_ held; `item` live and not armed (its timer fired, or
  /// it was due at once). Hands its work over: a one-shot's task to engine_.due
  /// (the item leaves the list), a periodic schedule's next run to engine_.due, or
  /// ends the schedule (cancelled, or the pool is shut down).
  void fireLocked(ScheduledItem& item, TimerWork& work);
  /// Requires: mutex_ held. Queues a due task in the engine's due work (taking `task`'s
  /// reference) and gets a thread to it, like post().
  void pushDueLocked(TaskCore* task, FactoryErrors& errors);
  /// The timer service's callback: `context` is an armed ScheduledItem.
  static void onTimer(void* context) noexcept;
  /// The timer service's batch firer (TimerService::setBatchFirer): fires
  /// the batch's timer items under one lock.
  static void fireBatch(void* owner, TimerService::Firing* batch, std::size_t count) noexcept;
  /// Requires: mutex_ held (released and taken again if `work` needs it).
  /// Does what is left of a firing.
  void finishFiringLocked(std::unique_lock<std::mutex>& lock, TimerWork& work) noexcept;
  /// Requires: mutex_ held. Drops a pin (see ScheduledItem) and terminates
  /// the pool if it is done.
  void unpinLocked(std::unique_lock<std::mutex>& lock) noexcept;
  /// Requires: mutex_ held. Disarms and ends the timers that shutdown()
  /// (`now` false) or shutdownNow() (`now` true, with `drained` for the due
  /// one-shot tasks it returns) must stop; see ThreadPoolOptions.
  void stopTimersLocked(bool now, TimerWork& work, std::vector<PendingTask>* drained);
  /// A run of `state` returned (`error`: what it threw; null on success):
  /// re-arms the schedule or ends it. On the pool thread that ran it.
  void periodicRunEnded(PeriodicState& state, const std::exception_ptr& error) noexcept;
  /// Requires: mutex_ held. True if `state` must end now rather than run
  /// again, with how in `how`: null after its cancel(), OperationCancelled
  /// when the pool's shutdown ends it.
  [[nodiscard]] bool periodicMustEndLocked(const PeriodicState& state, std::exception_ptr& how) const;
  /// A run of `state` failed before its body ran (a throwing beforeExecute).
  void periodicRunNotStarted(PeriodicState& state, const std::exception_ptr& error) noexcept;
  /// ManualClock keep-alive: wakes the idle workers so that they read the
  /// clock again (a timer callback; `context` is the pool).
  static void onKeepAliveAlarm(void* context) noexcept;
  /// Work with no thread to run it, because the thread factory failed when
  /// the work arrived and no worker exists (core 0, or every thread timed
  /// out): tries again to start one, after ThreadStarts::kRetryFirst,
  /// doubling up to kRetryMost while the factory keeps failing
  /// (PoolAdmission.cpp).
  /// Without it the work would wait for a later submission that may never
  /// come, and the pool would never terminate. A timer callback on the
  /// pool's clock (`context` is the pool).
  static void onThreadRetry(void* context) noexcept;
  /// Requires: mutex_ held. Arms onThreadRetry once.
  void armThreadRetryLocked() noexcept;
  /// Requires: mutex_ held. Work waits in the pool for a thread: shared
  /// tasks (unless shutdownNow() stopped the pool), continuations or due
  /// timer work.
  [[nodiscard]] bool workWaitsLocked() const noexcept;
  /// Requires: mutex_ held; no worker exists and work waits. Starts one; if
  /// the factory fails, arms onThreadRetry. The factory's errors go to
  /// `errors`, for reportFactoryErrors() once the lock is released.
  void startThreadForWaitingWorkLocked(FactoryErrors& errors);

  // Scheduler: sleeps on this pool's threads use its clock.
  TimerService* timerService() noexcept override;
  // Scheduler: an awaiter suspending a coroutine on one of this pool's
  // workers holds the pool until it has posted the continuation, unless the
  // coroutine is a task in flight here (which holds the pool already). So a
  // guest coroutine (one that hopped on with resumeOn(), or that a caller-run
  // policy or PendingTask::run() started on a worker) keeps the pool from
  // terminating while it waits on the pool, as a task of the pool does: its
  // continuation is never dropped with the pool's timers, and never posted
  // to a pool that is gone. Counted as an InFlight hold.
  bool retain(const TaskCore* awaitingTask) noexcept override;
  void release() noexcept override;

  friend class OneShotTimer;
  friend class PeriodicState;
  friend struct TimerWork;

 public:
  // ---- the engine's host (Engine.h lists what each call decides) ----------
  /// A dequeued task on `worker`: started unless cancelled while queued,
  /// run between the hooks, counted; shutdownNow() sees it as `current`.
  // Inlined into the engine's loop (its one caller): a task's path pays no call.
  [[gnu::always_inline]] inline void runTask(Worker& worker, Ref<TaskCore>& task);
  /// A worker took an item: serves the submitWhenRoom() waiters that room
  /// appeared for under the lock.
  void tookWork() {
    if (room_.signalled()) serveRoomWaiters();
  }
  /// Requires: mutex_ held. STOP with nothing in flight, SHUTDOWN with
  /// nothing queued, or above maximumPoolSize.
  WorkerExit exitRuleLocked(std::size_t sharedQueued) const noexcept;
  [[nodiscard]] bool runningLocked() const noexcept { return life_.stateLocked() == PoolState::running; }
  [[nodiscard]] bool running() const noexcept {
    return stateMirror_.load(std::memory_order_relaxed) == PoolState::running;
  }
  /// Requires: mutex_ held. keepAliveTime and allowCoreThreadTimeOut, on
  /// the pool's clock.
  bool idleExpiredLocked(std::size_t size, IdleTime& idle) const;
  /// Requires: mutex_ held. An idle worker is room for a synchronous()
  /// hand-off and for submitWhenRoom() waiters (served without the lock).
  void workerParkedLocked(std::unique_lock<std::mutex>& lock);
  /// Requires: mutex_ held. A parked worker's wait: a ManualClock's
  /// keep-alive is an alarm on the pool's timer service (onKeepAliveAlarm).
  void waitParkedLocked(Worker& worker, std::unique_lock<std::mutex>& lock, const IdleTime& idle);
  // Requires: mutex_ held. The worker's counters into the tallies, its
  // thread to join, termination.
  void workerExitedLocked(Worker* worker, std::unique_lock<std::mutex>& lock);
  /// Requires: mutex_ held. Continuations are taken while the pool is
  /// alive (not terminated, not in its terminated hook).
  [[nodiscard]] bool acceptsContinuationsLocked() const noexcept { return life_.aliveLocked(); }
  /// Requires: mutex_ held. Starts a worker for waiting continuations
  /// (addWorkerLocked(), no first task); its factory's failures in `errors`.
  bool startWorkerLocked(FactoryErrors& errors);

 private:
  // Runs a task the calling worker has started (tryStart, tryStartJoined):
  // the hooks, its body (a coroutine to its first suspension), the count. A
  // coroutine takes `task`'s reference; a callable's the caller drops.
  void runStarted(Worker& worker, Ref<TaskCore>& task);
  // runStarted(), timed when recording latency; recordCoroutineRun(): a timed
  // coroutine task's end; stampAdmission(): before publication (PoolLatency.cpp).
  void runRecorded(Worker& w, Ref<TaskCore>& task) { w.latency ? runTimed(w, task) : runStarted(w, task); }
  void runTimed(Worker& worker, Ref<TaskCore>& task);
  void recordCoroutineRun(const TaskCore& task) noexcept;
  void stampAdmission(TaskCore& task) const noexcept {
    if (recordLatency_) poolState(task).stampAdmission(clock_.now().time_since_epoch().count());
  }
  // A callable task, between its hooks; counted (unless periodic) before
  // its Future settles.
  void runCallable(Worker& worker, TaskCore& task);
  // Adds a task's outcome to the counters: on one of our workers its own,
  // else the outside ones (tallies_). Called before the task's Future
  // settles, so that a stats() read after the settlement counts the task.
  void count(Outcome outcome) noexcept;
  static void countBeforeSettle(void* pool, Outcome outcome) noexcept { static_cast<PoolImpl*>(pool)->count(outcome); }
  [[nodiscard]] bool quiescentLocked() const noexcept;

 public:
  // Requires: mutex_ held. Drains every worker's local queue, oldest first.
  // Entries of tasks a join started (PoolTaskRun.cpp) go to `joined`, for the
  // caller to drop once it has released the lock.
  void drainLocalsLocked(std::vector<PendingTask>& into, std::vector<Ref<TaskCore>>& joined);
  // Requires: mutex_ held. Takes the oldest queued task (discardOldest's
  // victim): the shared queue's head, else the oldest of the first local
  // queue that has one; gives its place back. Empty if nothing is queued.
  // Entries of joined tasks met on the way go to `joined`, as above.
  PendingTask takeOldestLocked(std::vector<Ref<TaskCore>>& joined);
  // Requires: mutex_ held. Takes the oldest task of `victim`'s local queue,
  // giving its place back; false if it is empty.
  bool stealFrom(Worker& victim, Ref<TaskCore>& out) noexcept;

 public:
  // The pool's timers, on clock_. The last member, so destroyed first: a
  // callback in progress (on a ManualClock's advance() thread) finishes
  // while the rest of the pool is still whole.
  TimerService timers_;
};

/// The pool whose worker is running on this thread, or null.
PoolImpl* currentPool() noexcept;

// The calling thread's pool, worker and worker name while it runs a pool's
// worker loop (set by runWorker); null on every other thread.
inline thread_local PoolImpl* tlsPool = nullptr;
inline thread_local PoolImpl::Worker* tlsWorker = nullptr;
inline thread_local const std::string* tlsWorkerName = nullptr;

inline PoolImpl::Counters& PoolImpl::countersHere() noexcept {
  return tlsPool == this && tlsWorker != nullptr ? tlsWorker->counters : tallies_.outside();
}

}  // namespace coexec::detail
