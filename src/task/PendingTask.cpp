// SPDX-License-Identifier: BSL-1.0
#include "coexec/PendingTask.h"

#include <stdexcept>

#include "coexec/Errors.h"
#include "coexec/detail/NoInlineResumption.h"
#include "coro/Runtime.h"

namespace coexec {
namespace {
/// The BrokenPromise a dropped task settles with when there is no memory for
/// a new one: made when the library loads, so that dropping a task (which
/// never throws) cannot fail for want of memory.
const std::exception_ptr kBrokenPromise = std::make_exception_ptr(BrokenPromise());

std::exception_ptr brokenPromise() noexcept {
  try {
    return std::make_exception_ptr(BrokenPromise());
  } catch (...) {
    return kBrokenPromise;
  }
}
}  // namespace

void PendingTask::abandonUnrun() noexcept {
  const detail::NoInlineResumption noInline;  // the awaiter goes on on its scheduler, not in this call
  detail::Ref<detail::TaskCore> core = std::move(core_);
  core->abandon(brokenPromise());  // does nothing if it started or settled
}

void PendingTask::run() {
  if (!core_) throw std::logic_error("coexec::PendingTask::run: the handle is empty (already run or moved from)");
  detail::Ref<detail::TaskCore> core = std::move(core_);
  if (!core->tryStart()) return;  // cancelled meanwhile
  if (core->isCoroutine()) {
    core.detach()->startCoroutine(nullptr);  // hands over our reference; returns at the first suspension
    return;
  }
  detail::RunResult result = detail::runAsCurrent(*core);
  if (result.error && !core->hasFuture()) std::rethrow_exception(result.error);
}

int PendingTask::priority() const noexcept { return core_ ? core_->priority() : 0; }

bool PendingTask::hasFuture() const noexcept { return core_ && core_->hasFuture(); }

bool PendingTask::isCancelled() const { return core_ && core_->isCancelled(); }

}  // namespace coexec
