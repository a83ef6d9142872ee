// SPDX-License-Identifier: BSL-1.0
// ThreadPoolOptions::recordLatency: the timed run of a task and the merge of
// the workers' histograms.
//
// Invariants:
// - A worker's recorders (Worker::latency) have one writer, the worker, for
//   the tasks it runs (runTimed(): dequeued ones from runTask(), joined ones
//   from runJoined()); stats() and latency() read them under mutex_.
// - A worker that exits adds its recorders to the pool's tallies under
//   mutex_ (workerExitedLocked, Tallies::addExitedLocked()), whose buckets
//   exist from the pool's construction: no snapshot counts a sample twice or
//   misses it, and the exit never allocates.
// - The admission stamp (PoolTaskState::stampAdmission(), PoolImpl::stampAdmission()) is written
//   before the task is published, by whoever admits it: submit's three
//   paths (tryPushLocal, tryInject, tryAdmitLocked) and a timer's firing
//   (its due time).

#include "coexec/ThreadPoolExecutor.h"

#include "coexec/detail/RunSegments.h"
#include "pool/PoolImpl.h"

namespace coexec::detail {

void PoolImpl::runTimed(Worker& worker, Ref<TaskCore>& task) {
  WorkerLatency& latency = *worker.latency;
  const Clock::time_point start = clock_.now();
  if (const PoolTaskState state = poolState(*task); state.stamped()) {
    latency.queueWait.record(start - Clock::time_point(Clock::duration(state.admittedAt())));
  }
  TaskCore::RunTiming& timing = task->runTiming;
  timing.clock = &clock_;
  timing.segmentStart = start.time_since_epoch().count();
  timing.total = 0;
  if (task->isCoroutine()) {
    // Its first segment opens now, on this thread; its run time is recorded
    // when it finishes (recordCoroutineRun()), wherever that is.
    const std::uintptr_t outer = claimRunSegment(*task);
    runStarted(worker, task);
    restoreRunSegmentClaim(outer);
    return;
  }
  runStarted(worker, task);
  // TaskCore::runBody() closed the segment when the body returned, before the
  // settlement (which may resume an awaiting coroutine here); a
  // beforeExecute hook that threw ran no body: its own time counts.
  latency.runTime.record(timing.segmentStart == TaskCore::RunTiming::kClosed ? Clock::duration(timing.total)
                                                                               : clock_.now() - start);
}

void PoolImpl::recordCoroutineRun(const TaskCore& task) noexcept {
  const Clock::duration ran(task.runTiming.total);
  if (Worker* const worker = tlsWorker; worker != nullptr && tlsPool == this) {
    worker->latency->runTime.record(ran);  // this worker's own recorder
    return;
  }
  tallies_.recordOutsideRun(ran);  // finished on another thread: the shared recorder
}

PoolLatency PoolImpl::latencyLocked() const {
  PoolLatency merged;
  if (!recordLatency_) return merged;
  tallies_.mergeLatencyLocked(merged, engine_.workers);
  return merged;
}

}  // namespace coexec::detail

namespace coexec {

PoolLatency ThreadPoolExecutor::latency() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->latencyLocked();
}

}  // namespace coexec
