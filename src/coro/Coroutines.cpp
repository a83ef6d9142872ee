// SPDX-License-Identifier: BSL-1.0
// The coroutine layer's compiled parts: syncWait's run loop, resumeOn's hop,
// the checks that refuse blocking waits on a pool's own threads, and the error
// for starting a Task twice, and thisThreadId() (out of line on purpose: see
// ThisThread.h).

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "pool/PoolImpl.h"
#include "scheduler/RingBuffer.h"
#include "scheduler/SpinWait.h"
#include "coexec/ResumeOn.h"
#include "coexec/SyncWait.h"
#include "coexec/ThisThread.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/CoroutineTask.h"

namespace coexec {
namespace detail {
namespace {

/// The work item of a resumeOn() hop from outside the pool. Running it resumes
/// the coroutine on the running thread. If it settles without running
/// (rejected, discarded, dropped after shutdownNow), the coroutine is resumed
/// with that error instead: never left suspended.
///
/// A hop that runs on the very thread that is suspending the coroutine
/// (callerRuns, or a custom policy that runs the task in the caller) runs
/// inside await_suspend: resuming the coroutine there would nest its rest
/// in this call, and the next refused hop would nest again (the stack grows
/// with every hop). Instead the hop marks itself kRanInline and await_suspend
/// returns false, so the coroutine goes on from its own frame.
class HopTask final : public TaskCore {
 public:
  enum : int { kSuspending = 0, kSuspended = 1, kFailedEarly = 2, kRanInline = 3 };

  explicit HopTask(std::coroutine_handle<> coroutine)
      : TaskCore(/*hasFuture=*/true, false, 0), coroutine_(coroutine), suspender_(std::this_thread::get_id()) {
    setContinuation(&HopTask::onSettled, this);
  }

  std::atomic<int> phase{kSuspending};
  std::exception_ptr error;  // written before the coroutine resumes with it

 private:
  void invoke() override {
    ran_ = true;
    // On the suspending thread while await_suspend still runs: let it return
    // false (the coroutine then goes on without nesting). Only that thread can
    // see kSuspending here and be the suspender, so no other thread races us.
    if (std::this_thread::get_id() == suspender_ && phase.load(std::memory_order_acquire) == kSuspending) {
      phase.store(kRanInline, std::memory_order_release);
      return;
    }
    resume(coroutine_);
  }
  void discardValue() noexcept override {}

  // On the thread that settled the hop.
  static void onSettled(void* self) noexcept {
    auto* hop = static_cast<HopTask*>(self);
    if (hop->ran_) return;  // resumed by invoke()
    try {
      hop->error = hop->consume();
    } catch (...) {
      hop->error = std::current_exception();
    }
    int expected = kSuspending;
    // acq_rel: the suspending thread must see `error`; we must see that it
    // finished suspending before we resume.
    if (hop->phase.compare_exchange_strong(expected, kFailedEarly, std::memory_order_acq_rel)) {
      return;  // await_suspend is still running: it will not suspend
    }
    resume(hop->coroutine_);
  }

  std::coroutine_handle<> coroutine_;
  const std::thread::id suspender_;  // the thread in await_suspend
  bool ran_ = false;                 // written and read on the thread that runs the hop
};

}  // namespace

constinit thread_local TaskCore* tlsCurrentTask = nullptr;

namespace {

// The thread's claim (RunSegments.h): 0, kInResumption, or a TaskCore's
// address (aligned to 8), with kSegmentClosed once its segment closed here.
constexpr std::uintptr_t kInResumption = 2;
constexpr std::uintptr_t kSegmentClosed = 1;
constinit thread_local std::uintptr_t tlsRunSegment = 0;
}  // namespace

constinit std::atomic<bool> runSegmentsTimed{false};

void enableRunSegments() noexcept { runSegmentsTimed.store(true, std::memory_order_relaxed); }

namespace {

/// Stack kept free under the deepest nesting stackIsLow() allows, whatever
/// the thread's stack size (at least a quarter of it).
constexpr std::size_t kStackReserve = 64 * 1024;

/// ThreadSanitizer records a thread's call stack in a table whose entries
/// hold at most 65,535 frames (a deeper stack aborts the process with
/// "CHECK failed: sanitizer_stackdepot.cpp"), so under it nesting stops
/// after this much more of the stack: at least 16 bytes a frame keeps a
/// nest under 32,768 frames. 0: the whole stack but the reserve.
#if defined(__SANITIZE_THREAD__)
constexpr std::size_t kStackBudget = 512 * 1024;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr std::size_t kStackBudget = 512 * 1024;
#else
constexpr std::size_t kStackBudget = 0;
#endif
#else
constexpr std::size_t kStackBudget = 0;
#endif

/// The lowest address of the calling thread's stack that nesting may reach;
/// 0 if the stack cannot be read (then nothing counts as low).
std::uintptr_t stackFloorOfThisThread() noexcept {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
  void* base = nullptr;
  std::size_t size = 0;
  const bool known = pthread_attr_getstack(&attr, &base, &size) == 0;
  pthread_attr_destroy(&attr);
  if (!known) return 0;
  const std::size_t reserve = std::max(kStackReserve, size / 4);
  // The stack grows down from base + size; a stack too small for the
  // reserve is always low (its whole length is the reserve).
  std::uintptr_t floor = reinterpret_cast<std::uintptr_t>(base) + std::min(reserve, size);
  if constexpr (kStackBudget != 0) {
    // Counted from where this first question is asked (near the bottom of
    // the thread's nest: a worker's loop, a syncWait), not from the top of
    // the stack's mapping, which under ThreadSanitizer starts with its own
    // per-thread state (about 770 KiB).
    const auto here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
    if (here > kStackBudget) floor = std::max(floor, here - kStackBudget);
  }
  return floor;
}

}  // namespace

bool stackIsLow() noexcept {
  // Per thread, read once (constinit: no guard on access). A thread's stack
  // does not move.
  constinit thread_local std::uintptr_t floor = 0;
  constinit thread_local bool known = false;
  if (!known) {
    floor = stackFloorOfThisThread();
    known = true;
  }
  return reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0)) < floor;
}

