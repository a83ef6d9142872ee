// The checks after a stress program's run (model/Runner.h lists them): every
// Future and periodic handle settled as its task allows, every body that
// started ended, every error was reported once where the docs say, the
// ledger adds up.

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>

#include <fmt/format.h>

#include "coexec/coexec.h"
#include "coexec/detail/FaultInjection.h"
#include "model/Run.h"

namespace coexec::stress::impl {

using namespace std::chrono_literals;

void Run::checkFuture(Tracked& t) {
  Record& r = records_[t.id];
  if (!t.future.waitFor(20s)) {
    violation(fmt::format("task {}'s Future did not settle within 20 s of termination", t.id));
    return;
  }
  ++report_.futures;
  r.outcome = "value";
  try {
    const int v = t.future.get();
    if (r.role != Role::driver && r.end.load() != End::returned) {
      violation(fmt::format("task {}'s Future has a value, but its body did not return", t.id));
    }
    if (v != valueOf(t.id)) violation(fmt::format("task {}'s Future holds {}, not its value", t.id, v));
  } catch (const StressError& e) {
    r.outcome = "StressError";
    if (e.id != t.id) violation(fmt::format("task {}'s Future holds task {}'s error", t.id, e.id));
    observe(e.id, "its Future");
  } catch (const OperationCancelled&) {
    r.outcome = "OperationCancelled";
    r.cancelReported = true;
    const bool couldBeCancelled = r.cancelRequested.load() || anyShutdownNow() ||
                                  (anyShutdown() && !program_.config.runDelayedAfterShutdown) ||
                                  r.end.load() == End::cancelled;
    if (!couldBeCancelled) violation(fmt::format("task {}'s Future reports a cancellation nobody asked for", t.id));
  } catch (const RejectedExecution&) {
    r.outcome = "RejectedExecution";
    if (r.starts.load() != 0) violation(fmt::format("task {}'s Future reports RejectedExecution, but it ran", t.id));
  } catch (const BrokenPromise&) {
    r.outcome = "BrokenPromise";
    if (r.starts.load() != 0) violation(fmt::format("task {}'s Future reports BrokenPromise, but it ran", t.id));
  } catch (const FaultError&) {
    if (program_.faults.site != FaultSite::beforeExecute) {
      violation(fmt::format("task {}'s Future holds a FaultError with the plan '{}'", t.id,
                            toString(program_.faults.site)));
    }
    faultReports_.fetch_add(1);
  } catch (const std::bad_alloc&) {
    badAllocSeen("a Future");
  } catch (const std::exception& e) {
    violation(fmt::format("task {}'s Future holds an unexpected exception: {}", t.id, e.what()));
  }
}

void Run::checkPeriodic(TrackedPeriodic& p) {
  Record& r = records_[p.id];
  if (!p.handle.waitFor(20s)) {
    violation(fmt::format("periodic schedule {}'s handle did not settle within 20 s of termination", p.id));
    return;
  }
  ++report_.handles;
  try {
    p.handle.get();
    if (!p.cancelledByUs.load()) violation(fmt::format("periodic schedule {} ended normally though not cancelled", p.id));
  } catch (const PeriodicError& e) {
    if (e.id != p.id || p.continueOnError || r.periodicThrows.load() == 0) {
      violation(fmt::format("periodic schedule {}'s handle holds an error it should not", p.id));
    }
  } catch (const OperationCancelled&) {
    if (!anyShutdown() && !p.cancelledByUs.load()) {
      violation(fmt::format("periodic schedule {} was cancelled by nobody", p.id));
    }
  } catch (const FaultError&) {
    // A failed run's error reaches the handler (counted there) and then the
    // handle: one report.
    if (program_.faults.site != FaultSite::beforeExecute) violation("a periodic handle holds an unplanned FaultError");
  } catch (const std::bad_alloc&) {
    const FaultPlan& plan = program_.faults;
    if (plan.site == FaultSite::frameAllocator) {
      // The schedule's next run could not be allocated: the schedule ends,
      // and its handle is where that is reported (docs/reliability.md, the
      // fault table): the one report.
      faultReports_.fetch_add(1);
    } else if (!(plan.site == FaultSite::beforeExecute && plan.badAlloc)) {
      // Else only, as for FaultError, a beforeExecute fault planned as
      // std::bad_alloc (the failed run was counted in the handler).
      violation("a periodic handle holds an unplanned bad_alloc");
    }
  } catch (const std::exception& e) {
    violation(fmt::format("periodic schedule {}'s handle holds an unexpected exception: {}", p.id, e.what()));
  }
}

bool Run::allStartedEnded() {
  for (std::uint32_t id = 0, n = records_.size(); id < n; ++id) {
    Record& r = records_[id];
    if (r.role != Role::periodic && r.starts.load() > 0 && r.end.load() == End::none) return false;
  }
  return true;
}

void Run::checkRecords() {
  const std::uint32_t n = records_.size();
  report_.tasks = n;
  for (std::uint32_t id = 0; id < n; ++id) {
    Record& r = records_[id];
    const std::uint32_t starts = r.starts.load();
    if (r.role == Role::periodic) {
      if (r.periodicReports.load() != r.periodicThrows.load()) {
        violation(fmt::format("periodic schedule {}: {} runs failed, {} reached the uncaught handler", id,
                              r.periodicThrows.load(), r.periodicReports.load()));
      }
      continue;
    }
    if (starts > 0) ++report_.started;
    if (starts > 0 && r.end.load() == End::none) {
      violation(fmt::format("task {} started and never finished: {}, a {} {}{}{}", id, toString(r.role),
                            r.coroutine.load() ? "coroutine" : "callable", toString(r.body.load()),
                            r.ranOnProducer.load() ? ", started on a producer thread" : "",
                            r.ranAsPendingTask.load() ? " by PendingTask::run()" : ""));
    }
    // Documented exceptions: a combinator's task whose failure the combinator
    // absorbed (it rethrows the first only), a task whose Future reported
    // its cancellation instead, a task run by PendingTask::run() whose
    // result nobody holds (a detached child, or a fire-and-forget coroutine:
    // printed to stderr), and a submitted child whose Future was dropped and
    // whose parent was cancelled: cancelled with it while it ran, its Future
    // reports OperationCancelled, and a cancelled task's unread failure is
    // never reported (ThreadPoolOptions::reportUnobservedFailures).
    const bool unheld = r.role == Role::detachedSubmit || r.role == Role::top || r.role == Role::detachedExecute;
    const bool cancelledWithParent = r.role == Role::detachedSubmit && r.parentToken.isCancellationRequested();
    if (r.end.load() == End::threw && r.observed.load() == 0 && r.role != Role::member && !r.cancelReported.load() &&
        !(r.ranAsPendingTask.load() && unheld) && !cancelledWithParent) {
      violation(fmt::format("task {}'s error was reported nowhere (lost): {}{}{}", id, toString(r.role),
                            r.ranOnProducer.load() ? ", ran on a producer thread" : "",
                            r.cancelRequested.load() ? ", cancel requested" : ""));
    }
  }
}

void Run::check() {
  for (Tracked& t : tracked_) checkFuture(t);
  for (auto& p : periodic_) checkPeriodic(*p);
  const PoolStats s = pool().stats();
  report_.finalStats = fmt::format("{}", s);
  report_.admitted = s.taskCount;
  report_.pendingReturned = pendingReturned_.load();
  const std::uint64_t accounted =
      s.completedTaskCount + s.failedCount + s.cancelledCount + s.discardedCount + s.drainedCount;
  if (s.taskCount != accounted) {
    violation(fmt::format("the ledger does not add up: taskCount {} != {} accounted: {}", s.taskCount, accounted, s));
  }
  if (s.state != PoolState::terminated) violation(fmt::format("the pool is not TERMINATED: {}", s));
  if (s.poolSize != 0 || s.activeCount != 0 || s.queueSize != 0 || s.localQueueSize != 0 || s.scheduledCount != 0) {
    violation(fmt::format("a terminated pool still holds threads, tasks or timers: {}", s));
  }
  if (s.drainedCount != pendingReturned_.load()) {
    violation(fmt::format("drainedCount {} but shutdownNow() returned {} tasks", s.drainedCount,
                          pendingReturned_.load()));
  }
  if (afterCalls_.load() > beforeCalls_.load()) violation("afterExecute ran more often than beforeExecute");
}

}  // namespace coexec::stress::impl
