// SPDX-License-Identifier: BSL-1.0
// The sizing arithmetic of Sizing.h. No state.

#include "coexec/Sizing.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <thread>

#include <fmt/chrono.h>
#include <fmt/format.h>

namespace coexec::sizing {

std::size_t forCpuBound() noexcept {
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : hardware;
}

std::size_t forBlocking(double arrivalRate, std::chrono::nanoseconds serviceTime, double targetUtilization) {
  if (!(arrivalRate > 0) || !std::isfinite(arrivalRate)) {
    throw std::invalid_argument(fmt::format(
        "coexec::sizing::forBlocking: arrivalRate must be a positive number of tasks per second, got {}", arrivalRate));
  }
  if (serviceTime <= std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(
        fmt::format("coexec::sizing::forBlocking: serviceTime must be positive, got {}", serviceTime));
  }
  if (!(targetUtilization > 0 && targetUtilization <= 1)) {
    throw std::invalid_argument(
        fmt::format("coexec::sizing::forBlocking: targetUtilization must be in (0, 1], got {}", targetUtilization));
  }
  // In flight (Little's law), from whole nanoseconds: 600/s x 400'000'000 ns
  // is exactly 2.4e11, where 600 x 0.4 would not be exact.
  const double inFlight = arrivalRate * static_cast<double>(serviceTime.count()) / 1e9;
  const double threads = inFlight / targetUtilization;
  const double nearest = std::round(threads);
  const double rounded = std::abs(threads - nearest) <= nearest * 1e-9 ? nearest : std::ceil(threads);
  if (rounded >= static_cast<double>(std::numeric_limits<std::size_t>::max())) {
    throw std::overflow_error(fmt::format("coexec::sizing::forBlocking: {} threads do not fit a std::size_t", threads));
  }
  return rounded < 1 ? 1 : static_cast<std::size_t>(rounded);
}

std::size_t queueCapacityFor(std::size_t threads, std::chrono::nanoseconds serviceTime,
                             std::chrono::nanoseconds latencyBudget) {
  if (threads == 0) throw std::invalid_argument("coexec::sizing::queueCapacityFor: threads must be at least 1, got 0");
  if (serviceTime <= std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(
        fmt::format("coexec::sizing::queueCapacityFor: serviceTime must be positive, got {}", serviceTime));
  }
  if (latencyBudget < serviceTime) {
    throw std::invalid_argument(fmt::format(
        "coexec::sizing::queueCapacityFor: latencyBudget ({}) is shorter than serviceTime ({}): no task can meet it",
        latencyBudget, serviceTime));
  }
  // floor(slack x threads / service), as (q x threads) + floor(r x threads / service)
  // with slack = q x service + r, each part checked against overflow.
  const auto slack = static_cast<std::uint64_t>((latencyBudget - serviceTime).count());
  const auto service = static_cast<std::uint64_t>(serviceTime.count());
  const std::uint64_t whole = slack / service;
  const std::uint64_t rest = slack % service;
  constexpr std::uint64_t kMax = std::numeric_limits<std::size_t>::max();
  if (whole != 0 && threads > kMax / whole) return std::numeric_limits<std::size_t>::max();
  std::uint64_t capacity = whole * threads;
  // rest < service, so rest x threads / service < threads; compute it without overflow.
  std::uint64_t part = 0;
  if (rest != 0 && threads > std::numeric_limits<std::uint64_t>::max() / rest) {
    part = static_cast<std::uint64_t>(static_cast<long double>(rest) * threads / service);
  } else {
    part = rest * threads / service;
  }
  if (capacity > kMax - part) return std::numeric_limits<std::size_t>::max();
  capacity += part;
  return static_cast<std::size_t>(capacity);
}

}  // namespace coexec::sizing
