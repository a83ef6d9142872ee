// SPDX-License-Identifier: BSL-1.0
// The pool's per-task state (src/pool/PoolTaskState.h) over the task's owner
// storage: a task the pool has done nothing to reads as counted per run, not
// in flight and not stamped, and every value the pool writes reads back,
// the admission stamp included at the edges of its range.

#include <cstdint>
#include <limits>

#include "Assertions.h"

#include "TestSupport.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/TaskCore.h"
#include "pool/PoolTaskState.h"

using coexec::detail::PoolTaskState;
using coexec::detail::poolState;
using coexec::detail::Ref;
using coexec::detail::TaskCore;

namespace {

/// The smallest task: a body that does nothing.
class EmptyTask final : public TaskCore {
 public:
  EmptyTask() : TaskCore(/*hasFuture=*/false, /*wantsToken=*/false, /*priority=*/0) {}
  void invoke() override {}
  void discardValue() noexcept override {}
};

}  // namespace

TEST_CASE("PoolTaskState: a new task is counted per run, not in flight, not stamped", "[pool][task]") {
  auto task = Ref<EmptyTask>::adopt(new EmptyTask());
  const PoolTaskState state = poolState(*task);
  CHECK(state.countsInStats());
  CHECK_FALSE(state.inFlight());
  CHECK_FALSE(state.stamped());
}

TEST_CASE("PoolTaskState: each mark reads back and leaves the others alone", "[pool][task]") {
  SECTION("a periodic run") {
    auto task = Ref<EmptyTask>::adopt(new EmptyTask());
    poolState(*task).markPeriodicRun();
    CHECK_FALSE(poolState(*task).countsInStats());
    CHECK_FALSE(poolState(*task).inFlight());
    CHECK_FALSE(poolState(*task).stamped());
  }
  SECTION("every in-flight shard a byte holds") {
    for (unsigned shard = 0; shard < 255; ++shard) {
      auto task = Ref<EmptyTask>::adopt(new EmptyTask());
      poolState(*task).enterFlight(static_cast<std::uint8_t>(shard));
      REQUIRE(poolState(*task).inFlight());
      REQUIRE(poolState(*task).shard() == shard);
      REQUIRE(poolState(*task).countsInStats());
      REQUIRE_FALSE(poolState(*task).stamped());
    }
  }
  SECTION("admission stamps, the clock's epoch and both ends of the range included") {
    // Every stamp but INT64_MIN (which no clock counting from its epoch
    // reaches) reads back as stamped, with its value.
    for (const std::int64_t ticks : {std::int64_t{0}, std::int64_t{1}, std::int64_t{-1}, std::int64_t{123456789},
                                     std::numeric_limits<std::int64_t>::max(),
                                     std::numeric_limits<std::int64_t>::min() + 1}) {
      auto task = Ref<EmptyTask>::adopt(new EmptyTask());
      poolState(*task).stampAdmission(ticks);
      REQUIRE(poolState(*task).stamped());
      REQUIRE(poolState(*task).admittedAt() == ticks);
      REQUIRE(poolState(*task).countsInStats());
      REQUIRE_FALSE(poolState(*task).inFlight());
    }
  }
}
