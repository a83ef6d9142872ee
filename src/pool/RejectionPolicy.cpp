// SPDX-License-Identifier: BSL-1.0
#include "coexec/RejectionPolicy.h"

#include <stdexcept>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "coexec/PendingTask.h"
#include "coexec/ThreadPoolExecutor.h"
#include "pool/PoolImpl.h"
#include "pool/RejectionReporter.h"

namespace coexec {

RejectionPolicy::RejectionPolicy(Kind kind, Handler handler, std::chrono::nanoseconds timeout)
    : kind_(kind), handler_(std::move(handler)), timeout_(timeout) {
  if (kind_ == Kind::custom && !handler_) {
    throw std::invalid_argument("coexec::RejectionPolicy: the handler callable is empty");
  }
}

RejectionPolicy RejectionPolicy::abort() { return {Kind::abort, {}}; }
RejectionPolicy RejectionPolicy::callerRuns() { return {Kind::callerRuns, {}}; }
RejectionPolicy RejectionPolicy::discard() { return {Kind::discard, {}}; }
RejectionPolicy RejectionPolicy::discardOldest() { return {Kind::discardOldest, {}}; }

RejectionPolicy RejectionPolicy::abortWithReport(ReportSink sink, std::chrono::nanoseconds interval) {
  if (!sink) throw std::invalid_argument("coexec::RejectionPolicy::abortWithReport: the sink is empty");
  if (interval < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(
        fmt::format("coexec::RejectionPolicy::abortWithReport: interval must be non-negative, got {}", interval));
  }
  RejectionPolicy policy(Kind::abortWithReport, {}, interval);
  policy.reporter_ = detail::Ref<detail::RefCounted>::adopt(new detail::RejectionReporter(std::move(sink), interval));
  return policy;
}

RejectionPolicy RejectionPolicy::abortWithReport() {
  return abortWithReport([](std::string_view report) { fmt::print(stderr, "{}\n", report); });
}

RejectionPolicy RejectionPolicy::newThreadRuns(std::size_t maxTemporaryThreads) {
  if (maxTemporaryThreads == 0) {
    throw std::invalid_argument(
        "coexec::RejectionPolicy::newThreadRuns: maxTemporaryThreads must be at least 1, got 0");
  }
  RejectionPolicy policy(Kind::newThreadRuns, {});
  policy.maxTemporaryThreads_ = maxTemporaryThreads;
  return policy;
}

RejectionPolicy RejectionPolicy::block(std::chrono::nanoseconds timeout) {
  if (timeout < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(
        fmt::format("coexec::RejectionPolicy::block: timeout must be non-negative, got {}", timeout));
  }
  return {Kind::block, {}, timeout};
}

std::string_view RejectionPolicy::name() const noexcept {
  switch (kind_) {
    case Kind::abort: return "abort";
    case Kind::callerRuns: return "callerRuns";
    case Kind::discard: return "discard";
    case Kind::discardOldest: return "discardOldest";
    case Kind::block: return "block";
    case Kind::abortWithReport: return "abortWithReport";
    case Kind::newThreadRuns: return "newThreadRuns";
    case Kind::custom: return "custom";
  }
  return "unknown";
}

void RejectionPolicy::operator()(PendingTask& task, ThreadPoolExecutor& pool) const {
  if (!task.valid()) throw std::invalid_argument("coexec::RejectionPolicy: the task handle is empty");
  // Settles the task with RejectedExecution; a task without a Future has
  // nobody to tell, so the caller learns it by the exception, unless the
  // policy silently discards by design.
  detail::Ref<detail::TaskCore>& core = detail::PendingTaskAccess::core(task);
  // Settles the task with the pool's RejectedExecution (its Future reports
  // it) and returns the exception.
  const auto reject = [&] {
    RejectedExecution error = pool.rejection(task);
    core->abandon(std::make_exception_ptr(error));
    return error;
  };
  const auto refuse = [&](bool throwIfNoFuture) {
    const bool hasFuture = task.hasFuture();
    RejectedExecution error = reject();
    PendingTask dropped = std::move(task);
    if (throwIfNoFuture && !hasFuture) throw error;
  };
  switch (kind_) {
    case Kind::abort: {
      throw reject();
    }
    case Kind::callerRuns:
      if (pool.isShutdown()) {
        refuse(/*throwIfNoFuture=*/true);
      } else if (core->isCoroutine()) {
        // Watched wherever it finishes (its failure is reported as a worker
        // would report it), the pool held until then. Refused if the pool
        // has shut down since the look above.
        if (!pool.impl_->runOutside(core, detail::PoolImpl::Outside::caller)) refuse(/*throwIfNoFuture=*/true);
      } else if (!task.hasFuture()) {
        task.run();
      } else {
        // A failure nobody reads is reported as on a pool thread.
        const detail::Ref<detail::TaskCore> ran = core;
        task.run();
        if (ran->failedOnItsOwn()) pool.impl_->sink_->armIfUnread(*ran, "(caller)");
      }
      return;
    case Kind::discard: refuse(/*throwIfNoFuture=*/false); return;
    case Kind::discardOldest:
      // Evict the head and retry, as long as there is a head to evict.
      while (!pool.isShutdown()) {
        const bool evicted = pool.evictOldest();
        if (pool.tryAdmit(task)) return;
        if (!evicted) break;
      }
      refuse(/*throwIfNoFuture=*/false);
      return;
    case Kind::block:
      if (!pool.offerWithin(task, timeout_)) {
        throw reject();
      }
      return;
    case Kind::abortWithReport: {
      RejectedExecution error = reject();
      static_cast<detail::RejectionReporter&>(*reporter_).rejected(pool, error);  // no lock of the pool is held here
      throw error;
    }
    case Kind::newThreadRuns: {
      if (pool.impl_->runOnTemporaryThread(task, maxTemporaryThreads_)) return;
      throw reject();
    }
    case Kind::custom: handler_(task, pool); return;
  }
}

}  // namespace coexec
