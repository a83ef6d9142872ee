// SPDX-License-Identifier: BSL-1.0
#include "engine/TaskQueue.h"

#include <algorithm>
#include <utility>

namespace coexec::detail {

bool TaskQueue::offer(PendingTask& task) {
  switch (spec_.kind()) {
    case WorkQueue::Kind::synchronous: return false;
    case WorkQueue::Kind::bounded:
    case WorkQueue::Kind::priority:
      if (size() >= spec_.capacity()) return false;
      break;
    case WorkQueue::Kind::unbounded: break;
  }
  // Room first: out of memory, `task` is left with the caller, untouched.
  if (isPriority()) {
    const int priority = task.priority();
    if (heap_.size() == heap_.capacity()) heap_.reserve(std::max<std::size_t>(16, heap_.capacity() * 2));
    heap_.push_back(Entry{priority, nextSequence_++, std::move(task)});
    std::push_heap(heap_.begin(), heap_.end(), runsLater);
  } else {
    fifo_.push(std::move(task));
  }
  return true;
}

PendingTask TaskQueue::poll() {
  PendingTask task;
  if (isPriority()) {
    if (heap_.empty()) return task;
    std::pop_heap(heap_.begin(), heap_.end(), runsLater);
    task = std::move(heap_.back().task);
    heap_.pop_back();
  } else {
    if (fifo_.empty()) return task;
    task = fifo_.pop();
  }
  return task;
}

void TaskQueue::reserve(std::size_t n) {
  if (isPriority()) {
    heap_.reserve(n);
  } else {
    fifo_.reserve(n);
  }
}

std::vector<PendingTask> TaskQueue::drain() {
  std::vector<PendingTask> tasks;
  tasks.reserve(size());
  while (!empty())
    tasks.push_back(poll());
  return tasks;
}

std::vector<PendingTask> TaskQueue::removeCancelled() {
  std::vector<PendingTask> removed;
  if (isPriority()) {
    const auto end =
        std::stable_partition(heap_.begin(), heap_.end(), [](const Entry& e) { return !e.task.isCancelled(); });
    for (auto it = end; it != heap_.end(); ++it)
      removed.push_back(std::move(it->task));
    heap_.erase(end, heap_.end());
    std::make_heap(heap_.begin(), heap_.end(), runsLater);
  } else {
    removed = fifo_.extractIf([](const PendingTask& t) { return t.isCancelled(); });
  }
  return removed;
}

}  // namespace coexec::detail
