// SPDX-License-Identifier: BSL-1.0
// The admission front's sizes on their own (src/admission/PoolSizes.h): a
// setter that would break 1 <= maximum, core <= maximum or keepAlive >= 0
// throws and changes nothing, the core mirror follows every change, and the
// largest size only grows.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <stdexcept>

#include "Assertions.h"

#include "admission/PoolSizes.h"

using coexec::detail::PoolSizes;
using namespace std::chrono_literals;

TEST_CASE("PoolSizes: the setters keep core <= maximum and 1 <= maximum, and a refused one changes nothing",
          "[pool][sizes]") {
  std::atomic<std::size_t> coreMirror{99};
  PoolSizes sizes(coreMirror, 2, 4, 1s, false);
  CHECK(coreMirror.load() == 2);  // the constructor stores the mirror

  CHECK(sizes.setCoreLocked(3) == 1);  // grown by one
  CHECK(sizes.coreLocked() == 3);
  CHECK(coreMirror.load() == 3);
  CHECK(sizes.setCoreLocked(1) == 0);  // shrinking grows nothing
  CHECK(coreMirror.load() == 1);

  CHECK_THROWS_WITH(sizes.setCoreLocked(5), Catch::Contains("corePoolSize (5) must not be greater than "
                                                             "maximumPoolSize (4)"));
  CHECK(sizes.coreLocked() == 1);
  CHECK(coreMirror.load() == 1);

  CHECK_THROWS_AS(sizes.setMaximumLocked(0), std::invalid_argument);
  CHECK_THROWS_WITH(sizes.setMaximumLocked(0), Catch::Contains("at least corePoolSize (1), got 0"));
  CHECK(sizes.maximumLocked() == 4);
  (void)sizes.setCoreLocked(3);
  CHECK_THROWS_WITH(sizes.setMaximumLocked(2), Catch::Contains("at least corePoolSize (3), got 2"));
  CHECK(sizes.maximumLocked() == 4);
  sizes.setMaximumLocked(3);  // equal to core is allowed
  CHECK(sizes.maximumLocked() == 3);
}

TEST_CASE("PoolSizes: a negative keepAliveTime is refused, a zero one is taken", "[pool][sizes]") {
  std::atomic<std::size_t> coreMirror{0};
  PoolSizes sizes(coreMirror, 0, 1, 5s, false);
  CHECK_THROWS_WITH(sizes.setKeepAliveLocked(-1ns), Catch::Contains("keepAliveTime must be non-negative"));
  CHECK_THROWS_AS(PoolSizes::checkKeepAlive(-1ms), std::invalid_argument);
  CHECK(sizes.keepAliveLocked() == 5s);
  sizes.setKeepAliveLocked(0ns);
  CHECK(sizes.keepAliveLocked() == 0ns);
}

TEST_CASE("PoolSizes: which threads time out, the thresholds of admission, and the largest size",
          "[pool][sizes]") {
  std::atomic<std::size_t> coreMirror{0};
  PoolSizes sizes(coreMirror, 2, 4, 1s, false);
  // Core threads wait forever unless allowCoreThreadTimeOut; threads above core time out.
  CHECK_FALSE(sizes.idleTimesOutLocked(2));
  CHECK(sizes.idleTimesOutLocked(3));
  sizes.setCoreTimesOutLocked(true);
  CHECK(sizes.coreTimesOutLocked());
  CHECK(sizes.idleTimesOutLocked(1));

  CHECK(sizes.belowCoreLocked(1));
  CHECK_FALSE(sizes.belowCoreLocked(2));
  CHECK(sizes.belowCore(1));  // the mirror says the same
  CHECK_FALSE(sizes.belowCore(2));
  CHECK(sizes.belowMaximumLocked(3));
  CHECK_FALSE(sizes.belowMaximumLocked(4));
  CHECK_FALSE(sizes.aboveMaximumLocked(4));
  CHECK(sizes.aboveMaximumLocked(5));

  CHECK(sizes.largestLocked() == 0);
  sizes.noteThreadsLocked(3);
  sizes.noteThreadsLocked(1);
  CHECK(sizes.largestLocked() == 3);
}
