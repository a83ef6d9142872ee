// SPDX-License-Identifier: BSL-1.0
// dumpThreads(): what each worker does, read under the pool's lock (the
// worker list, the idle stack) while the workers go on (their running task
// is read from their own counters' line, relaxed), and the formatters of
// ThreadDump.

#include "coexec/ThreadDump.h"

#include "coexec/Format.h"

#include <algorithm>
#include <chrono>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/TaskNames.h"
#include "pool/PoolImpl.h"
#include "foundation/CoarseClock.h"

namespace coexec {

std::string_view toString(WorkerState state) noexcept {
  switch (state) {
    case WorkerState::idle: return "IDLE";
    case WorkerState::running: return "RUNNING";
    case WorkerState::parked: return "PARKED";
  }
  return "UNKNOWN";
}

namespace detail {

ThreadDump PoolImpl::dumpLocked() const {
  ThreadDump dump;
  dump.stats = statsLocked();
  dump.workers.reserve(engine_.workers.size());
  dump.temporaryThreads = starts_.temporaryAliveLocked();
  for (const Worker& worker : engine_.workers) {
    WorkerDump entry;
    entry.name = worker.name;
    entry.localQueueSize = worker.local.sizeAtOneInstant();
    if (const std::uint64_t running = worker.counters.running.load(std::memory_order_relaxed); running != 0) {
      const auto started = static_cast<std::int64_t>(running >> kRunningNameBits);  // in units of 1024 ns
      const auto nameId = static_cast<std::uint32_t>(running & ((1u << kRunningNameBits) - 1));
      entry.state = WorkerState::running;
      entry.runningTask = true;
      const std::int64_t units = std::max<std::int64_t>(0, (coarseNowNanos() >> kRunningTimeShift) - started);
      entry.taskAge = std::chrono::nanoseconds(units << kRunningTimeShift);
      entry.taskName = std::string(taskNameAt(nameId));
    } else if (worker.counters.active.load(std::memory_order_relaxed) > 0) {
      entry.state = WorkerState::running;  // a coroutine resuming here
    } else if (engine_.parking.parkedLocked(worker)) {
      entry.state = WorkerState::parked;
    }
    dump.workers.push_back(std::move(entry));
  }
  return dump;
}

}  // namespace detail

ThreadDump ThreadPoolExecutor::dumpThreads() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->dumpLocked();
}

}  // namespace coexec

fmt::format_context::iterator fmt::formatter<coexec::WorkerState>::format(coexec::WorkerState state,
                                                                          fmt::format_context& ctx) const {
  return fmt::formatter<std::string_view>::format(coexec::toString(state), ctx);
}

fmt::format_context::iterator fmt::formatter<coexec::WorkerDump>::format(const coexec::WorkerDump& w,
                                                                         fmt::format_context& ctx) const {
  std::string doing;
  if (w.runningTask) {
    doing = fmt::format(" task {} for {:.3f}s",
                        w.taskName.empty() ? std::string("(unnamed)") : fmt::format("'{}'", w.taskName),
                        std::chrono::duration<double>(w.taskAge).count());
  } else if (w.state == coexec::WorkerState::running) {
    doing = " a coroutine";
  }
  const std::string text = fmt::format("{} {}{}, local queue {}", w.name, w.state, doing, w.localQueueSize);
  return fmt::formatter<std::string_view>::format(text, ctx);
}

fmt::format_context::iterator fmt::formatter<coexec::ThreadDump>::format(const coexec::ThreadDump& dump,
                                                                         fmt::format_context& ctx) const {
  std::string text = fmt::format("{}", dump.stats);
  for (const coexec::WorkerDump& worker : dump.workers)
    text += fmt::format("\n  {}", worker);
  if (dump.temporaryThreads > 0) text += fmt::format("\n  temporary threads: {}", dump.temporaryThreads);
  return fmt::formatter<std::string_view>::format(text, ctx);
}
