// SPDX-License-Identifier: BSL-1.0
// syncWait(): the run loop that a blocked thread drives (the scheduler of the
// coroutines syncWait runs), and the check that refuses it on a pool thread.
//
// Invariants: a handle posted to the loop is resumed exactly once, by the
// loop while syncWait runs, or by the poster once the loop has closed; the
// loop's state lives until the loop and every awaiter that recorded it
// (Scheduler::retain) have let it go.

#include "coexec/SyncWait.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "coexec/detail/Scheduler.h"
#include "coro/Runtime.h"
#include "foundation/RingBuffer.h"
#include "foundation/SpinWait.h"

namespace coexec::detail {

void checkSyncWaitAllowed() {
  if (currentPoolIdentity() != nullptr) {
    throw std::logic_error(fmt::format(
        "coexec::syncWait: called on a thread of pool '{}'; blocking a pool thread until a task finishes can "
        "deadlock the pool (co_await the task instead)",
        currentPoolName()));
  }
}


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

}  // namespace coexec::detail
