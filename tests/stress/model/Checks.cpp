// SPDX-License-Identifier: BSL-1.0
// The checks after a stress program's run (model/Runner.h lists them): every
// Future and periodic handle settled as its task allows, every body that
// started ended, every error was reported once where the docs say, the
// ledger adds up, the process has the threads and frame blocks it had; and
// the checks on the way: over-aligned payloads where they are read, a
// foreign coroutine's outcome when it ends.

#include <pthread.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "coexec/coexec.h"
#include "coexec/detail/FaultInjection.h"
#include "model/Run.h"

namespace coexec::stress::impl {

using namespace std::chrono_literals;

namespace {

/// The process's threads (/proc/self/status).
std::size_t processThreads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoul(line.substr(8));
  }
  return 0;
}

/// The names of the process's threads (their `comm`), for a message.
std::string processThreadNames() {
  std::string names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    std::getline(comm, name);
    names += names.empty() ? name : ", " + name;
  }
  return names;
}

}  // namespace

const char* toString(Role role) {
  switch (role) {
    case Role::top: return "a producer's task";
    case Role::child: return "an awaited child";
    case Role::detachedSubmit: return "a submitted child whose Future was dropped";
    case Role::detachedExecute: return "an executed child";
    case Role::member: return "a combinator's task";
    case Role::driver: return "a combinator's driver";
    case Role::periodic: return "a periodic schedule";
    case Role::keyed: return "a keyed task";
    case Role::foreign: return "a foreign coroutine";
    case Role::foreignAwaited: return "a task awaited by a foreign coroutine";
  }
  return "?";
}

ProcessState processState() {
  return ProcessState{processThreads(), processThreadNames(), detail::FaultInjection::liveFrameBlocks(),
                      detail::FaultInjection::frameAllocationCalls()};
}

template <class R, class OnValue>
void Run::checkSettled(std::uint32_t id, Future<R>& future, OnValue onValue) {
  Record& r = records_[id];
  if (!future.waitFor(20s)) {
    violation(fmt::format("task {}'s Future did not settle within 20 s of termination", id));
    return;
  }
  ++report_.futures;
  r.outcome = "value";
  try {
    const R value = future.get();
    if (r.role != Role::driver && r.end.load() != End::returned) {
      violation(fmt::format("task {}'s Future has a value, but its body did not return", id));
    }
    onValue(value);
  } catch (const StressError& e) {
    r.outcome = "StressError";
    if (e.id != id) violation(fmt::format("task {}'s Future holds task {}'s error", id, e.id));
    observe(e.id, "its Future");
  } catch (const OperationCancelled&) {
    r.outcome = "OperationCancelled";
    r.cancelReported = true;
    const bool couldBeCancelled = r.cancelRequested.load() || anyShutdownNow() ||
                                  (anyShutdown() && !program_.config.runDelayedAfterShutdown) ||
                                  r.end.load() == End::cancelled;
    if (!couldBeCancelled) violation(fmt::format("task {}'s Future reports a cancellation nobody asked for", id));
  } catch (const RejectedExecution&) {
    r.outcome = "RejectedExecution";
    if (r.starts.load() != 0) violation(fmt::format("task {}'s Future reports RejectedExecution, but it ran", id));
  } catch (const BrokenPromise&) {
    r.outcome = "BrokenPromise";
    if (r.starts.load() != 0) violation(fmt::format("task {}'s Future reports BrokenPromise, but it ran", id));
  } catch (const FaultError&) {
    if (program_.faults.site != FaultSite::beforeExecute) {
      violation(
          fmt::format("task {}'s Future holds a FaultError with the plan '{}'", id, toString(program_.faults.site)));
    }
    faultReports_.fetch_add(1);
  } catch (const std::bad_alloc&) {
    badAllocSeen("a Future");
  } catch (const std::exception& e) {
    violation(fmt::format("task {}'s Future holds an unexpected exception: {}", id, e.what()));
  }
}

