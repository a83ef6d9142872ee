// SPDX-License-Identifier: BSL-1.0
#include "coexec/Sizing.h"

// The sizing arithmetic, with exact expected values (docs/sizing.md works
// the same examples).

#include <chrono>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <thread>

#include "Assertions.h"

using namespace std::chrono_literals;

namespace sizing = coexec::sizing;
using Catch::Matchers::Contains;

TEST_CASE("forCpuBound is the hardware concurrency, at least 1", "[sizing]") {
  const unsigned hardware = std::thread::hardware_concurrency();
  CHECK(sizing::forCpuBound() == (hardware == 0 ? 1u : hardware));
  CHECK(sizing::forCpuBound() >= 1);
}

TEST_CASE("forBlocking applies Little's law and divides by the target utilization, rounding up", "[sizing]") {
  CHECK(sizing::forBlocking(600, 400ms, 1.0) == 240);   // 600/s x 0.4 s in flight
  CHECK(sizing::forBlocking(600, 400ms, 0.8) == 300);   // with 20% headroom
  CHECK(sizing::forBlocking(600, 400ms) == 300);        // 0.8 is the default
  CHECK(sizing::forBlocking(100, 50ms, 0.7) == 8);      // 5 in flight / 0.7 = 7.14 -> 8
  CHECK(sizing::forBlocking(1000, 3ms, 0.75) == 4);     // 3 / 0.75 = 4 exactly: no extra thread from rounding noise
  CHECK(sizing::forBlocking(1, 1ms, 1.0) == 1);         // 0.001 in flight: at least one thread
  CHECK(sizing::forBlocking(2000, 250ms, 0.9) == 556);  // 500 / 0.9 = 555.6 -> 556
}

TEST_CASE("forBlocking refuses invalid arguments, naming them", "[sizing]") {
  CHECK_THROWS_WITH(sizing::forBlocking(0, 1s, 0.8), Contains("arrivalRate"));
  CHECK_THROWS_WITH(sizing::forBlocking(-5, 1s, 0.8), Contains("arrivalRate"));
  CHECK_THROWS_WITH(sizing::forBlocking(std::numeric_limits<double>::infinity(), 1s, 0.8), Contains("arrivalRate"));
  CHECK_THROWS_WITH(sizing::forBlocking(std::numeric_limits<double>::quiet_NaN(), 1s, 0.8), Contains("arrivalRate"));
  CHECK_THROWS_WITH(sizing::forBlocking(10, 0s, 0.8), Contains("serviceTime"));
  CHECK_THROWS_WITH(sizing::forBlocking(10, -1ms, 0.8), Contains("serviceTime"));
  CHECK_THROWS_WITH(sizing::forBlocking(10, 1s, 0.0), Contains("targetUtilization"));
  CHECK_THROWS_WITH(sizing::forBlocking(10, 1s, 1.5), Contains("targetUtilization"));
  CHECK_THROWS_AS(sizing::forBlocking(10, 1s, -0.1), std::invalid_argument);
  CHECK_THROWS_AS(sizing::forBlocking(1e300, 1s, 1.0), std::overflow_error);
}

TEST_CASE("queueCapacityFor is the queue a latency budget allows", "[sizing]") {
  CHECK(sizing::queueCapacityFor(8, 50ms, 500ms) == 72);    // (450 / 50) x 8
  CHECK(sizing::queueCapacityFor(4, 30ms, 100ms) == 9);     // 70 x 4 / 30 = 9.33 -> 9
  CHECK(sizing::queueCapacityFor(1, 10ms, 10ms) == 0);      // no waiting fits: a hand-off
  CHECK(sizing::queueCapacityFor(3, 10ms, 19ms) == 2);      // 9 x 3 / 10 = 2.7 -> 2
  CHECK(sizing::queueCapacityFor(300, 400ms, 2s) == 1200);  // (1.6 / 0.4) x 300
  CHECK(sizing::queueCapacityFor(std::numeric_limits<std::size_t>::max(), 1ns, 1h) ==
        std::numeric_limits<std::size_t>::max());  // saturates
}

TEST_CASE("queueCapacityFor refuses invalid arguments, naming them", "[sizing]") {
  CHECK_THROWS_WITH(sizing::queueCapacityFor(0, 1ms, 1s), Contains("threads"));
  CHECK_THROWS_WITH(sizing::queueCapacityFor(2, 0ms, 1s), Contains("serviceTime"));
  CHECK_THROWS_WITH(sizing::queueCapacityFor(2, 2s, 1s), Contains("latencyBudget"));
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("the sizing functions' refusals are std::invalid_argument, or std::overflow_error, with whole messages",
          "[sizing][bad-input]") {
  CHECK_THROWS_WITH(sizing::forBlocking(0, 1s, 0.8),
                    "coexec::sizing::forBlocking: arrivalRate must be a positive number of tasks per second, got 0");
  CHECK_THROWS_WITH(sizing::forBlocking(10, -1ms, 0.8),
                    "coexec::sizing::forBlocking: serviceTime must be positive, got -1000000ns");
  CHECK_THROWS_WITH(sizing::forBlocking(10, 1s, 1.5),
                    "coexec::sizing::forBlocking: targetUtilization must be in (0, 1], got 1.5");
  CHECK_THROWS_AS(sizing::forBlocking(10, 1s, std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
  CHECK_THROWS_WITH(sizing::forBlocking(1e300, 1s, 1.0),
                    Contains("coexec::sizing::forBlocking: ") && Contains("threads do not fit a std::size_t"));
  CHECK_THROWS_AS(sizing::queueCapacityFor(0, 1ms, 1s), std::invalid_argument);
  CHECK_THROWS_WITH(sizing::queueCapacityFor(0, 1ms, 1s),
                    "coexec::sizing::queueCapacityFor: threads must be at least 1, got 0");
  CHECK_THROWS_WITH(sizing::queueCapacityFor(2, -1ms, 1s),
                    "coexec::sizing::queueCapacityFor: serviceTime must be positive, got -1000000ns");
  CHECK_THROWS_WITH(sizing::queueCapacityFor(2, 2s, 1s),
                    "coexec::sizing::queueCapacityFor: latencyBudget (1000000000ns) is "
                    "shorter than serviceTime (2000000000ns): no task can meet it");
}
