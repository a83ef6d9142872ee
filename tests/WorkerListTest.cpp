// SPDX-License-Identifier: BSL-1.0
// The pool's worker list on its own (src/engine/WorkerList.h): the size's
// mirror after each add and removal, nodes that stay where they are, and
// the order in which a worker with nothing of its own takes the others'
// work: continuations in their next-continuation slots, then the oldest
// task of each local queue (each reported as having left its queue), then
// yields, never its own.

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "Assertions.h"

#include "EngineTestSupport.h"
#include "engine/WorkerList.h"

using coexec::detail::PoolWorker;
using coexec::detail::StolenWork;
using coexec::detail::TaskCore;
using coexec::detail::WorkerList;
using coexec::test::fakeHandle;
using coexec::test::numberOf;

namespace {

/// A stand-in task pointer (never dereferenced: the list only moves it).
TaskCore* fakeTask(int& value) { return reinterpret_cast<TaskCore*>(&value); }

}  // namespace

TEST_CASE("WorkerList: each add and removal leaves the size's mirror equal to the size, and nodes stay put",
          "[pool][worker]") {
  std::atomic<std::size_t> mirror{99};
  WorkerList workers(mirror);
  CHECK(workers.empty());
  const WorkerList::iterator first = workers.addLocked();
  CHECK(mirror.load() == 1);
  const WorkerList::iterator second = workers.addLocked();
  const WorkerList::iterator third = workers.addLocked();
  CHECK(mirror.load() == 3);
  PoolWorker* const kept = &*third;
  workers.discardLocked(second);  // a start that failed
  CHECK(workers.size() == 2);
  CHECK(mirror.load() == 2);
  workers.exitedLocked(&*first);  // a thread that exits
  CHECK(workers.size() == 1);
  CHECK(mirror.load() == 1);
  CHECK(&*workers.begin() == kept);
  workers.exitedLocked(kept);
  CHECK(workers.empty());
  CHECK(mirror.load() == 0);
}

TEST_CASE("WorkerList: a thief takes continuations, then the oldest local tasks, then yields, and never its own",
          "[pool][worker]") {
  std::atomic<std::size_t> mirror{0};
  WorkerList workers(mirror);
  PoolWorker& thief = *workers.addLocked();
  PoolWorker& a = *workers.addLocked();
  PoolWorker& b = *workers.addLocked();
  CHECK_FALSE(workers.anyLocalWorkLocked());

  int own = 0;
  int x = 0;
  int y = 0;
  (void)thief.putNext(fakeHandle(1));
  REQUIRE(thief.local.push(fakeTask(own)));
  REQUIRE(a.local.push(fakeTask(x)));  // a's oldest
  REQUIRE(a.local.push(fakeTask(y)));
  REQUIRE(a.pushYield(fakeHandle(5), /*waiting=*/100));
  (void)b.putNext(fakeHandle(2));
  CHECK(workers.anyLocalWorkLocked());

  std::size_t left = 0;
  const auto steal = [&] { return workers.stealLocked(thief, [&] { ++left; }); };
  StolenWork taken = steal();
  CHECK(numberOf(taken.continuation) == 2);  // b's slot, before a's older tasks
  CHECK(taken.task == nullptr);
  CHECK_FALSE(taken.yield);
  taken = steal();
  CHECK(taken.task == fakeTask(x));
  CHECK(left == 1);
  taken = steal();
  CHECK(taken.task == fakeTask(y));
  CHECK(left == 2);
  taken = steal();
  CHECK(numberOf(taken.continuation) == 5);  // a yield a has not come back to, forced
  CHECK(taken.yield);
  CHECK_FALSE(steal());  // the rest is the thief's own
  CHECK(left == 2);
  CHECK(workers.anyLocalWorkLocked());

  // What is left is the thief's: its slot and its task.
  CHECK(numberOf(thief.takeNext()) == 1);
  TaskCore* mine = nullptr;
  REQUIRE(WorkerList::stealTaskLocked(thief, mine, [&] { ++left; }));
  CHECK(mine == fakeTask(own));
  CHECK(left == 3);
  CHECK_FALSE(WorkerList::stealTaskLocked(thief, mine, [&] { ++left; }));
  CHECK(left == 3);
  CHECK_FALSE(workers.anyLocalWorkLocked());
}
