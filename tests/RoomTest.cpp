// SPDX-License-Identifier: BSL-1.0
// The places of a bounded(n) queue on their own (src/admission/Room.h): the
// count, and the workers' credit of a large queue. Below kCreditMinCapacity
// every place is in the count. Above it, a worker takes places in batches
// and keeps those of the tasks that leave its own queue while the count is
// at most half the capacity; a reserve that finds the count full takes the
// credit back first, so the queue still refuses only when its places are
// taken, and the count never lets more than n places be held at once.

#include <atomic>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "admission/Room.h"

using coexec::detail::Room;

namespace {

constexpr std::size_t kNoSlot = Room::kNoSlot;

/// Reserves from outside (no slot) until refused; returns how many it got.
std::size_t fillFromOutside(Room& room) {
  std::size_t got = 0;
  while (room.reserve())
    ++got;
  return got;
}

}  // namespace

TEST_CASE("Room: a bounded queue below the credit capacity keeps every place in its count", "[room][admission]") {
  Room room(true, 4);
  for (int i = 0; i < 4; ++i)
    CHECK(room.reserve(/*slot=*/0));  // a worker's reserve takes one place
  CHECK(room.taken() == 4);
  CHECK(room.credit() == 0);
  CHECK_FALSE(room.reserve(0));
  CHECK_FALSE(room.reserve());
  room.release(1, /*slot=*/0);  // given back to the count, not kept
  CHECK(room.taken() == 3);
  CHECK(room.credit() == 0);
  CHECK(room.reserve());
  CHECK(room.taken() == 4);
}

TEST_CASE("Room: other queue kinds reserve nothing", "[room][admission]") {
  Room room(false, 0);
  for (int i = 0; i < 10; ++i)
    CHECK(room.reserve(0));
  room.release(3, kNoSlot);
  CHECK(room.taken() == 0);
  CHECK(room.credit() == 0);
}

TEST_CASE("Room: a worker takes places in batches and keeps its own pops' places while the count is at most half",
          "[room][admission]") {
  constexpr std::size_t kCapacity = Room::kCreditMinCapacity;
  Room room(true, kCapacity);
  REQUIRE(room.reserve(0));
  CHECK(room.taken() == Room::kCreditBatch);  // one batch taken from the count
  CHECK(room.credit() == Room::kCreditBatch - 1);
  for (std::size_t i = 1; i < Room::kCreditBatch; ++i)
    REQUIRE(room.reserve(0));  // from the credit: the count does not move
  CHECK(room.taken() == Room::kCreditBatch);
  CHECK(room.credit() == 0);

  for (std::size_t i = 0; i < Room::kCreditBatch; ++i)
    room.release(1, 0);  // the tasks left the worker's own queue: their places stay as credit
  CHECK(room.taken() == Room::kCreditBatch);
  CHECK(room.credit() == Room::kCreditBatch);

  SECTION("a slot keeps at most kCreditKeep places") {
    std::size_t reserved = 0;
    for (; reserved < 4 * Room::kCreditKeep; ++reserved)
      REQUIRE(room.reserve(1));
    for (std::size_t i = 0; i < reserved; ++i)
      room.release(1, 1);
    CHECK(room.credit() == Room::kCreditBatch + Room::kCreditKeep);  // slot 0's, and slot 1's kept ones
    CHECK(room.taken() == room.credit());
  }
  SECTION("a place that leaves a queue while the count is over half goes back to the count") {
    REQUIRE(fillFromOutside(room) == kCapacity - 0);  // takes slot 0's credit back, then every place
    CHECK(room.credit() == 0);
    CHECK(room.taken() == kCapacity);
    room.release(1, 0);
    CHECK(room.credit() == 0);
    CHECK(room.taken() == kCapacity - 1);
  }
  SECTION("a full count takes every slot's credit back before it refuses") {
    for (std::size_t slot = 1; slot < Room::kCreditSlots; ++slot) {
      REQUIRE(room.reserve(slot));
      room.release(1, slot);
    }
    const std::size_t credit = room.credit();
    CHECK(credit == Room::kCreditBatch + (Room::kCreditSlots - 1) * Room::kCreditBatch);
    CHECK(room.taken() == credit);  // no task holds a place: all of them are free
    CHECK(fillFromOutside(room) == kCapacity);
    CHECK(room.credit() == 0);
    CHECK_FALSE(room.reserve(3));  // a worker is refused too, with no credit left
    room.release(kCapacity, kNoSlot);
    CHECK(room.taken() == 0);
  }
}