void Run::checkFuture(Tracked& t) {
  checkSettled(t.id, t.future, [&](int v) {
    if (v != valueOf(t.id)) violation(fmt::format("task {}'s Future holds {}, not its value", t.id, v));
  });
}

void Run::checkWideFuture(TrackedWide& t) {
  checkSettled(t.id, t.future,
               [&](const Wide64& v) { checkWide(*this, t.id, v, "the value its Future's get() returned"); });
}

void checkPad(Run& run, std::uint32_t id, const Pad32& pad, const char* where) {
  if (!isAligned(&pad, alignof(Pad32))) {
    run.violation(fmt::format("task {}'s alignas(32) capture is at {} {}: misaligned", id,
                              static_cast<const void*>(&pad), where));
  }
  if (!(pad == padOf(id))) run.violation(fmt::format("task {}'s alignas(32) capture is not intact {}", id, where));
}

void checkWide(Run& run, std::uint32_t id, const Wide64& result, const char* where) {
  run.alignedChecked();
  if (!isAligned(&result, alignof(Wide64))) {
    run.violation(fmt::format("task {}'s alignas(64) result is at {} in {}: misaligned", id,
                              static_cast<const void*>(&result), where));
  }
  if (!(result == wideOf(id)))
    run.violation(fmt::format("task {}'s alignas(64) result is not intact in {}", id, where));
}

void Run::foreignStarted(std::uint32_t id) {
  Record& r = records_[id];
  r.body = Body::foreign;
  r.coroutine = true;
  if (r.starts.fetch_add(1) != 0) violation(fmt::format("foreign coroutine {} started twice", id));
  if (tlsProducer) r.ranOnProducer = true;
  if (tlsRunningPending) r.ranAsPendingTask = true;
  // The pool names its workers "<pool>-<k>" (the harness's thread factory
  // does too); its temporary threads "<pool>-tmp-<k>".
  std::array<char, 16> name{};
  if (!tlsProducer && !tlsRunningPending && pthread_getname_np(pthread_self(), name.data(), name.size()) == 0) {
    const std::string_view thread(name.data());
    constexpr std::string_view kPrefix = "stress-";
    r.onWorker = thread.starts_with(kPrefix) && thread.size() > kPrefix.size() &&
                 thread.find_first_not_of("0123456789", kPrefix.size()) == std::string_view::npos;
    if (r.onWorker) foreignOnWorkers_.fetch_add(1);
  }
  foreignStarts_.fetch_add(1);
}

void Run::foreignEnded(std::uint32_t id, std::exception_ptr error, const int* value) {
  Record& r = records_[id];
  if (r.foreignEnding.exchange(true)) {
    violation(fmt::format("foreign coroutine {} finished twice", id));
    return;
  }
  checkForeignOutcome(id, error, value);
  foreignEnds_.fetch_add(1);
  // Last: once every record that started has ended, the run may end and
  // free the records (Run::execute()).
  r.end.store(error ? End::other : End::returned);
}

