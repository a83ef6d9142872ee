// What the combinators reach in a pool through detail::CombinatorAccess: its
// timer service (timeouts on the pool's clock), its uncaught-exception
// handler (a TaskGroup destroyed while its children ran) and its identity
// (the owner recorded in the tasks it admits).

#include "coexec/ThreadPoolExecutor.h"

#include <string_view>

#include "pool/PoolImpl.h"

namespace coexec {

detail::TimerService& ThreadPoolExecutor::timerService() noexcept { return impl_->timers_; }

void ThreadPoolExecutor::reportUncaught(const std::exception_ptr& error) noexcept {
  const std::string_view thread =
      detail::tlsPool == impl_.get() && detail::tlsWorkerName != nullptr ? std::string_view(*detail::tlsWorkerName)
                                                                          : std::string_view("(outside the pool)");
  impl_->reportUncaught(error, TaskInfo{impl_->name_, thread, false, 0});
}

const void* ThreadPoolExecutor::identity() const noexcept { return impl_.get(); }

}  // namespace coexec
