// SPDX-License-Identifier: BSL-1.0
// RejectionPolicy::newThreadRuns(): a rejected task run on a temporary
// thread, outside the pool's bounds.
//
// Invariants:
// - A temporary thread holds a place (starts_, ThreadStarts.h) from its
//   reservation until its task has run and every reference it held is
//   dropped; the pool does not terminate while one is held
//   (tryTerminateLocked), and the thread that gives the last one back
//   terminates the pool if it is done, under the lock, as the last thing it
//   does with the pool (close() frees the pool only after it has taken the
//   lock and seen TERMINATED).
// - A place is reserved only while the pool is RUNNING and below the cap.
// - A coroutine task started on a temporary thread holds the pool in flight
//   from its start until it has finished and its state is released, wherever
//   it goes on after its first suspension (runOutside()).

#include <pthread.h>

#include <exception>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "coexec/ThreadPoolExecutor.h"
#include "pool/PoolImpl.h"

namespace coexec::detail {

/// What a temporary thread runs: the task and the thread's name.
struct TemporaryJob {
  PendingTask task;
  std::string threadName;
};

bool PoolImpl::runOnTemporaryThread(PendingTask& task, std::size_t maxThreads) {
  // The job first: out of memory here, no place has been taken yet (a
  // place taken and never given back would keep the pool from terminating).
  auto job = std::make_unique<TemporaryJob>();  // may throw std::bad_alloc to the caller
  std::size_t number = 0;
  {
    std::lock_guard lock(mutex_);
    if (life_.stateLocked() != PoolState::running) return false;
    number = starts_.reserveTemporaryLocked(maxThreads);
    if (number == 0) return false;  // at the cap
  }
  try {
    job->threadName = fmt::format("{}-tmp-{}", name_, number);
    job->task = std::move(task);
    TemporaryJob* const raw = job.get();
    std::thread([this, raw] { runTemporary(std::unique_ptr<TemporaryJob>(raw)); }).detach();
    (void)job.release();  // the thread owns it now
    return true;
  } catch (...) {                                        // std::bad_alloc, or std::system_error: no thread
    if (job->task.valid()) task = std::move(job->task);  // back to the caller, for the abort
    std::unique_lock lock(mutex_);
    starts_.unreserveTemporaryLocked();
    tryTerminateLocked(lock);
    return false;
  }
}

void PoolImpl::runTemporary(std::unique_ptr<TemporaryJob> job) noexcept {
  pthread_setname_np(pthread_self(), job->threadName.substr(0, 15).c_str());
  {
    // A submitted task's failure nobody reads is reported, as on a worker.
    const Ref<TaskCore> core = PendingTaskAccess::core(job->task);
    const bool watched = core->hasFuture() && !core->isCoroutine();
    try {
      if (core->isCoroutine()) {
        // Watched wherever the coroutine finishes, the pool held until then.
        (void)runOutside(PendingTaskAccess::core(job->task), Outside::temporaryThread);
      } else {
        job->task.run();
      }
    } catch (...) {  // an execute() task's exception: nobody else can take it
      const std::exception_ptr error = std::current_exception();
      if (!isOperationCancelled(error)) {
        reportUncaught(error, TaskInfo{name_, job->threadName, false, core->priority(), core->name()});
      }
    }
    if (watched && core->failedOnItsOwn()) sink_->armIfUnread(*core, job->threadName);
  }  // the task's references go here (its captures, maybe its report), while the pool is alive
  job.reset();
  std::unique_lock lock(mutex_);
  starts_.temporaryEndedLocked();
  tryTerminateLocked(lock);
  // The lock is released last: the pool may be freed as soon as it is.
}

}  // namespace coexec::detail
