// SPDX-License-Identifier: BSL-1.0
// PoolSizes' setters (PoolSizes.h states the rules).
#include "admission/PoolSizes.h"

#include <stdexcept>

#include <fmt/chrono.h>
#include <fmt/format.h>

namespace coexec::detail {

std::size_t PoolSizes::setCoreLocked(std::size_t core) {
  if (core > maximum_) {
    throw std::invalid_argument(
        fmt::format("coexec::ThreadPoolExecutor::setCorePoolSize: corePoolSize ({}) must not be greater than "
                    "maximumPoolSize ({})",
                    core, maximum_));
  }
  const std::size_t grown = core > core_ ? core - core_ : 0;
  core_ = core;
  coreMirror_.store(core, std::memory_order_relaxed);
  return grown;
}

void PoolSizes::setMaximumLocked(std::size_t maximum) {
  if (maximum == 0 || maximum < core_) {
    throw std::invalid_argument(
        fmt::format("coexec::ThreadPoolExecutor::setMaximumPoolSize: maximumPoolSize must be at least 1 and at "
                    "least corePoolSize ({}), got {}",
                    core_, maximum));
  }
  maximum_ = maximum;
}

void PoolSizes::checkKeepAlive(std::chrono::nanoseconds keepAlive) {
  if (keepAlive < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(fmt::format(
        "coexec::ThreadPoolExecutor::setKeepAliveTime: keepAliveTime must be non-negative, got {}", keepAlive));
  }
}

}  // namespace coexec::detail
