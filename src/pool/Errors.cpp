#include "coexec/Errors.h"

#include <fmt/format.h>

namespace coexec {

RejectedExecution::RejectedExecution(const std::string& reason, const PoolStats& snapshot)
    : Error(fmt::format("coexec: task rejected: {} ({})", reason, snapshot)), snapshot_(snapshot) {}

OperationCancelled::OperationCancelled() : Error("coexec: the operation was cancelled before it produced a result") {}

BrokenPromise::BrokenPromise()
    : Error(
          "coexec: the task was destroyed without running (dropped by a rejection handler or after shutdownNow), "
          "so it will never produce a result") {}

}  // namespace coexec
