// SPDX-License-Identifier: BSL-1.0
// ThreadPoolExecutor::submitWhenRoom(): a producer coroutine suspends while
// the pool has no room, and its task is admitted when room appears; FIFO
// among waiting producers; the ends of a wait without admission (timeout,
// the producer's cancellation, shutdown, shutdownNow) with nothing admitted
// and the ledger adding up; a storm of producers with every item accounted
// for; the GCC 12 safe forms.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "AdmissionTestSupport.h"
#include "TestSupport.h"
#include "coexec/Clock.h"
#include "coexec/CurrentToken.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThisThread.h"
#include "coexec/ThreadPoolExecutor.h"

using namespace std::chrono_literals;

namespace coexec::test {
namespace {

/// A pool of one thread and a bounded(1) queue, saturated by two tasks that
/// wait on `gate` (one running, one queued), with the abort() policy: a
/// submit() now would throw.
struct Full {
  explicit Full(std::string name, Clock* clock = nullptr)
      : pool([&] {
          ThreadPoolOptions o = poolOptions(std::move(name), 1, 1, WorkQueue::bounded(1));
          o.clock = clock;
          return o;
        }()) {
    pool.execute(blockingTask(gate, started));
    pool.execute(blockingTask(gate, started));
    REQUIRE(started.waitFor(1));
  }
  Gate gate;
  Counter started;
  ThreadPoolExecutor pool;
  OpenOnExit release{gate};
};

/// What a producer coroutine ended with.
struct Outcome {
  std::exception_ptr error;
  int value = -1;
  std::atomic<bool> done{false};
};

/// A producer: waits for room for a task returning `value`, then awaits its
/// result. Records the result or the error in `out`.
Task<void> produce(ThreadPoolExecutor& pool, int value, Outcome& out) {
  try {
    Future<int> f = co_await pool.submitWhenRoom([value] { return value; });
    out.value = co_await f;
  } catch (...) {
    out.error = std::current_exception();
  }
  out.done = true;
}

Task<void> produceWithin(ThreadPoolExecutor& pool, std::chrono::nanoseconds timeout, std::atomic<bool>& ran,
                         Outcome& out) {
  try {
    Future<void> f = co_await pool.submitWhenRoom([&ran] { ran = true; }, timeout);
    co_await f;
    out.value = 1;
  } catch (...) {
    out.error = std::current_exception();
  }
  out.done = true;
}

template <class E>
bool holds(const std::exception_ptr& error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const E&) {
    return true;
  } catch (...) {
  }
  return false;
}

TEST_CASE("submitWhenRoom suspends the producer while the pool is full, then admits its task without the policy",
          "[backpressure]") {
  Full full("room");
  Outcome out;
  std::thread producer([&] { syncWait(produce(full.pool, 42, out)); });
  REQUIRE(eventually([&] { return full.pool.stats().waitingProducers == 1; }));
  CHECK_FALSE(out.done.load());
  PoolStats s = full.pool.stats();
  CHECK(s.rejectedCount == 0);  // abort() was never called
  CHECK(s.taskCount == 2);      // the waiting task is in no count

  full.gate.open();
  producer.join();
  REQUIRE(out.error == nullptr);
  CHECK(out.value == 42);
  s = finalStats(full.pool);
  CHECK(s.taskCount == 3);
  CHECK(s.completedTaskCount == 3);
  CHECK(s.waitedForRoomCount == 1);
  CHECK(s.waitingProducers == 0);
  CHECK(s.rejectedCount == 0);
  checkLedgerAddsUp(s);
}

TEST_CASE("submitWhenRoom with room admits at once, counted as a plain submission", "[backpressure]") {
  ThreadPoolExecutor pool(poolOptions("roomfree", 1, 1, WorkQueue::bounded(4)));
  Outcome out;
  syncWait(produce(pool, 7, out));
  REQUIRE(out.error == nullptr);
  CHECK(out.value == 7);
  const PoolStats s = finalStats(pool);
  CHECK(s.taskCount == 1);
  CHECK(s.waitedForRoomCount == 0);
}

Task<void> produceOnPool(ThreadPoolExecutor& target, Outcome& out) {
  Future<int> f = co_await target.submitWhenRoom([] { return 5; });
  out.value = co_await f;
  out.done = true;
}

TEST_CASE("a producer suspended for room leaves its thread free for other work", "[backpressure]") {
  Full full("roomthr");
  ThreadPoolExecutor producers(poolOptions("roomprod", 1, 1, WorkQueue::unbounded()));
  Outcome out;
  Future<void> producer = producers.submit([&] { return produceOnPool(full.pool, out); });
  REQUIRE(eventually([&] { return full.pool.stats().waitingProducers == 1; }));
  // The producers pool has one thread: it runs this while the producer waits.
  Future<int> other = producers.submit([] { return 9; });
  REQUIRE(other.waitFor(kLong));
  CHECK(other.get() == 9);
  CHECK_FALSE(out.done.load());
  full.gate.open();
  REQUIRE(producer.waitFor(kLong));
  producer.get();
  CHECK(out.value == 5);
}

TEST_CASE("a task of the pool producing into its own saturated pool waits for room instead of deadlocking",
          "[backpressure]") {
  // block() would hold the pool's only thread while it waits: nothing could
  // make room before its timeout. A suspended producer frees the thread,
  // which runs the queued tasks, which makes room.
  ThreadPoolExecutor pool(poolOptions("roomself", 1, 1, WorkQueue::bounded(2)));
  static constexpr int kItems = 200;
  std::atomic<int> ran{0};
  Future<int> producer = pool.submit([&pool, &ran]() -> Task<int> {
    std::vector<Future<void>> futures;
    for (int i = 0; i < kItems; ++i)
      futures.push_back(co_await pool.submitWhenRoom([&ran] { ran.fetch_add(1); }));
    for (Future<void>& f : futures)
      co_await f;
    co_return kItems;
  });
  REQUIRE(producer.waitFor(kLong));
  CHECK(producer.get() == kItems);
  CHECK(ran.load() == kItems);
  const PoolStats s = finalStats(pool);
  CHECK(s.taskCount == kItems + 1);
  CHECK(s.waitedForRoomCount > 0);  // two places, 200 items, one thread: it had to wait
  CHECK(s.rejectedCount == 0);
  checkLedgerAddsUp(s);
}

TEST_CASE("waiting producers are admitted first come, first served, also while plain submissions take room",
          "[backpressure]") {
  const bool competing = GENERATE(false, true);
  INFO((competing ? "with a thread taking room by tryExecute()" : "alone"));
  Full full("roomfifo");
  constexpr int kProducers = 4;
  std::mutex orderMutex;
  std::vector<int> order;  // the order the producers' tasks ran in (one thread, FIFO queue: admission order)
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<Outcome>> outs;
  for (int i = 0; i < kProducers; ++i) {
    outs.push_back(std::make_unique<Outcome>());
    Outcome& out = *outs.back();
    threads.emplace_back([&full, &orderMutex, &order, &out, i] {
      syncWait([](ThreadPoolExecutor& pool, std::mutex& m, std::vector<int>& order, Outcome& out,
                  int i) -> Task<void> {
        Future<void> f = co_await pool.submitWhenRoom([&m, &order, i] {
          std::lock_guard lock(m);
          order.push_back(i);
        });
        co_await f;
        out.done = true;
      }(full.pool, orderMutex, order, out, i));
    });
    // The next one arrives only once this one waits: arrival order is i.
    REQUIRE(eventually([&] { return full.pool.stats().waitingProducers == static_cast<std::size_t>(i) + 1; }));
  }
  // The competitor takes whatever room it finds first; a producer whose
  // room it took stays first in line.
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> taken{0};
  std::thread competitor;
  if (competing) {
    competitor = std::thread([&] {
      while (!stop.load()) {
        if (full.pool.tryExecute([] {})) taken.fetch_add(1);
      }
    });
  }
  full.gate.open();
  for (std::thread& t : threads)
    t.join();
  stop = true;
  if (competitor.joinable()) competitor.join();
  CHECK(order == std::vector<int>{0, 1, 2, 3});
  const PoolStats s = finalStats(full.pool);
  CHECK(s.waitedForRoomCount == kProducers);
  CHECK(s.taskCount == 2 + kProducers + taken.load());
  CHECK(s.rejectedCount == 0);
  checkLedgerAddsUp(s);
}

TEST_CASE("a waiting producer gives up at its timeout on the pool's clock, with nothing admitted", "[backpressure]") {
  ManualClock clock;
  Full full("roomto", &clock);
  std::atomic<bool> ran{false};
  Outcome out;
  std::thread producer([&] { syncWait(produceWithin(full.pool, 5s, ran, out)); });
  REQUIRE(eventually([&] { return full.pool.stats().waitingProducers == 1; }));
  clock.advance(4s);
  CHECK_FALSE(out.done.load());
  clock.advance(1s);
  producer.join();
  CHECK(holds<TimeoutError>(out.error));
  PoolStats s = full.pool.stats();
  CHECK(s.waitingProducers == 0);
  CHECK(s.rejectedCount == 0);
  CHECK(s.taskCount == 2);
  full.gate.open();
  s = finalStats(full.pool);
  CHECK_FALSE(ran.load());
  CHECK(s.taskCount == 2);
  CHECK(s.waitedForRoomCount == 0);
  checkLedgerAddsUp(s);
}

TEST_CASE("a timeout that has passed already gives the producer one try", "[backpressure]") {
  std::atomic<bool> ran{false};
  {
    Full full("roomto0");
    Outcome out;
    syncWait(produceWithin(full.pool, 0s, ran, out));
    CHECK(holds<TimeoutError>(out.error));
    CHECK(full.pool.stats().waitingProducers == 0);
  }
  CHECK_FALSE(ran.load());
  ThreadPoolExecutor roomy(poolOptions("roomto0b", 1, 1, WorkQueue::bounded(1)));
  Outcome out;
  syncWait(produceWithin(roomy, 0s, ran, out));
  CHECK(out.error == nullptr);
  CHECK(ran.load());
}

TEST_CASE("a producer whose task is cancelled while it waits gets OperationCancelled, nothing admitted",
          "[backpressure][cancel]") {
  Full full("roomcx");
  ThreadPoolExecutor producers(poolOptions("roomcxp", 1, 1, WorkQueue::unbounded()));
  std::atomic<bool> ran{false};
  Outcome out;
  Future<void> producer = producers.submit(
      [&]() -> Task<void> { co_await produceWithin(full.pool, std::chrono::hours(1), ran, out); });
  REQUIRE(eventually([&] { return full.pool.stats().waitingProducers == 1; }));
  producer.cancel();
  REQUIRE(eventually([&] { return out.done.load(); }));
  CHECK(holds<OperationCancelled>(out.error));
  CHECK(full.pool.stats().waitingProducers == 0);
  full.gate.open();
  const PoolStats s = finalStats(full.pool);
  CHECK_FALSE(ran.load());
  CHECK(s.taskCount == 2);
  CHECK(s.rejectedCount == 0);
  CHECK(s.cancelledCount == 0);
  checkLedgerAddsUp(s);
}

TEST_CASE("a producer already cancelled gets OperationCancelled at once", "[backpressure][cancel]") {
  ThreadPoolExecutor pool(poolOptions("roomcx0", 1, 1, WorkQueue::bounded(1)));
  CancellationSource source;
  std::atomic<bool> ran{false};
  Outcome out;
  Gate hold;
  Counter inside;
  OpenOnExit release(hold);
  Future<void> producer = pool.submit([&]() -> Task<void> {
    inside.arrive();
    hold.wait();
    co_await produceWithin(pool, 1s, ran, out);
  });
  REQUIRE(inside.waitFor(1));
  producer.cancel();  // while it runs: its token is cancelled before the await
  hold.open();
  REQUIRE(producer.waitFor(kLong));
  REQUIRE(out.done.load());
  CHECK(holds<OperationCancelled>(out.error));
  CHECK_FALSE(ran.load());
  const PoolStats s = finalStats(pool);
  CHECK(s.waitedForRoomCount == 0);
  checkLedgerAddsUp(s);
}

TEST_CASE("a task linked to a cancelled token is not admitted: its Future reports OperationCancelled",
          "[backpressure][cancel]") {
  ThreadPoolExecutor pool(poolOptions("roomtok", 1, 1, WorkQueue::bounded(1)));
  CancellationSource source;
  source.requestCancellation();
  std::atomic<bool> ran{false};
  auto body = [](ThreadPoolExecutor& p, CancellationToken t, std::atomic<bool>& r) -> Task<bool> {
    Future<void> f = co_await p.submitWhenRoom([&r] { r = true; }, t);
    try {
      co_await f;
    } catch (const OperationCancelled&) {
      co_return true;
    }
    co_return false;
  };
  CHECK(syncWait(body(pool, source.token(), ran)));
  const PoolStats s = finalStats(pool);
  CHECK_FALSE(ran.load());
  CHECK(s.taskCount == 1);  // as submit(f, token) counts a task cancelled at submission
  CHECK(s.cancelledCount == 1);
  CHECK(s.rejectedCount == 0);
  checkLedgerAddsUp(s);
}

TEST_CASE("shutdown or shutdownNow while producers wait: RejectedExecution, nothing admitted", "[backpressure][shutdown]") {
  const bool now = GENERATE(false, true);
  INFO((now ? "shutdownNow()" : "shutdown()"));
  Full full("roomsd");
  Outcome a;
  Outcome b;
  std::thread pa([&] { syncWait(produce(full.pool, 1, a)); });
  REQUIRE(eventually([&] { return full.pool.stats().waitingProducers == 1; }));
  std::thread pb([&] { syncWait(produce(full.pool, 2, b)); });
  REQUIRE(eventually([&] { return full.pool.stats().waitingProducers == 2; }));
  std::vector<PendingTask> drained;
  if (now) {
    drained = full.pool.shutdownNow();
  } else {
    full.pool.shutdown();
  }
  pa.join();
  pb.join();
  CHECK(holds<RejectedExecution>(a.error));
  CHECK(holds<RejectedExecution>(b.error));
  CHECK(full.pool.stats().waitingProducers == 0);
  full.gate.open();
  REQUIRE(full.pool.awaitTermination(kLong));
  const PoolStats s = full.pool.stats();
  CHECK(s.taskCount == 2);
  CHECK(s.rejectedCount == 2);  // the pool refused them
  CHECK(s.waitedForRoomCount == 0);
  CHECK(drained.size() == (now ? 1u : 0u));
  checkLedgerAddsUp(s);
}

TEST_CASE("submitWhenRoom after shutdown: RejectedExecution at once", "[backpressure][shutdown]") {
  ThreadPoolExecutor pool(poolOptions("roomsd0", 1, 1, WorkQueue::bounded(1)));
  pool.shutdown();
  Outcome out;
  syncWait(produce(pool, 1, out));
  CHECK(holds<RejectedExecution>(out.error));
  CHECK(pool.stats().rejectedCount == 1);
  CHECK(pool.stats().taskCount == 0);
}

TEST_CASE("an awaitable dropped without being awaited submits nothing", "[backpressure]") {
  ThreadPoolExecutor pool(poolOptions("roomdrop", 1, 1, WorkQueue::bounded(1)));
  std::atomic<bool> ran{false};
  {
    auto room = pool.submitWhenRoom([&ran] { ran = true; });
    (void)room;
  }
  const PoolStats s = finalStats(pool);
  CHECK_FALSE(ran.load());
  CHECK(s.taskCount == 0);
}

Task<std::size_t> namedForms(ThreadPoolExecutor& pool) {
  const std::string s(100, 'x');  // a capture that owns memory: the named form
  auto room = pool.submitWhenRoom([s] { return s.size(); });
  Future<std::size_t> f = co_await room;
  std::size_t total = co_await f;
  // A trivially destructible callable as a temporary: accepted everywhere.
  Future<std::size_t> g = co_await pool.submitWhenRoom([&s] { return s.size(); });
  total += co_await g;
  TaskOptions named{.name = "room-named"};
  Future<std::size_t> h = co_await pool.submitWhenRoom([] { return std::size_t{1}; }, named);
  total += co_await h;
  Future<std::size_t> k = co_await pool.submitWhenRoom([] { return std::size_t{2}; }, CancellationToken(), 3);
  total += co_await k;
  co_return total;
}

TEST_CASE("the safe forms: a named awaitable for an owning callable, temporaries of trivial ones, each overload",
          "[backpressure][gcc12]") {
  ThreadPoolExecutor pool(poolOptions("roomforms", 1, 1, WorkQueue::bounded(1)));
  CHECK(syncWait(namedForms(pool)) == 203);
}

TEST_CASE("a storm of producers against a bounded pool: every item is processed once, none refused",
          "[backpressure][stress]") {
  constexpr std::size_t kProducers = 6;
  constexpr std::size_t kItems = stressSize(2'000, 4);
  ThreadPoolExecutor pool(poolOptions("roomstorm", 1, 2, WorkQueue::bounded(3)));
  ThreadPoolExecutor producers(poolOptions("roomstormp", 2, 2, WorkQueue::unbounded()));
  std::atomic<std::size_t> processed{0};
  std::atomic<std::size_t> competitors{0};  // plain tryExecute()s that took room meanwhile
  std::vector<Future<std::size_t>> done;
  for (std::size_t p = 0; p < kProducers; ++p) {
    done.push_back(producers.submit([&pool, &processed]() -> Task<std::size_t> {
      std::vector<Future<void>> futures;
      futures.reserve(kItems);
      for (std::size_t i = 0; i < kItems; ++i)
        futures.push_back(co_await pool.submitWhenRoom([&processed] { processed.fetch_add(1); }));
      std::size_t settled = 0;
      for (Future<void>& f : futures) {
        co_await f;
        ++settled;
      }
      co_return settled;
    }));
  }
  // Competing for the same room without waiting.
  std::thread competitor([&] {
    for (std::size_t i = 0; i < kItems; ++i) {
      if (pool.tryExecute([&processed] { processed.fetch_add(1); })) competitors.fetch_add(1);
      if (i % 64 == 0) std::this_thread::yield();
    }
  });
  std::size_t settled = 0;
  for (Future<std::size_t>& f : done) {
    REQUIRE(f.waitFor(kLong * 6));
    settled += f.get();
  }
  competitor.join();
  CHECK(settled == kProducers * kItems);
  const PoolStats s = finalStats(pool);
  CHECK(processed.load() == kProducers * kItems + competitors.load());
  CHECK(s.taskCount == kProducers * kItems + competitors.load());
  CHECK(s.completedTaskCount == s.taskCount);
  CHECK(s.rejectedCount == 0);
  CHECK(s.waitingProducers == 0);
  CHECK(s.waitedForRoomCount <= kProducers * kItems);
  checkLedgerAddsUp(s);
}

TEST_CASE("producers cancelled, timing out and admitted at once: each ends exactly one way, the ledger adds up",
          "[backpressure][stress]") {
  const std::size_t kRounds = stressSize(200, 4);
  for (std::size_t round = 0; round < kRounds; ++round) {
    ThreadPoolExecutor pool(poolOptions("roommix", 1, 1, WorkQueue::bounded(1)));
    ThreadPoolExecutor producers(poolOptions("roommixp", 2, 2, WorkQueue::unbounded()));
    std::atomic<std::size_t> ran{0};
    std::atomic<std::size_t> admitted{0};
    std::atomic<std::size_t> cancelled{0};
    std::atomic<std::size_t> timedOut{0};
    std::vector<Future<void>> futures;
    for (std::size_t i = 0; i < 8; ++i) {
      futures.push_back(producers.submit([&, i]() -> Task<void> {
        Future<void> f;
        try {
          f = co_await pool.submitWhenRoom([&ran] { ran.fetch_add(1); }, std::chrono::microseconds(50 * (i % 3)));
          admitted.fetch_add(1);
        } catch (const TimeoutError&) {
          timedOut.fetch_add(1);
        } catch (const OperationCancelled&) {
          cancelled.fetch_add(1);
        }
        // A producer cancelled after its task was admitted: the await of the
        // Future throws, which is not how the wait for room ended.
        if (f.valid()) {
          try {
            co_await f;
          } catch (const OperationCancelled&) {
          }
        }
      }));
    }
    if (round % 2 == 0) futures[round % futures.size()].cancel();
    for (Future<void>& f : futures)
      REQUIRE(f.waitFor(kLong));
    const PoolStats s = finalStats(pool);
    // Each wait ended one way; a producer cancelled before it started, none.
    CHECK(admitted.load() + timedOut.load() + cancelled.load() <= 8);
    if (round % 2 != 0) CHECK(admitted.load() + timedOut.load() + cancelled.load() == 8);
    // A producer cancelled after admission cancels its task too (its child).
    CHECK(s.taskCount == admitted.load());
    CHECK(s.completedTaskCount == ran.load());
    CHECK(s.rejectedCount == 0);
    CHECK(s.waitingProducers == 0);
    checkLedgerAddsUp(s);
  }
}

TEST_CASE("a submitWhenRoom awaitable awaited a second time throws std::logic_error and submits nothing more",
          "[backpressure][bad-input]") {
  ThreadPoolExecutor pool(poolOptions("roomtwice", 1, 1, WorkQueue::bounded(4)));
  auto twice = [](ThreadPoolExecutor& target) -> Task<std::string> {
    auto room = target.submitWhenRoom([] { return 3; });
    Future<int> first = co_await room;
    const int value = co_await first;
    try {
      (void)co_await room;
    } catch (const std::logic_error& e) {
      co_return std::to_string(value) + ": " + e.what();
    }
    co_return "no exception";
  };
  const std::string result = syncWait(twice(pool));
  CHECK_THAT(result, Catch::StartsWith("3: coexec::ThreadPoolExecutor::submitWhenRoom: this awaitable was already "
                                       "awaited"));
  const PoolStats s = finalStats(pool);
  CHECK(s.taskCount == 1);
  checkLedgerAddsUp(s);
}

}  // namespace
}  // namespace coexec::test
