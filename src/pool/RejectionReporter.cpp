// SPDX-License-Identifier: BSL-1.0
// abortWithReport()'s rate-limited report (see RejectionReporter.h).

#include "pool/RejectionReporter.h"

#include <cstdio>
#include <string>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "coexec/Format.h"
#include "coexec/ThreadDump.h"
#include "coexec/ThreadPoolExecutor.h"
#include "pool/PoolImpl.h"

namespace coexec::detail {

void RejectionReporter::rejected(ThreadPoolExecutor& pool, const RejectedExecution& error) noexcept {
  std::uint64_t suppressed = 0;
  {
    const Clock::time_point now = pool.clock().now();
    std::lock_guard lock(mutex_);
    if (reported_ && now - last_ < interval_) {
      ++suppressed_;
      return;
    }
    reported_ = true;
    last_ = now;
    suppressed = suppressed_;
    suppressed_ = 0;
  }
  try {
    std::string text = fmt::format("{}\n{}", error.what(), pool.dumpThreads());
    if (suppressed > 0) {
      text += fmt::format("\n  ({} earlier rejection{} not reported: at most one report per {})", suppressed,
                          suppressed == 1 ? " was" : "s were", std::chrono::duration<double>(interval_));
    }
    sink_(text);
  } catch (...) {
    printDropped("the abortWithReport sink", pool.name(), "(caller)", std::current_exception());
  }
}

}  // namespace coexec::detail
