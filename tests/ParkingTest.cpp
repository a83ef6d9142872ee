// SPDX-License-Identifier: BSL-1.0
// The pool's idle stack and wake-up protocol (src/engine/Parking.h): the
// stack's order and bookkeeping, the search signals, and a litmus test that
// races the protocol itself, a producer publishing work against a worker
// parking, round after round: no round may end with the worker asleep and
// the work published.

#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>

#include "Assertions.h"

#include "engine/Parking.h"

using coexec::detail::Parking;
using coexec::detail::PoolWorker;

TEST_CASE("Parking: the most recently parked worker is woken first, and each wake-up takes one off the stack",
          "[pool][parking]") {
  std::mutex mutex;  // stands for the pool's
  Parking parking;
  PoolWorker a;
  PoolWorker b;
  PoolWorker c;
  std::lock_guard lock(mutex);
  parking.reserveLocked(3);
  CHECK_FALSE(parking.anyParked());
  CHECK_FALSE(parking.wakeOneLocked());
  CHECK(parking.nextLocked() == nullptr);

  parking.parkLocked(a);
  parking.parkLocked(b);
  parking.parkLocked(c);
  CHECK(parking.anyParked());
  CHECK(parking.wakeWanted());
  CHECK(parking.parkedLocked(b));
  CHECK(parking.nextLocked() == &c);

  // A worker that finds work after parking, or whose wait times out, takes
  // itself off wherever it is on the stack.
  parking.unparkLocked(b);
  CHECK_FALSE(parking.parkedLocked(b));
  CHECK_FALSE(b.signalled);

  CHECK(parking.wakeOneLocked());
  CHECK(c.signalled);
  CHECK_FALSE(parking.parkedLocked(c));
  CHECK(parking.nextLocked() == &a);
  parking.wakeAllLocked();
  CHECK(a.signalled);
  CHECK_FALSE(parking.anyParked());
  CHECK_FALSE(parking.wakeWanted());

  // Parking again clears the worker's signal.
  parking.parkLocked(a);
  CHECK_FALSE(a.signalled);
  parking.unparkLocked(a);
  CHECK_FALSE(parking.anyParked());
}

TEST_CASE("Parking: a searcher keeps producers from waking anyone, and sees the signals it polls", "[pool][parking]") {
  std::mutex mutex;
  Parking parking;
  PoolWorker parked;
  {
    std::lock_guard lock(mutex);
    parking.reserveLocked(1);
    parking.parkLocked(parked);
  }
  CHECK(parking.wakeWanted());
  const std::size_t since = parking.beginSearch();
  CHECK(parking.anySearching());
  CHECK_FALSE(parking.wakeWanted());  // the searcher will find the work
  CHECK_FALSE(parking.localWorkSignalled(since));
  parking.signalLocalWork();
  CHECK(parking.localWorkSignalled(since));
  {
    std::lock_guard lock(mutex);
    parking.publishSharedLocked(3);
  }
  CHECK(parking.sharedWork() == 3);
  parking.endSearch();
  CHECK_FALSE(parking.anySearching());
  CHECK(parking.wakeWanted());
  std::lock_guard lock(mutex);
  parking.unparkLocked(parked);
}

TEST_CASE("Parking: a producer publishing work and a worker parking never miss each other", "[pool][parking][litmus]") {
  // Each round: the producer publishes the round's number (seq_cst) and,
  // if the protocol says so, wakes a parked worker; the worker parks, looks
  // at the published number again, and either takes the work at once or
  // waits for its wake-up. A lost wake-up leaves it waiting with the work
  // published: its wait (far longer than a round) times out.
  constexpr int kRounds = 20000;
  std::mutex mutex;
  Parking parking;
  PoolWorker worker;
  {
    std::lock_guard lock(mutex);
    parking.reserveLocked(1);
  }
  std::atomic<int> published{0};
  std::barrier sync(2);
  std::thread producer([&] {
    for (int round = 1; round <= kRounds; ++round) {
      sync.arrive_and_wait();
      published.store(round, std::memory_order_seq_cst);
      if (parking.wakeWanted()) {
        std::lock_guard lock(mutex);
        parking.wakeOneLocked();
      }
      sync.arrive_and_wait();  // the worker has the work: the next round
    }
  });
  int foundAfterParking = 0;
  int woken = 0;
  int lost = 0;
  for (int round = 1; round <= kRounds; ++round) {
    sync.arrive_and_wait();
    {
      std::unique_lock lock(mutex);
      parking.parkLocked(worker);
      if (published.load(std::memory_order_seq_cst) == round) {
        parking.unparkLocked(worker);
        ++foundAfterParking;
      } else if (worker.wake.wait_for(lock, std::chrono::seconds(5), [&] { return worker.signalled; })) {
        ++woken;
      } else {
        parking.unparkLocked(worker);
        ++lost;
      }
    }
    sync.arrive_and_wait();
  }
  producer.join();
  INFO(foundAfterParking << " rounds found the work after parking, " << woken << " were woken");
  CHECK(lost == 0);
  CHECK(foundAfterParking + woken == kRounds);
  std::lock_guard lock(mutex);
  CHECK_FALSE(parking.anyParked());
}
