// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "foundation/RingBuffer.h"
#include "coexec/PendingTask.h"
#include "coexec/WorkQueue.h"

namespace coexec::detail {

/// The pool's work queue, built from a WorkQueue description. Not
/// synchronised: every member requires the pool's lock.
class TaskQueue {
 public:
  explicit TaskQueue(const WorkQueue& spec) : spec_(spec) {}

  /// Takes `task` (leaving it empty) if there is room. A synchronous queue has
  /// none: the pool hands such tasks to idle threads directly. (For bounded(n)
  /// the pool reserves the place first, counting its local queues too.)
  bool offer(PendingTask& task);
  /// The next task in queue order, or an empty handle.
  PendingTask poll();
  /// Every queued task, in queue order; the queue is left empty.
  std::vector<PendingTask> drain();
  /// Makes room for `n` tasks in all, so that offers up to that size do not
  /// allocate (or throw). \throws std::bad_alloc.
  void reserve(std::size_t n);
  /// Removes the tasks whose Futures were cancelled and returns them (to be
  /// destroyed outside the pool's lock).
  std::vector<PendingTask> removeCancelled();

  [[nodiscard]] std::size_t size() const noexcept { return isPriority() ? heap_.size() : fifo_.size(); }
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }
  [[nodiscard]] const WorkQueue& spec() const noexcept { return spec_; }

  /// The task `task` holds, with its reference, for a queue that keeps bare
  /// references (the pool's shared ring); `task` is left empty.
  [[nodiscard]] static TaskCore* release(PendingTask& task) noexcept { return PendingTaskAccess::core(task).detach(); }
  /// A handle that takes over `task`'s reference (from release()).
  [[nodiscard]] static PendingTask adopt(TaskCore* task) noexcept {
    return PendingTaskAccess::make(Ref<TaskCore>::adopt(task));
  }

 private:
  struct Entry {
    int priority;
    std::uint64_t sequence;  // FIFO among equal priorities
    PendingTask task;
  };
  /// Heap order: the entry that must run first is the top.
  static bool runsLater(const Entry& a, const Entry& b) noexcept {
    return a.priority != b.priority ? a.priority < b.priority : a.sequence > b.sequence;
  }
  [[nodiscard]] bool isPriority() const noexcept { return spec_.kind() == WorkQueue::Kind::priority; }

  WorkQueue spec_;
  RingBuffer<PendingTask> fifo_;
  std::vector<Entry> heap_;
  std::uint64_t nextSequence_ = 0;
};

}  // namespace coexec::detail
