#pragma once

// Where a pool's uncaught exceptions go: the handler (or stderr), shared by
// the pool and by every armed report of an unobserved failure, so that a
// Future dropped after the pool is gone still reports through the handler
// the pool was built with. Immutable after construction: no lock.

#include <exception>
#include <string>
#include <string_view>

#include "coexec/ThreadPoolOptions.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/TaskCore.h"

namespace coexec::detail {

class UncaughtSink final : public RefCounted {
 public:
  UncaughtSink(std::string poolName, UncaughtExceptionHandler handler, bool reportUnobserved)
      : poolName_(std::move(poolName)), handler_(std::move(handler)), reportUnobserved_(reportUnobserved) {}

  /// Hands `error` to the handler (or prints it) on the calling thread; a
  /// report with `info.unobserved` is dropped when reportUnobservedFailures
  /// is off. Never throws: a throwing handler's exception is printed.
  void report(const std::exception_ptr& error, const TaskInfo& info) const noexcept;

  /// Arms `task` (a submitted task that has just failed on `threadName`;
  /// the caller holds a reference) to report its failure if nobody reads it
  /// (TaskCore::armUnobservedReport). Does nothing when the option is off or
  /// the result was consumed already (a combinator's continuation took it
  /// as the task settled). Never throws: without memory for the report the
  /// task is not armed, and that is printed.
  void armIfUnread(TaskCore& task, std::string_view threadName) noexcept;

  /// Where startWatched() runs a task: the name its reports give the thread.
  enum class Outside : unsigned char { caller, temporaryThread };

  /// Starts the coroutine task `task` (started already: tryStart() returned
  /// true) on the calling thread, a thread that is not one of the pool's
  /// workers (a caller under callerRuns(), a temporary thread of
  /// newThreadRuns()), and watches it to its end, wherever it finishes: a
  /// failure of a fire-and-forget coroutine is reported to the handler, and
  /// a submitted one's failure that nobody reads is armed as on a worker.
  /// Counts in no pool counter (the task was never admitted). The sink
  /// keeps itself alive until the coroutine finishes. Returns at the
  /// coroutine's first suspension. Reports name the thread "(caller)" or
  /// "(temporary thread)", as `where` says. Never throws.
  void startWatched(Ref<TaskCore> task, Outside where) noexcept;

  [[nodiscard]] const std::string& poolName() const noexcept { return poolName_; }

 private:
  /// The observer of the coroutines startWatched() runs from one kind of
  /// thread: on the thread that finishes each, it reports a failure and
  /// drops the sink's reference taken for it.
  class Watch final : public CoroutineObserver {
   public:
    Watch(UncaughtSink& sink, std::string_view threadName) noexcept : sink_(sink), threadName_(threadName) {}
    void coroutineFinished(TaskCore& task, const RunResult& result) noexcept override;
    /// Nothing: a task run outside the pool is not the pool's to cancel.
    void coroutineTokenCreated(TaskCore& /*task*/) override {}

   private:
    UncaughtSink& sink_;
    const std::string_view threadName_;
  };

  const std::string poolName_;
  const UncaughtExceptionHandler handler_;
  const bool reportUnobserved_;
  Watch callerWatch_{*this, "(caller)"};
  Watch temporaryWatch_{*this, "(temporary thread)"};
};

}  // namespace coexec::detail
