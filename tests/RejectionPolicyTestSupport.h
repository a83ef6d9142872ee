// SPDX-License-Identifier: BSL-1.0
#pragma once

// Helpers shared by the rejection policy tests (RejectionPolicyBuiltInTest,
// RejectionPolicyBlockTest, RejectionPolicyCustomTest): a custom handler that
// records how it was called, the check of a RejectedExecution, and a pool
// saturated by two blocked tasks.

#include <atomic>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "Assertions.h"

#include "AdmissionTestSupport.h"
#include "TestSupport.h"
#include "coexec/RejectionPolicy.h"
#include "coexec/ThreadPoolExecutor.h"

namespace coexec::test {

/// What a custom handler saw. Written on the submitting thread; atomics so
/// that a handler run on another thread would be race-free too.
struct HandlerLog {
  std::atomic<int> calls{0};
  std::atomic<int> priority{-1};
  std::atomic<bool> hasFuture{false};
  std::atomic<bool> taskValid{false};
  std::atomic<const ThreadPoolExecutor*> pool{nullptr};
};

/// A handler that records its call and leaves the task where it is.
inline RejectionPolicy recordingHandler(HandlerLog& log) {
  return [&log](PendingTask& task, ThreadPoolExecutor& pool) {
    log.priority = task.priority();
    log.hasFuture = task.hasFuture();
    log.taskValid = task.valid();
    log.pool = &pool;
    ++log.calls;
  };
}

/// Checks that `error` is a RejectedExecution whose snapshot and message show
/// the pool `name` in `state`.
inline void requireRejectedExecution(const std::exception_ptr& error, std::string_view name, PoolState state) {
  using Catch::Matchers::Contains;
  REQUIRE(holds<RejectedExecution>(error));
  const std::optional<PoolStats> snapshot = snapshotOf(error);
  REQUIRE(snapshot);
  CHECK(snapshot->name == name);
  CHECK(snapshot->state == state);
  const std::string message = whatOf(error);
  CHECK_THAT(message, Contains(std::string(name)));
  CHECK_THAT(message, Contains(std::string(toString(state))));
}

/// A pool of (1, 1, bounded(1)) saturated by two blocked tasks: one running,
/// one queued (saturatedSize = max + queue capacity = 2).
struct Saturated {
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool;
  OpenOnExit release{gate};

  Saturated(std::string name, RejectionPolicy policy)
      : pool(poolOptions(std::move(name), 1, 1, WorkQueue::bounded(1), std::move(policy))) {
    pool.execute(blockingTask(gate, started));
    pool.execute(blockingTask(gate, started));
    REQUIRE(started.waitFor(1));
  }
};

}  // namespace coexec::test
