// SPDX-License-Identifier: BSL-1.0
// A worker's own work on its own (src/engine/PoolWorker.h): the
// next-continuation slot raced by its owner and a thief, round after round,
// with every continuation taken exactly once; the yields, due only after
// the items that were waiting have run (or when forced); and what
// hasLocalWork() sees.

#include <atomic>
#include <barrier>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "EngineTestSupport.h"
#include "engine/PoolWorker.h"

using coexec::detail::PoolWorker;
using coexec::test::fakeHandle;
using coexec::test::numberOf;

TEST_CASE("PoolWorker: the next-continuation slot holds one continuation and gives back the one it displaces",
          "[pool][worker]") {
  PoolWorker worker;
  CHECK_FALSE(worker.hasLocalWork());
  CHECK_FALSE(worker.takeNext());
  CHECK_FALSE(worker.putNext(fakeHandle(1)));  // the slot was empty
  CHECK(worker.hasLocalWork());
  CHECK(worker.waitingHere() == 1);
  CHECK(numberOf(worker.putNext(fakeHandle(2))) == 1);  // the older one comes back, for the shared queue
  CHECK(numberOf(worker.stealNext()) == 2);
  CHECK_FALSE(worker.stealNext());
  CHECK_FALSE(worker.hasLocalWork());
}

TEST_CASE("PoolWorker: the owner and a thief racing at the next-continuation slot take each continuation once",
          "[pool][worker]") {
  constexpr std::size_t kRounds = 20000;
  PoolWorker worker;
  // Who took each continuation: 1 the owner (taken back, or displaced by
  // the next put), 2 the thief. Written once each; read after the join.
  std::vector<std::atomic<int>> takenBy(kRounds + 1);
  std::atomic<std::size_t> twice{0};  // continuations taken a second time
  std::barrier sync(2);
  std::atomic<bool> done{false};
  const auto take = [&](std::coroutine_handle<> handle, int who) {
    if (!handle) return;
    if (int expected = 0; !takenBy[numberOf(handle)].compare_exchange_strong(expected, who)) {
      twice.fetch_add(1, std::memory_order_relaxed);
    }
  };
  std::thread thief([&] {
    sync.arrive_and_wait();
    while (!done.load(std::memory_order_acquire)) take(worker.stealNext(), 2);
    take(worker.stealNext(), 2);
  });
  sync.arrive_and_wait();
  for (std::uintptr_t i = 1; i <= kRounds; ++i) {
    take(worker.putNext(fakeHandle(i)), 1);
    if (i % 3 == 0) take(worker.takeNext(), 1);  // the owner takes its own back now and then
  }
  done.store(true, std::memory_order_release);
  thief.join();
  take(worker.takeNext(), 1);
  std::size_t byOwner = 0;
  std::size_t byThief = 0;
  for (std::size_t i = 1; i <= kRounds; ++i) {
    const int who = takenBy[i].load();
    byOwner += who == 1 ? 1 : 0;
    byThief += who == 2 ? 1 : 0;
  }
  CHECK(twice.load() == 0);
  CHECK(byOwner + byThief == kRounds);  // none lost
  CHECK_FALSE(worker.hasLocalWork());
}

TEST_CASE("PoolWorker: a yield waits behind the items that were waiting, unless forced", "[pool][worker]") {
  PoolWorker worker;
  REQUIRE(worker.pushYield(fakeHandle(7), /*waiting=*/2));
  CHECK(worker.hasLocalWork());
  CHECK_FALSE(worker.takeYield(/*force=*/false));  // two items to run first
  worker.noteRan();
  CHECK_FALSE(worker.takeYield(/*force=*/false));
  worker.noteRan();
  CHECK(numberOf(worker.takeYield(/*force=*/false)) == 7);
  CHECK_FALSE(worker.hasLocalWork());

  REQUIRE(worker.pushYield(fakeHandle(8), /*waiting=*/5));
  CHECK(numberOf(worker.takeYield(/*force=*/true)) == 8);  // a thief, or nothing else to run
  CHECK_FALSE(worker.takeYield(/*force=*/true));

  // The count starts anew for each first yield.
  worker.noteRan();  // no yield waiting: not counted
  REQUIRE(worker.pushYield(fakeHandle(9), /*waiting=*/1));
  CHECK_FALSE(worker.takeYield(/*force=*/false));
  worker.noteRan();
  CHECK(numberOf(worker.takeYield(/*force=*/false)) == 9);
}

TEST_CASE("PoolWorker: steal() takes the oldest of the local queue", "[pool][worker]") {
  PoolWorker worker;
  std::vector<int> values(3);
  for (int& value : values) (void)worker.local.push(reinterpret_cast<coexec::detail::TaskCore*>(&value));
  CHECK(worker.hasLocalWork());
  CHECK(worker.waitingHere() == 3);
  coexec::detail::TaskCore* taken = nullptr;
  REQUIRE(worker.steal(taken));
  CHECK(reinterpret_cast<int*>(taken) == &values[0]);
  REQUIRE(worker.steal(taken));
  CHECK(reinterpret_cast<int*>(taken) == &values[1]);
  REQUIRE(worker.local.pop(taken));  // the owner takes the newest
  CHECK(reinterpret_cast<int*>(taken) == &values[2]);
  CHECK_FALSE(worker.steal(taken));
  CHECK_FALSE(worker.hasLocalWork());
}