void Run::checkForeignOutcome(std::uint32_t id, const std::exception_ptr& error, const int* value) {
  Record& r = records_[id];
  const std::uint32_t cid = r.awaits;
  Record& c = records_[cid];
  if (!error) {
    if (value == nullptr) return;
    foreignOutcomes_[0].fetch_add(1);
    if (*value != valueOf(cid))
      violation(fmt::format("foreign coroutine {} got {} from task {}, not its value", id, *value, cid));
    if (c.end.load() != End::returned) {
      violation(fmt::format("foreign coroutine {} got a value from task {}, whose body did not return", id, cid));
    }
    return;
  }
  // Something may cancel the foreign coroutine's sleep and the task it awaits:
  // the cancellation of the task that started it (whose token both carry),
  // or shutdownNow(); the awaited task may also throw OperationCancelled itself.
  const bool cancellable = r.parentToken.isCancellationRequested() || anyShutdownNow();
  if (r.sleeping.load()) {
    try {
      std::rethrow_exception(error);
    } catch (const OperationCancelled&) {
      if (!cancellable)
        violation(fmt::format("foreign coroutine {}'s sleep was cancelled, but nothing cancelled it", id));
    } catch (...) {
      classify(std::current_exception(), "a foreign coroutine's sleep");
    }
    return;
  }
  try {
    std::rethrow_exception(error);
  } catch (const StressError& e) {
    foreignOutcomes_[1].fetch_add(1);
    if (e.id != cid) violation(fmt::format("foreign coroutine {} awaiting task {} got task {}'s error", id, cid, e.id));
    observe(e.id, "a foreign coroutine");
  } catch (const OperationCancelled&) {
    foreignOutcomes_[2].fetch_add(1);
    c.cancelReported = true;
    if (!cancellable && !c.cancelRequested.load() && c.end.load() != End::cancelled) {
      violation(
          fmt::format("foreign coroutine {} got OperationCancelled from task {}, which nothing cancelled", id, cid));
    }
  } catch (const RejectedExecution&) {
    foreignOutcomes_[3].fetch_add(1);
    if (c.starts.load() != 0)
      violation(fmt::format("foreign coroutine {} got RejectedExecution from task {}, which ran", id, cid));
  } catch (const BrokenPromise&) {
    foreignOutcomes_[3].fetch_add(1);
    if (c.starts.load() != 0)
      violation(fmt::format("foreign coroutine {} got BrokenPromise from task {}, which ran", id, cid));
  } catch (...) {
    classify(std::current_exception(), "a foreign coroutine");
  }
}

void Run::checkForeignHeld() {
  for (std::uint32_t id = 0, n = records_.size(); id < n; ++id) {
    Record& r = records_[id];
    if (r.role != Role::foreign || r.starts.load() == 0 || r.end.load() != End::none) continue;
    // One started on a worker suspended on the pool (its sleep on the pool's
    // timers, its Future's continuation posted to the pool), which holds it
    // until it resumes: it has ended by the pool's termination. Elsewhere (a
    // producer, a temporary thread, the process's timer thread) it runs on
    // no scheduler, and need only end (checkRecords).
    if (r.onWorker.load()) {
      violation(
          fmt::format("foreign coroutine {} (awaiting task {}, {}) started on a worker and had not finished "
                      "when the pool terminated",
                      id, r.awaits, r.sleeping.load() ? "sleeping" : "past its sleep"));
    }
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
    // A foreign coroutine that failed before reading its task's Future (its
    // sleep cancelled, no memory) dropped it: that task is then a detached
    // submission.
    const bool unheld = r.role == Role::detachedSubmit || r.role == Role::top || r.role == Role::detachedExecute ||
                        r.role == Role::foreignAwaited;
    const bool cancelledWithParent =
        (r.role == Role::detachedSubmit || r.role == Role::foreignAwaited) && r.parentToken.isCancellationRequested();
    if (r.end.load() == End::threw && r.observed.load() == 0 && r.role != Role::member && !r.cancelReported.load() &&
        !(r.ranAsPendingTask.load() && unheld) && !cancelledWithParent) {
      violation(fmt::format("task {}'s error was reported nowhere (lost): {}{}{}", id, toString(r.role),
                            r.ranOnProducer.load() ? ", ran on a producer thread" : "",
                            r.cancelRequested.load() ? ", cancel requested" : ""));
    }
  }
  report_.foreign = foreignStarts_.load();
  report_.foreignOnWorkers = foreignOnWorkers_.load();
  report_.alignedResults = alignedChecks_.load();
  for (std::size_t i = 0; i < foreignOutcomes_.size(); ++i)
    report_.foreignOutcomes[i] = foreignOutcomes_[i].load();
  if (foreignStarts_.load() != foreignEnds_.load()) {
    violation(fmt::format("{} foreign coroutines started, {} finished", foreignStarts_.load(), foreignEnds_.load()));
  }
}