TEST_CASE("Room: workers and outside producers racing reserve and release never hold more than the capacity",
          "[room][admission][litmus]") {
  // Two workers (slots 0 and 1) and two outside producers, 1,000,000 steps
  // each: every step reserves or releases, and each thread holds between 0
  // and 600 places, so that the count crosses half the capacity and reaches
  // it, and the producers take credit back at once. `held` counts the places the threads hold: after each successful
  // reserve it must not pass the capacity. At the end every place is given
  // back: only credit is left in the count, and the outside producer then
  // gets every place, exactly.
  constexpr std::size_t kCapacity = Room::kCreditMinCapacity;
  constexpr int kSteps = 1'000'000;
  Room room(true, kCapacity);
  std::atomic<std::size_t> held{0};
  std::atomic<std::size_t> overCapacity{0};
  std::atomic<std::uint64_t> reserved{0};
  std::atomic<std::uint64_t> refused{0};
  auto run = [&](std::size_t slot, std::uint32_t seed) {
    std::uint32_t state = seed;
    std::size_t mine = 0;
    std::uint64_t ok = 0;
    std::uint64_t no = 0;
    for (int step = 0; step < kSteps; ++step) {
      state = state * 1664525u + 1013904223u;
      const bool reserve = mine == 0 || (mine < 600 && (state >> 16) % 100 < 52);
      if (reserve) {
        if (room.reserve(slot)) {
          if (held.fetch_add(1) + 1 > kCapacity) overCapacity.fetch_add(1);
          ++mine;
          ++ok;
        } else {
          ++no;
        }
      } else {
        held.fetch_sub(1);  // before the release: the place is free once given back
        room.release(1, slot);
        --mine;
      }
    }
    for (; mine > 0; --mine) {
      held.fetch_sub(1);
      room.release(1, slot);
    }
    reserved.fetch_add(ok);
    refused.fetch_add(no);
  };
  std::thread worker0(run, 0, 1u);
  std::thread worker1(run, 1, 2u);
  std::thread outside0(run, kNoSlot, 3u);
  std::thread outside1(run, kNoSlot, 4u);
  worker0.join();
  worker1.join();
  outside0.join();
  outside1.join();
  CAPTURE(reserved.load(), refused.load());
  CHECK(overCapacity.load() == 0);
  CHECK(held.load() == 0);
  CHECK(refused.load() > 0);  // the count did reach the capacity
  // Each worker leaves credit (a batch, less the place it used, plus that
  // place kept), whatever the race left in its slot.
  for (const std::size_t slot : {std::size_t{0}, std::size_t{1}}) {
    REQUIRE(room.reserve(slot));
    room.release(1, slot);
  }
  CHECK(room.credit() > 0);
  CHECK(room.taken() == room.credit());  // nothing holds a place but credit
  CHECK(fillFromOutside(room) == kCapacity);
  CHECK(room.credit() == 0);
}

TEST_CASE("Room: two producers that find the count full while credit is free both get a place",
          "[room][admission][litmus]") {
  // The count is full, but 128 of its places are credit (8 in each slot),
  // free. Two producers reserve at the same moment: each finds the count
  // full and takes credit back, and both must succeed. A producer that read
  // the count before the other's take-back gave the places back must not
  // refuse. 10,000 rounds, each started and ended by a barrier.
  constexpr std::size_t kCapacity = Room::kCreditMinCapacity;
  constexpr int kRounds = 10'000;
  constexpr std::size_t kCredit = Room::kCreditSlots * Room::kCreditBatch;
  Room room(true, kCapacity);
  std::barrier sync(3);
  std::atomic<int> refused{0};
  auto producer = [&] {
    for (int round = 0; round < kRounds; ++round) {
      sync.arrive_and_wait();  // the count is full, the credit free
      if (!room.reserve()) refused.fetch_add(1);
      sync.arrive_and_wait();
    }
  };
  std::thread a(producer);
  std::thread b(producer);
  int badSetups = 0;
  for (int round = 0; round < kRounds; ++round) {
    for (std::size_t slot = 0; slot < Room::kCreditSlots; ++slot) {
      (void)room.reserve(slot);  // a batch: one place used, kCreditBatch - 1 held
      room.release(1, slot);     // the used one kept too
    }
    if (room.credit() != kCredit || room.taken() != kCredit) ++badSetups;
    for (std::size_t i = kCredit; i < kCapacity; ++i)
      (void)room.reserve();  // fills the count: no take-back needed yet
    if (room.taken() != kCapacity) ++badSetups;
    sync.arrive_and_wait();
    sync.arrive_and_wait();
    room.release(room.taken() - room.credit(), Room::kNoSlot);  // every place held by the round
    if (room.taken() != 0 || room.credit() != 0) ++badSetups;   // the producers took every credit back
  }
  a.join();
  b.join();
  CHECK(badSetups == 0);
  CHECK(refused.load() == 0);
}
