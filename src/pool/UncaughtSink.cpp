// SPDX-License-Identifier: BSL-1.0
// A pool's uncaught-exception sink, and the report armed on a submitted task
// that failed: it runs from the task's destructor if the result was never
// consumed (see TaskCore::armUnobservedReport and
// ThreadPoolOptions::reportUnobservedFailures). The report holds a reference
// to the sink, not to the pool: the task may outlive the pool.

#include "pool/UncaughtSink.h"

#include <cstdio>
#include <new>
#include <string>

#include "pool/PoolImpl.h"

namespace coexec::detail {
namespace {

/// The armed report of one failed task.
class PoolUnobservedReport final : public UnobservedFailureReport {
 public:
  PoolUnobservedReport(UncaughtSink& sink, std::string_view threadName, const TaskCore& task)
      : sink_(addRefTo(sink)), threadName_(threadName), priority_(task.priority()), nameId_(task.nameId()) {}

  void report(const std::exception_ptr& error) noexcept override {
    TaskInfo info{sink_->poolName(), threadName_, true, priority_, taskNameAt(nameId_)};
    info.unobserved = true;
    sink_->report(error, info);
  }

 private:
  static Ref<UncaughtSink> addRefTo(UncaughtSink& sink) noexcept {
    sink.addRef();
    return Ref<UncaughtSink>::adopt(&sink);
  }

  Ref<UncaughtSink> sink_;
  std::string threadName_;
  int priority_;
  std::uint32_t nameId_;
};

}  // namespace

void UncaughtSink::report(const std::exception_ptr& error, const TaskInfo& info) const noexcept {
  if (info.unobserved && !reportUnobserved_) return;
  if (!handler_) {
    printDropped(info.unobserved ? "a task whose failure nobody read" : "a task", info.poolName, info.threadName,
                 error);
    return;
  }
  try {
    handler_(error, info);
  } catch (...) {
    printDropped("the uncaught-exception handler", info.poolName, info.threadName, std::current_exception());
  }
}

void UncaughtSink::armIfUnread(TaskCore& task, std::string_view threadName) noexcept {
  if (!reportUnobserved_ || task.isConsumed()) return;
  try {
    task.armUnobservedReport(new PoolUnobservedReport(*this, threadName, task));
  } catch (...) {  // std::bad_alloc (the report, or its copy of the thread name)
    std::fputs("coexec: no memory to watch a failed task's result; its failure is not reported if nobody reads it\n",
               stderr);
  }
}

}  // namespace coexec::detail
