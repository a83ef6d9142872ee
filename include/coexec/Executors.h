// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstddef>
#include <string>

#include "coexec/Export.h"
#include "coexec/ThreadPoolOptions.h"

namespace coexec {

/// Safe presets for ThreadPoolOptions: the pools Java's `Executors` factories
/// make, without their unbounded parts. Each returns a ThreadPoolOptions with
/// a bounded queue, a bounded thread count, named threads ("<name>-<n>") and
/// the `abort()` rejection policy, to build a pool from as it is or after
/// adjusting a field:
///
/// ```cpp
/// ThreadPoolExecutor pool(Executors::fixed(4, 1000));
/// ThreadPoolOptions options = Executors::cached(64, 0, "io");
/// options.rejectionPolicy = RejectionPolicy::callerRuns();
/// ThreadPoolExecutor io(std::move(options));
/// ```
///
/// An unbounded choice carries the word in its name (`fixedUnbounded`,
/// `singleUnbounded`). docs/production.md sets each preset beside the Java
/// factory it replaces and the failure that factory causes.
///
/// Thread safety: every function is a pure function of its arguments; call
/// it from any thread. None blocks.
class COEXEC_EXPORT Executors {
 public:
  Executors() = delete;

  /// Java's `newFixedThreadPool(n)` with a bounded queue: `n` core and maximum
  /// threads (started on demand, kept while idle), `bounded(capacity)`,
  /// `abort()`. A task beyond `n` running and `capacity` waiting is refused
  /// with RejectedExecution instead of piling up in memory.
  /// \throws std::invalid_argument naming `n` if it is 0, `capacity` if it is
  /// 0 (a fixed pool that can queue nothing: use cached(n, 0) for a
  /// hand-off), `name` if it is empty.
  static ThreadPoolOptions fixed(std::size_t n, std::size_t capacity, std::string name = "fixed");

  /// fixed() with an `unbounded()` queue: Java's `newFixedThreadPool(n)`
  /// exactly. Under overload the queue grows until the process runs out of
  /// memory; choose it only where the producers are bounded by other means.
  /// \throws std::invalid_argument naming `n` if it is 0, `name` if empty.
  static ThreadPoolOptions fixedUnbounded(std::size_t n, std::string name = "fixed");

  /// Threads on demand, up to `maxThreads`, each exiting after 60 s idle,
  /// and the `abort()` policy: core and maximum are both `maxThreads`, with
  /// `allowCoreThreadTimeOut` (keep-alive 60 s). So a task starts a new
  /// thread while fewer than `maxThreads` exist, and the pool shrinks to no
  /// thread when idle.
  ///
  /// - `capacity == 0`: a `synchronous()` hand-off, which is Java's
  ///   `newCachedThreadPool()` with a cap on threads: a task runs at once on
  ///   an idle thread or on a new one, and is refused once `maxThreads` are
  ///   busy.
  /// - `capacity > 0`: a `bounded(capacity)` queue behind the `maxThreads`
  ///   threads: tasks wait only once every thread exists and is busy, and
  ///   are refused once the queue is full too. (A core of 0, as in Java's
  ///   factory, would run one thread until the queue filled up.)
  ///
  /// Java's cached pool has maximumPoolSize Integer.MAX_VALUE: a burst of
  /// slow tasks makes one thread each until memory or the kernel's thread
  /// limit runs out. `maxThreads` is the bound it lacks.
  /// \throws std::invalid_argument naming `maxThreads` if it is 0, `name` if
  /// empty.
  static ThreadPoolOptions cached(std::size_t maxThreads, std::size_t capacity, std::string name = "cached");

  /// Java's `newSingleThreadExecutor()` with a bounded queue: one thread,
  /// tasks run one at a time in submission order, `bounded(capacity)`,
  /// `abort()`.
  /// \throws std::invalid_argument naming `capacity` if it is 0, `name` if
  /// empty.
  static ThreadPoolOptions single(std::size_t capacity, std::string name = "single");

  /// single() with an `unbounded()` queue: Java's `newSingleThreadExecutor()`
  /// exactly, with its hazard (see fixedUnbounded()).
  /// \throws std::invalid_argument naming `name` if it is empty.
  static ThreadPoolOptions singleUnbounded(std::string name = "single");

  /// A pool meant for `schedule()`, `scheduleAtFixedRate()` and
  /// `scheduleWithFixedDelay()`: `n` core and maximum threads, `abort()`.
  ///
  /// Java's `newScheduledThreadPool(n)` keeps its timers in an unbounded
  /// delay queue. In coexec a timer waiting for its deadline holds no place
  /// of the work queue (only `PoolStats::scheduledCount` counts it), and a
  /// timer that becomes due is admitted like a continuation: never rejected
  /// (docs/time.md). The work queue, `bounded(capacity)`, bounds only the
  /// tasks given to `submit()` / `execute()` directly.
  /// \throws std::invalid_argument naming `n` if it is 0, `capacity` if it
  /// is 0, `name` if empty.
  static ThreadPoolOptions scheduled(std::size_t n, std::size_t capacity = kScheduledQueueCapacity,
                                     std::string name = "scheduled");

  /// The default work-queue capacity of scheduled().
  static constexpr std::size_t kScheduledQueueCapacity = 1024;
  /// How long an idle thread of cached() stays (Java's cached pool's value).
  static constexpr std::chrono::seconds kCachedKeepAlive{60};
};

}  // namespace coexec
