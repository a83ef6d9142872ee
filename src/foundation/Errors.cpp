// SPDX-License-Identifier: BSL-1.0
#include "coexec/Errors.h"

#include <utility>

#include <fmt/format.h>

#include "coexec/Format.h"
#include "foundation/ExceptionMessage.h"

namespace coexec {

namespace detail {

std::string messageOf(const std::exception_ptr& error) {
  if (!error) return "(no exception)";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception of a type not derived from std::exception";
  }
}

}  // namespace detail

namespace {

using detail::messageOf;

std::string allFailedMessage(const std::vector<std::exception_ptr>& errors) {
  return fmt::format(
      "coexec: invokeAny: every one of the {} tasks failed (errors() holds each one's exception); the "
      "first task's error: {}",
      errors.size(), errors.empty() ? std::string("(none)") : messageOf(errors.front()));
}

}  // namespace

RejectedExecution::RejectedExecution(const std::string& reason, const PoolStats& snapshot)
    : Error(fmt::format("coexec: task rejected: {} ({})", reason, snapshot)), snapshot_(snapshot) {}

OperationCancelled::OperationCancelled() : Error("coexec: the operation was cancelled before it produced a result") {}

BrokenPromise::BrokenPromise()
    : Error(
          "coexec: the task was destroyed without running (dropped by a rejection handler or after shutdownNow), "
          "so it will never produce a result") {}

AllFailed::AllFailed(std::vector<std::exception_ptr> errors)
    : Error(allFailedMessage(errors)),
      errors_(detail::Ref<detail::ErrorList>::adopt(new detail::ErrorList(std::move(errors)))) {}

}  // namespace coexec
