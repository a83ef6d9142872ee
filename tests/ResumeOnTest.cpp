// SPDX-License-Identifier: BSL-1.0
#include "coexec/ResumeOn.h"

// co_await resumeOn(pool): from outside the pool the hop is new work that goes
// through admission (abort and discard make the co_await throw
// RejectedExecution and the coroutine goes on where it was; callerRuns goes
// on in the caller; a hop dropped after shutdownNow throws BrokenPromise);
// from inside the pool it is a yield that is never rejected.

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "CoroutineTestSupport.h"
#include "coexec/Clock.h"
#include "coexec/Sleep.h"
#include "coexec/SyncWait.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/ThisThread.h"

using coexec::BrokenPromise;
using coexec::Future;
using coexec::PendingTask;
using coexec::RejectedExecution;
using coexec::RejectionPolicy;
using coexec::resumeOn;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::test::Counter;
using coexec::test::currentTag;
using coexec::test::eventually;
using coexec::test::executeBlocked;
using coexec::test::Gate;
using coexec::test::OpenOnExit;
using coexec::test::taggedPool;
using coexec::test::throwsA;

using namespace std::chrono_literals;

namespace {

/// Hops to `pool` and reports what happened: "hopped to <tag>", "rejected at
/// home", "rejected elsewhere", or "ran at home" (callerRuns).
Task<std::string> tryHop(ThreadPoolExecutor& pool, std::thread::id home) {
  try {
    co_await resumeOn(pool);
  } catch (const RejectedExecution&) {
    co_return coexec::thisThreadId() == home ? "rejected at home" : "rejected elsewhere";
  }
  if (coexec::thisThreadId() == home) co_return "ran at home";
  co_return "hopped to " + std::string(currentTag);
}

/// A pool with one thread, busy until `gate` opens, and a full queue of one.
struct SaturatedPool {
  explicit SaturatedPool(RejectionPolicy policy)
      : pool(taggedPool("sat", 1, 1, WorkQueue::bounded(1), std::move(policy))) {
    Counter started;
    pool.execute([this, &started] {
      started.arrive();
      gate.wait();
    });
    REQUIRE(started.waitFor(1));
    pool.execute([] {});  // fills the queue
    REQUIRE(pool.stats().queueSize == 1);
  }

  Gate gate;
  ThreadPoolExecutor pool;
  OpenOnExit release{gate};
};

}  // namespace

TEST_CASE("resumeOn from outside the pool continues on a thread of that pool", "[resumeOn]") {
  ThreadPoolExecutor pool(taggedPool("ro", 1, 1, WorkQueue::bounded(4)));
  CHECK(syncWait(tryHop(pool, std::this_thread::get_id())) == "hopped to ro");
}

