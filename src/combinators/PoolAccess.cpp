// SPDX-License-Identifier: BSL-1.0
// What the combinators reach in a pool through detail::CombinatorAccess: its
// timer service (timeouts on the pool's clock), its uncaught-exception
// handler (a TaskGroup destroyed while its children ran), its identity
// (the owner recorded in the tasks it admits), and whether it is shut down
// (a combinator then starts nothing, whatever the rejection policy).

#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/CombinatorAccess.h"

#include <string_view>

#include <fmt/format.h>

#include "pool/PoolImpl.h"

namespace coexec {

detail::TimerService& ThreadPoolExecutor::timerService() noexcept { return impl_->timers_; }

void ThreadPoolExecutor::reportUncaught(const std::exception_ptr& error, bool unobserved) noexcept {
  const std::string_view thread = detail::tlsPool == impl_ && detail::tlsWorkerName != nullptr
                                      ? std::string_view(*detail::tlsWorkerName)
                                      : std::string_view("(outside the pool)");
  TaskInfo info{impl_->name_, thread, false, 0};
  info.unobserved = unobserved;
  impl_->reportUncaught(error, info);
}

void ThreadPoolExecutor::throwIfShutdown(const char* operation, std::size_t tasks) {
  // acquire: a shutdown that happened before is seen; one racing with the
  // caller's submissions is left to admission, which refuses them.
  if (impl_->stateMirror_.load(std::memory_order_acquire) == PoolState::running) return;
  detail::PoolImpl& p = *impl_;
  std::lock_guard lock(p.mutex_);
  p.tallies_.countRejectedLocked(tasks);  // in the same snapshot as the refusal
  throw RejectedExecution(
      fmt::format("{}: the pool is shut down and accepts no new tasks (none was started)", operation), p.statsLocked());
}

const void* ThreadPoolExecutor::identity() const noexcept { return impl_; }

}  // namespace coexec