void Run::check() {
  for (Tracked& t : tracked_) checkFuture(t);
  for (TrackedWide& t : trackedWide_)
    checkWideFuture(t);
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

void Run::checkFaultReports() {
  // Where the docs say a fault is reported, it is reported exactly once.
  const FaultSite site = program_.faults.site;
  if (site == FaultSite::globalNew) {
    // Thrown to the caller, or to the uncaught handler (a worker that could
    // not be added), or absorbed without a report (a continuation that could
    // not be queued runs on the calling thread; a nothrow allocation's
    // failure handled where it is made): at most one report.
    if (faultReports_.load() > report_.faultsFired) {
      violation(
          fmt::format("{} allocation(s) failed at globalNew, {} reported", report_.faultsFired, faultReports_.load()));
    }
  } else if (site == FaultSite::threadFactory || site == FaultSite::beforeExecute ||
             site == FaultSite::rejectionHandler || site == FaultSite::frameAllocator) {
    // A fault that fails a combinator's task is that task's failure, which
    // the combinator may absorb (it rethrows its first failure only; invokeAny
    // drops failures once one task succeeds): there, at most one report.
    const bool absorbable = combinatorsUsed_.load() && site != FaultSite::threadFactory;
    if (absorbable ? faultReports_.load() > report_.faultsFired : faultReports_.load() != report_.faultsFired) {
      violation(fmt::format("{} fault(s) injected at {}, {} reported", report_.faultsFired, toString(site),
                            faultReports_.load()));
    }
  } else if (faultReports_.load() != 0) {
    violation(fmt::format("a fault at {} was reported somewhere ({} times): it must be printed and dropped",
                          toString(site), faultReports_.load()));
  }
}

void Run::checkProcess(const ProcessState& before) {
  // Temporary threads (newThreadRuns) are detached: give them a moment.
  const auto deadline = Clock::now() + 10s;
  while (processThreads() != before.threads && Clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  if (processThreads() != before.threads) {
    violation(fmt::format("{} threads before the program ({}), {} after the pool's destruction ({})", before.threads,
                          before.threadNames, processThreads(), processThreadNames()));
  }
  if (detail::FaultInjection::available()) {
    // A task that this program ran itself through PendingTask::run() (a
    // custom policy, a task shutdownNow() returned) runs outside any pool:
    // if it slept, it finished on the process's timer thread, which drops
    // its last reference to the task just after the Future settled, and no
    // pool waits for that. Give such releases a bounded moment.
    const auto settled = Clock::now() + 5s;
    while (detail::FaultInjection::liveFrameBlocks() != before.frameBlocks && Clock::now() < settled) {
      std::this_thread::sleep_for(1ms);
    }
    const std::int64_t framesAfter = detail::FaultInjection::liveFrameBlocks();
    if (framesAfter != before.frameBlocks) {
      detail::FaultInjection::printLiveBlocks(before.frameCalls);
      if (std::getenv("COEXEC_FAULT_TRACE_LIVE") != nullptr) {
        for (std::uint32_t id = 0; id < records_.size(); ++id) {
          Record& r = records_[id];
          if (r.allocationsBefore == 0) continue;
          std::fprintf(stderr, "record %u: allocations before %llu, starts %u, end %d, outcome %s%s%s\n", id,
                       static_cast<unsigned long long>(r.allocationsBefore), r.starts.load(),
                       static_cast<int>(r.end.load()), r.outcome.c_str(), r.ranOnProducer ? ", on a producer" : "",
                       r.ranAsPendingTask ? " by PendingTask::run" : "");
        }
      }
      violation(fmt::format("{} frame-allocator blocks live before the program, {} after: leaked frames or task states",
                            before.frameBlocks, framesAfter));
    }
  }
}

}  // namespace coexec::stress::impl
