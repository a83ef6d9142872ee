// SPDX-License-Identifier: BSL-1.0
// The coroutine runtime: the thread's current task, current scheduler and
// trampoline; resume() and resumeFor(), the one place that decides whether a
// continuation runs inline or is posted; run segments; the pool a thread
// works for (set by the pool's workers, read by the blocking-wait checks);
// the report of an exception nobody can take; thisThreadId() (out of line on
// purpose: see ThisThread.h).
//
// Invariants:
// - resume() returns with the calling thread's current task (and run-segment
//   claim) as it found them, whatever the resumed coroutines set.
// - resumeFor() runs a continuation inline only on a thread of its own
//   scheduler (or for no scheduler), outside every NoInlineResumption, with
//   stack to spare; otherwise it posts it, and a post never fails.
// - The current scheduler, the pool a thread works for and the trampoline
//   are read only through these out-of-line functions (a coroutine body
//   inlined elsewhere never caches their addresses); the current task is
//   the exception, read and written inline by the awaiters (Scheduler.h).

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "coexec/Future.h"
#include "coexec/ThisThread.h"
#include "coexec/detail/CoroutineTask.h"
#include "coexec/detail/NoInlineResumption.h"
#include "coexec/detail/Scheduler.h"
#include "coro/Runtime.h"
#include "foundation/ExceptionMessage.h"

namespace coexec {
namespace detail {
constinit thread_local TaskCore* tlsCurrentTask = nullptr;

namespace {

constinit thread_local Scheduler* tlsScheduler = nullptr;
// The pool whose worker this thread is (enterPoolThread()), or null/empty.
constinit thread_local const void* tlsPoolIdentity = nullptr;
constinit thread_local const std::string* tlsPoolName = nullptr;
constinit thread_local Joiner* tlsJoiner = nullptr;

}  // namespace

Scheduler* currentScheduler() noexcept { return tlsScheduler; }

Scheduler* exchangeCurrentScheduler(Scheduler* scheduler) noexcept { return std::exchange(tlsScheduler, scheduler); }

void resumeFor(Scheduler* scheduler, std::coroutine_handle<> handle) noexcept {
  if (scheduler != nullptr && (scheduler != tlsScheduler || NoInlineResumption::active() || stackIsLow())) {
    scheduler->post(handle);  // a pool from its own thread: the worker's next continuation, after this item
  } else {
    resume(handle);
  }
}

RunResult runAsCurrent(TaskCore& task, TaskCore::BeforeSettle beforeSettle, void* arg,
                       TaskCore::Deferred* deferred) noexcept {
  TaskCore* const previous = std::exchange(tlsCurrentTask, &task);
  std::exception_ptr error = task.runBody();
  tlsCurrentTask = previous;
  return task.settleRun(std::move(error), beforeSettle, arg, deferred);
}

void enterPoolThread(const void* identity, const std::string& name, Joiner& joiner) noexcept {
  tlsPoolIdentity = identity;
  tlsPoolName = &name;
  tlsJoiner = &joiner;
}

void leavePoolThread() noexcept {
  tlsPoolIdentity = nullptr;
  tlsPoolName = nullptr;
  tlsJoiner = nullptr;
}

void joinInline(TaskCore& task) noexcept {
  // Only the executor that admitted the task runs it here: a task of
  // another pool waits for that pool's threads. (The caller has checked
  // task.joinable().) Nesting is bounded by the thread's stack, as inline
  // resumption is: deep enough, the coroutine suspends instead.
  if (Joiner* const joiner = tlsJoiner; joiner != nullptr && task.owner == tlsPoolIdentity && !stackIsLow()) {
    joiner->join(task);
  }
}

const void* currentPoolIdentity() noexcept { return tlsPoolIdentity; }

std::string_view currentPoolName() noexcept { return tlsPoolName != nullptr ? *tlsPoolName : std::string_view(); }

void printDropped(std::string_view what, std::string_view poolName, std::string_view threadName,
                  const std::exception_ptr& error) noexcept {
  try {
    fmt::print(stderr, "coexec: {} on pool '{}' thread '{}' threw: {}\n", what, poolName, threadName, messageOf(error));
  } catch (...) {
    std::fputs("coexec: an exception was dropped and could not be printed\n", stderr);
  }
}

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
      operation, currentPoolName()));
}

}  // namespace detail

// Out of line, in the library: a call the optimizer of the caller's coroutine
// cannot see through, so it cannot merge two of them across a suspension.
std::thread::id thisThreadId() noexcept { return std::this_thread::get_id(); }

}  // namespace coexec