TEST_CASE("resumeOn between two pools runs the coroutine on each in turn", "[resumeOn][affinity]") {
  ThreadPoolExecutor a(taggedPool("a", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor b(taggedPool("b", 1, 1, WorkQueue::bounded(4)));
  auto visit = [](ThreadPoolExecutor& first, ThreadPoolExecutor& second) -> Task<std::vector<std::string>> {
    std::vector<std::string> tags;
    co_await resumeOn(first);
    tags.emplace_back(currentTag);
    co_await resumeOn(second);
    tags.emplace_back(currentTag);
    co_await resumeOn(first);
    tags.emplace_back(currentTag);
    co_return tags;
  };
  CHECK(syncWait(visit(a, b)) == std::vector<std::string>{"a", "b", "a"});
}

TEST_CASE("resumeOn from a coroutine already on the pool is a yield that is never rejected", "[resumeOn][admission]") {
  ThreadPoolExecutor pool(taggedPool("yield", 1, 1, WorkQueue::bounded(1)));
  struct Seen {
    bool queueWasFull = false;
    bool stayedOnPool = false;
    int queuedValue = 0;
  };
  Future<Seen> future = pool.submit([&pool]() -> Task<Seen> {
    Seen seen;
    Future<int> queued = pool.submit([] { return 7; });  // the only thread is this one: queued
    seen.queueWasFull = throwsA<RejectedExecution>([&pool] { (void)pool.submit([] { return 0; }); });
    co_await resumeOn(pool);  // a yield through the continuation queue
    seen.stayedOnPool = currentTag == "yield";
    seen.queuedValue = co_await queued;
    co_return seen;
  });
  const Seen seen = future.get();
  CHECK(seen.queueWasFull);
  CHECK(seen.stayedOnPool);
  CHECK(seen.queuedValue == 7);
  CHECK(pool.stats().rejectedCount == 1);  // the probe, not the yield
}

TEST_CASE("resumeOn to a saturated pool under abort throws RejectedExecution and the coroutine goes on on its thread",
          "[resumeOn][rejection]") {
  SaturatedPool s(RejectionPolicy::abort());
  CHECK(syncWait(tryHop(s.pool, std::this_thread::get_id())) == "rejected at home");
  CHECK(s.pool.stats().rejectedCount == 1);
}

TEST_CASE("resumeOn to a saturated pool under discard throws RejectedExecution", "[resumeOn][rejection]") {
  SaturatedPool s(RejectionPolicy::discard());
  CHECK(syncWait(tryHop(s.pool, std::this_thread::get_id())) == "rejected at home");
  CHECK(s.pool.stats().rejectedCount == 1);
}

TEST_CASE("resumeOn to a saturated pool under callerRuns goes on in the calling thread", "[resumeOn][rejection]") {
  SaturatedPool s(RejectionPolicy::callerRuns());
  CHECK(syncWait(tryHop(s.pool, std::this_thread::get_id())) == "ran at home");
  CHECK(s.pool.stats().rejectedCount == 1);
}

TEST_CASE("resumeOn to a shut-down pool throws RejectedExecution", "[resumeOn][rejection][shutdown]") {
  ThreadPoolExecutor pool(taggedPool("down", 1, 1, WorkQueue::bounded(4)));
  pool.shutdown();
  CHECK(syncWait(tryHop(pool, std::this_thread::get_id())) == "rejected at home");
}

TEST_CASE("a resumeOn hop returned by shutdownNow and dropped resumes the coroutine with BrokenPromise",
          "[resumeOn][shutdown]") {
  Gate gate;
  ThreadPoolExecutor target(taggedPool("tgt", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor origin(taggedPool("org", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit release(gate);
  Counter started;
  executeBlocked(target, 1, started, gate);
  REQUIRE(started.waitFor(1));
  Future<std::string> outcome = origin.submit([&target]() -> Task<std::string> {
    try {
      co_await resumeOn(target);  // queued behind the blocked task
    } catch (const BrokenPromise&) {
      co_return "broken promise";
    }
    co_return "hopped";
  });
  REQUIRE(eventually([&] { return target.stats().queueSize == 1; }));
  std::vector<PendingTask> unrun = target.shutdownNow();
  REQUIRE(unrun.size() == 1);
  unrun.clear();  // drops the hop: the coroutine resumes here with BrokenPromise
  CHECK(outcome.get() == "broken promise");
  gate.open();
}

TEST_CASE("a coroutine task that finishes on another pool's thread never touches its pool after close() returned",
          "[resumeOn][lifecycle]") {
  // The task of `pool` finishes on `other`'s thread: that thread settles the
  // Future, takes the task off `pool`'s in-flight count and must then leave
  // `pool` alone, because get() returns and the destructor frees it at once.
  // With `pool` already shut down, the finish takes the path that terminates
  // the pool, and `pool`'s own worker races it to do so. Under ASan a touch
  // after the free is a heap-use-after-free.
  const bool shutDownFirst = GENERATE(false, true);
  INFO((shutDownFirst ? "pool shut down while the task is in flight" : "pool running when the task finishes"));
  ThreadPoolExecutor other(taggedPool("other", 1, 1, WorkQueue::bounded(64)));
  const int rounds = coexec::test::kSanitized ? 300 : 2000;
  for (int i = 0; i < rounds; ++i) {
    Gate finish;
    auto pool = std::make_unique<ThreadPoolExecutor>(taggedPool("short", 1, 1, WorkQueue::bounded(4)));
    OpenOnExit release(finish);
    Counter onOther;
    Future<int> result = pool->submit([&other, &finish, &onOther, i]() -> Task<int> {
      co_await resumeOn(other);
      onOther.arrive();
      finish.wait();
      co_return i;
    });
    REQUIRE(onOther.waitFor(1));
    if (shutDownFirst) pool->shutdown();  // in flight: the pool waits for it
    finish.open();
    REQUIRE(result.get() == i);
    pool.reset();  // close(): waits until the finish on `other` is done with the pool
  }
}

TEST_CASE("resumeOn to a saturated callerRuns pool runs each refused hop in the caller without nesting",
          "[resumeOn][rejection][stack]") {
  // Each refused hop runs the coroutine's rest in the calling thread. Nested
  // inside the refused hop's await_suspend, 100,000 hops would need far more
  // than the 256 KiB stack they run on here.
  SaturatedPool s(RejectionPolicy::callerRuns());
  constexpr int kHops = 100'000;
  const int ranAtHome = coexec::test::runOnStackOf(256 * 1024, [&] {
    const std::thread::id home = std::this_thread::get_id();
    return syncWait([](ThreadPoolExecutor& pool, std::thread::id caller) -> Task<int> {
      int atHome = 0;
      for (int i = 0; i < kHops; ++i) {
        co_await resumeOn(pool);
        if (coexec::thisThreadId() == caller) ++atHome;
      }
      co_return atHome;
    }(s.pool, home));
  });
  CHECK(ranAtHome == kHops);
  CHECK(s.pool.stats().rejectedCount == kHops);
}

TEST_CASE("resumeOn of the pool a coroutine runs on yields to the work already queued",
          "[resumeOn][yield]") {
  // One thread: the coroutine spins on a flag that only a queued task sets.
  // A yield that were served before queued work would spin forever (bounded
  // here by kMaxYields).
  const WorkQueue queue = GENERATE(WorkQueue::bounded(4), WorkQueue::unbounded(), WorkQueue::priority(4));
  const bool fromOutside = GENERATE(false, true);
  INFO((fromOutside ? "flag task submitted from outside" : "flag task submitted by the coroutine"));
  constexpr int kMaxYields = 100'000;
  Gate submitted;
  ThreadPoolExecutor pool(taggedPool("yielder", 1, 1, queue));
  OpenOnExit release(submitted);
  std::atomic<bool> flag{false};
  Counter started;
  Future<int> yields = pool.submit([&]() -> Task<int> {
    if (fromOutside) {
      started.arrive();
      submitted.wait();  // the flag task is queued behind this one
    } else {
      pool.execute([&flag] { flag = true; });
    }
    int n = 0;
    while (!flag.load() && n < kMaxYields) {
      co_await resumeOn(pool);
      ++n;
    }
    co_return n;
  });
  if (fromOutside) {
    REQUIRE(started.waitFor(1));
    pool.execute([&flag] { flag = true; });
    submitted.open();
  }
  const int n = yields.get();
  CHECK(flag.load());
  CHECK(n == 1);  // the first yield let the queued task run
}

namespace {

/// Hops onto `pool` from outside (a guest: not one of the pool's tasks),
/// says so, then sleeps there for an hour of `pool`'s clock.
Task<int> guestSleeping(ThreadPoolExecutor& pool, std::atomic<bool>& onPool) {
  co_await resumeOn(pool);
  onPool = true;
  co_await coexec::sleepFor(1h);
  co_return 7;
}

/// Hops onto `host` from outside, then awaits `future` (another pool's task)
/// there.
Task<int> guestAwaiting(ThreadPoolExecutor& host, Future<int>& future, std::atomic<bool>& onPool) {
  co_await resumeOn(host);
  onPool = true;
  const int v = co_await future;
  co_return v + 1;
}

}  // namespace

TEST_CASE("a coroutine that hopped onto a pool and sleeps there keeps the pool from terminating until it ends",
          "[resumeOn][shutdown][reliability]") {
  // Caught by the model-based stress driver: the pool terminated with the
  // guest's sleep in its timers and dropped it; the coroutine never resumed
  // (its syncWait hung, its frame leaked).
  coexec::ManualClock clock;
  ThreadPoolExecutor pool({.name = "host", .corePoolSize = 1, .maximumPoolSize = 1, .clock = &clock});
  std::atomic<bool> onPool{false};
  std::atomic<bool> done{false};
  int result = 0;
  std::thread guest([&] {
    result = syncWait(guestSleeping(pool, onPool));
    done = true;
  });
  // A guest that never resumes must fail the test, not hang it.
  struct JoinOrDetach {
    std::thread& thread;
    std::atomic<bool>& done;
    ~JoinOrDetach() { done ? thread.join() : thread.detach(); }
  } joinOrDetach{guest, done};
  REQUIRE(eventually([&] { return onPool.load(); }));
  pool.shutdown();
  CHECK_FALSE(pool.awaitTermination(50ms));  // the guest's sleep still holds it
  // The sleep may register just after onPool: advance until it has fired.
  REQUIRE(eventually([&] {
    clock.advance(1h);
    return done.load();
  }));
  CHECK(result == 7);
  CHECK(pool.awaitTermination(coexec::test::kLong));
}

TEST_CASE("a coroutine that hopped onto a pool and awaits another pool's task resumes on a live pool",
          "[resumeOn][shutdown][reliability]") {
  // Without the hold, close() returned while the guest waited, and the
  // other pool's task then posted the guest back to a destroyed pool.
  Gate gate;
  ThreadPoolExecutor other({.name = "other", .corePoolSize = 1, .maximumPoolSize = 1});
  OpenOnExit release(gate);
  Future<int> future = other.submit([&gate] {
    gate.wait();
    return 41;
  });
  auto host = std::make_unique<ThreadPoolExecutor>(coexec::ThreadPoolOptions{.name = "host", .corePoolSize = 1, .maximumPoolSize = 1});
  std::atomic<bool> onPool{false};
  int result = 0;
  std::thread guest([&] { result = syncWait(guestAwaiting(*host, future, onPool)); });
  REQUIRE(eventually([&] { return onPool.load(); }));
  host->shutdown();
  CHECK_FALSE(host->awaitTermination(50ms));  // held by the guest's await
  gate.open();
  REQUIRE(host->awaitTermination(coexec::test::kLong));
  host.reset();
  guest.join();
  CHECK(result == 42);
}
