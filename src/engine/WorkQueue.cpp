// SPDX-License-Identifier: BSL-1.0
#include "coexec/WorkQueue.h"

#include <stdexcept>

#include <fmt/format.h>

namespace coexec {

WorkQueue WorkQueue::bounded(std::size_t capacity) {
  if (capacity == 0) {
    throw std::invalid_argument(
        "coexec::WorkQueue::bounded: capacity must be at least 1, got 0 (use WorkQueue::synchronous() for a hand-off)");
  }
  return {Kind::bounded, capacity};
}

WorkQueue WorkQueue::unbounded() noexcept { return {Kind::unbounded, kUnboundedCapacity}; }

WorkQueue WorkQueue::synchronous() noexcept { return {Kind::synchronous, 0}; }

WorkQueue WorkQueue::priority(std::size_t capacity) {
  if (capacity == 0) throw std::invalid_argument("coexec::WorkQueue::priority: capacity must be at least 1, got 0");
  return {Kind::priority, capacity};
}

std::string WorkQueue::describe() const {
  switch (kind_) {
    case Kind::bounded: return fmt::format("bounded({})", capacity_);
    case Kind::unbounded: return "unbounded";
    case Kind::synchronous: return "synchronous";
    case Kind::priority: return fmt::format("priority({})", capacity_);
  }
  return "unknown";
}

}  // namespace coexec