Trampoline*& currentTrampoline() noexcept {
  thread_local Trampoline* current = nullptr;
  return current;
}

void resume(std::coroutine_handle<> handle) noexcept {
  Trampoline trampoline{handle};
  Trampoline*& current = currentTrampoline();
  Trampoline* const outer = std::exchange(current, &trampoline);
  TaskCore* const task = tlsCurrentTask;  // the resumed coroutines set their own; ours comes back after
  // Ditto for the run-segment claim (RunSegments.h), once some pool records
  // latency; one that names a task stays: a pool thread starting a coroutine
  // task has claimed its first segment, which the coroutine runs in here.
  const bool timed = runSegmentsTimed.load(std::memory_order_relaxed);
  std::uintptr_t claim = 0;
  if (timed) {
    claim = tlsRunSegment;
    if (claim == 0) tlsRunSegment = kInResumption;
  }
  while (trampoline.next)
    std::exchange(trampoline.next, {}).resume();
  current = outer;
  tlsCurrentTask = task;
  if (timed) tlsRunSegment = claim;  // (one that saw no claim set none: the inner ones restore theirs)
}

void endRunSegment(TaskCore& task) noexcept {
  const auto self = reinterpret_cast<std::uintptr_t>(&task);
  if (tlsRunSegment != self) return;  // not timed here (resumed by a foreign awaitable)
  task.runTiming.close();
  tlsRunSegment = self | kSegmentClosed;
}

void continueRunSegment(TaskCore& task) noexcept {
  const auto self = reinterpret_cast<std::uintptr_t>(&task);
  if (tlsRunSegment == self || tlsRunSegment == 0) return;  // open already; or outside every resumption
  task.runTiming.segmentStart = task.runTiming.clock->now().time_since_epoch().count();
  tlsRunSegment = self;
}

std::uintptr_t claimRunSegment(TaskCore& task) noexcept {
  return std::exchange(tlsRunSegment, reinterpret_cast<std::uintptr_t>(&task));
}

void restoreRunSegmentClaim(std::uintptr_t claim) noexcept { tlsRunSegment = claim; }

void throwUnstartableTask(std::string_view scope, std::string_view operation, bool empty) {
  if (empty) {
    throw std::invalid_argument(fmt::format(
        "coexec::{}{}: the Task is empty (default-constructed or moved from), so there is no coroutine to start.",
        scope, operation));
  }
  throw std::logic_error(
      fmt::format("coexec::{}{}: the Task was already started (co_awaited, run by syncWait or submitted to a pool); a "
                  "Task runs once, and starting it again would resume a coroutine that is running or has finished.",
                  scope, operation));
}

void reportUnobservedFailure(const std::exception_ptr& error) noexcept {
  printDropped("a fire-and-forget coroutine run outside its pool", "-", "-", error);
}

void checkBlockingWaitAllowed(const TaskCore& core, const char* operation) {
  const void* pool = currentPoolIdentity();
  if (pool == nullptr || pool != core.owner || core.isDone()) return;
  throw std::logic_error(fmt::format(
      "coexec::{}: called on a thread of pool '{}' for an unfinished task of that same pool; blocking a pool thread "
      "on its own pool's work can deadlock (co_await the Future instead)",
      operation, static_cast<const PoolImpl*>(pool)->name_));
}

void checkSyncWaitAllowed() {
  if (const PoolImpl* pool = currentPool()) {
    throw std::logic_error(fmt::format(
        "coexec::syncWait: called on a thread of pool '{}'; blocking a pool thread until a task finishes can "
        "deadlock the pool (co_await the task instead)",
        pool->name_));
  }
}

// ---- RunLoop -----------------------------------------------------------------

/// How long syncWait's loop spins for a continuation before it sleeps.
constexpr auto kRunLoopSpin = std::chrono::microseconds(20);

