// SPDX-License-Identifier: BSL-1.0
#pragma once

// Helpers shared by the ThreadPoolOptions tests (ThreadPoolOptionsHooksTest,
// ThreadPoolOptionsThreadsTest): a task's own exception type, a copy of a
// TaskInfo, and a log that pool threads write to.

#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "coexec/ThreadPoolOptions.h"

namespace coexec::test {

/// A task's own exception type, to tell it apart from anything the pool throws.
struct TaskError {
  int code;
};

/// A copy of a TaskInfo (its views only live for the call).
struct SeenInfo {
  std::string poolName;
  std::string threadName;
  bool hasFuture = false;
  int priority = 0;
  std::thread::id thread;
};

inline SeenInfo copyOf(const TaskInfo& info) {
  return {std::string(info.poolName), std::string(info.threadName), info.hasFuture, info.priority,
          std::this_thread::get_id()};
}

/// Collects values from pool threads; read them on the test thread once the
/// writers are done.
template <class T>
class Log {
 public:
  void add(T value) {
    std::lock_guard lock(mutex_);
    items_.push_back(std::move(value));
  }
  std::vector<T> items() const {
    std::lock_guard lock(mutex_);
    return items_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<T> items_;
};

}  // namespace coexec::test
