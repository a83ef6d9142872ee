// SPDX-License-Identifier: BSL-1.0
#pragma once

// Runs one Program (model/Program.h) on a fresh ThreadPoolExecutor and checks,
// after it, what coexec promises (docs/reliability.md):
//
// - the ledger: taskCount == completed + failed + cancelled + discarded +
//   drained, with nothing queued, no thread and no timer left, the state
//   TERMINATED, drainedCount equal to the tasks shutdownNow() returned;
// - every Future and PeriodicHandle the program got settles, with an outcome
//   its task could have had (its value only if its body returned it; its own
//   error only if its body threw it; OperationCancelled only if something
//   could cancel it; RejectedExecution or BrokenPromise only if it never
//   started);
// - every task body ran at most once, and every one that started finished;
// - every error a body threw is reported exactly once, where the docs say
//   (its Future, the awaiting parent, the producer, or the uncaught handler),
//   and every failed run of a periodic schedule reaches the handler once;
// - a combinator or TaskGroup never returns while a task it started has not
//   settled, and none of its tasks starts after it returned;
// - a KeyedExecutor's tasks of one key never overlap and run in order;
// - a coroutine of a type foreign to coexec, started by a task body and
//   awaiting coexec's awaitables (a Future, sleepFor, whenAll), ends once,
//   with an outcome the task it awaited could have had, and, if it started
//   on one of the pool's workers, before the pool terminated;
// - over-aligned payloads (an alignas(32) capture, an alignas(64) result)
//   are aligned and intact where the body runs and where the result is read;
// - after the pool is destroyed: the process has as many threads as before,
//   and (COEXEC_FAULT_INJECTION builds) the frame allocator as many live
//   blocks: no coroutine frame or task state leaked;
// - under a fault plan: the fault fired is reported where the fault table
//   says, and the pool still runs new tasks after it.
//
// A program that hangs (a Future that never settles, a pool that never
// terminates) is reported by a watchdog, which prints the program and aborts.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/Program.h"

namespace coexec::stress {

struct RunReport {
  std::vector<std::string> violations;  ///< empty: the program passed
  std::uint64_t tasks = 0;              ///< task bodies the program created (children included)
  std::uint64_t started = 0;            ///< of those, bodies that ran
  std::uint64_t futures = 0;            ///< Futures checked
  std::uint64_t handles = 0;            ///< periodic handles checked
  std::uint64_t pendingReturned = 0;    ///< PendingTasks shutdownNow() returned (all accounted)
  std::uint64_t faultsFired = 0;        ///< faults the plan injected
  std::uint64_t siteCalls = 0;          ///< calls of the plan's fault site (the sweep's range of N)
  std::uint64_t admitted = 0;           ///< the pool's taskCount at the end
  std::uint64_t foreign = 0;            ///< foreign coroutines started (each ended, once)
  std::uint64_t foreignOnWorkers = 0;   ///< of those, started on a worker (ended before the termination)
  std::uint64_t alignedResults = 0;     ///< over-aligned results checked where they were read
  /// What the foreign coroutines got from the task they awaited: its value,
  /// its error, OperationCancelled, RejectedExecution or BrokenPromise.
  std::array<std::uint64_t, 4> foreignOutcomes{};
  std::string finalStats;               ///< the pool's last stats() line
  [[nodiscard]] bool ok() const { return violations.empty(); }
};

struct RunOptions {
  /// How long the watchdog lets one program run before it declares a hang.
  std::uint32_t watchdogSeconds = 120;
  /// Check the thread count and the live frame blocks after the program. Off
  /// where other threads may start or end meanwhile.
  bool checkProcess = true;
};

/// Runs `program` and checks it. Blocks until the program has ended (a
/// bounded time: its operations are short). Not reentrant: one at a time.
RunReport runProgram(const Program& program, const RunOptions& options = {});

}  // namespace coexec::stress