class RunLoop::State final : public Scheduler {
 public:
  void post(std::coroutine_handle<> handle) noexcept override {
    {
      std::lock_guard lock(mutex);
      if (!closed) {
        try {
          ready.push(handle);
        } catch (...) {
          std::fputs("coexec: fatal: out of memory queueing a continuation for syncWait\n", stderr);
          std::terminate();
        }
        pending.store(true, std::memory_order_release);
        wake.notify_one();
        return;
      }
    }
    resume(handle);  // syncWait has returned: go on on this thread
  }
  bool retain(const TaskCore* /*awaitingTask*/) noexcept override {
    refs.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  void release() noexcept override {
    // acq_rel: the last owner sees every other owner's use before deleting.
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  std::atomic<std::uint32_t> refs{1};  // syncWait's RunLoop, plus each awaiter that recorded it
  std::mutex mutex;
  std::condition_variable wake;
  RingBuffer<std::coroutine_handle<>> ready;  // guarded by mutex; no allocation in steady state
  std::atomic<bool> pending{false};           // !ready.empty() || finished, readable without the lock
  bool finished = false;                      // guarded by mutex
  bool closed = false;                        // guarded by mutex
};

RunLoop::RunLoop() : state_(new State) {}

RunLoop::~RunLoop() {
  {
    std::lock_guard lock(state_->mutex);
    state_->closed = true;
  }
  state_->release();
}

Scheduler* RunLoop::scheduler() const noexcept { return state_; }

void RunLoop::finish() noexcept {
  std::lock_guard lock(state_->mutex);
  state_->finished = true;
  state_->pending.store(true, std::memory_order_release);
  state_->wake.notify_one();  // under the lock: the loop may end as soon as it is released
}

void RunLoop::run() {
  std::unique_lock lock(state_->mutex);
  while (true) {
    if (!state_->finished && state_->ready.empty()) {
      // Spin a moment before sleeping: the awaited work is often about to
      // finish, and a futex wake-up costs the pool thread that posts and
      // this thread together far more than the spin.
      lock.unlock();
      spinUntil([&] { return state_->pending.load(std::memory_order_acquire); }, kRunLoopSpin);
      lock.lock();
    }
    state_->wake.wait(lock, [&] { return state_->finished || !state_->ready.empty(); });
    if (state_->ready.empty()) return;  // finished and nothing left
    const std::coroutine_handle<> next = state_->ready.pop();
    if (state_->ready.empty() && !state_->finished) state_->pending.store(false, std::memory_order_relaxed);
    lock.unlock();
    resume(next);
    lock.lock();
  }
}

// ---- resumeOn -----------------------------------------------------------------

bool ResumeOnAwaiter::suspend(std::coroutine_handle<> awaiting) {
  PoolImpl& pool = *pool_->impl_;
  if (currentPool() == &pool) {
    task_ |= kSuspended;
    pool.postYield(awaiting);  // a yield: behind the work already waiting, never rejected
    return true;
  }
  auto* hop = new HopTask(awaiting);
  Ref<TaskCore> local = Ref<TaskCore>::adopt(hop);
  hop_ = local;
  task_ |= kSuspended;
  // From here on the coroutine may be resumed by another thread (and this
  // awaiter destroyed): only `local` and `hop` may be touched, until we know
  // it was not. The hop is not the coroutine's child: it is the coroutine
  // itself going on, so it is admitted without a link to the current task.
  try {
    pool_->admitUnlinked(PendingTask(local));  // may throw (abort): the coroutine then resumes with it
  } catch (...) {
    task_ &= ~kSuspended;  // not suspended: the exception comes out of the co_await here
    throw;
  }
  int expected = HopTask::kSuspending;
  // False (go on at once, on this thread) if the hop failed before we could
  // suspend, or ran here, inside admit (kRanInline: see HopTask).
  if (hop->phase.compare_exchange_strong(expected, HopTask::kSuspended, std::memory_order_acq_rel)) return true;
  task_ &= ~kSuspended;
  return false;
}

void ResumeOnAwaiter::await_resume() {
  // The coroutine goes on: its task's code again.
  auto* const task = reinterpret_cast<TaskCore*>(task_ & ~kSuspended);
  if ((task_ & kSuspended) != 0) setCurrentTask(task);
  segmentGoesOn(task);  // in a new run segment (RunSegments.h)
  if (!hop_) return;
  auto* hop = static_cast<HopTask*>(hop_.get());
  if (hop->error) std::rethrow_exception(hop->error);
}

}  // namespace detail

detail::ResumeOnAwaiter resumeOn(ThreadPoolExecutor& pool) noexcept { return detail::ResumeOnAwaiter(pool); }

// Out of line, in the library: a call the optimizer of the caller's coroutine
// cannot see through, so it cannot merge two of them across a suspension.
std::thread::id thisThreadId() noexcept { return std::this_thread::get_id(); }

}  // namespace coexec
