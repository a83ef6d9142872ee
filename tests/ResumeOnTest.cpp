#include "coexec/ResumeOn.h"

// co_await resumeOn(pool): from outside the pool the hop is new work that goes
// through admission (abort and discard make the co_await throw
// RejectedExecution and the coroutine goes on where it was; callerRuns goes
// on in the caller; a hop dropped after shutdownNow throws BrokenPromise);
// from inside the pool it is a yield that is never rejected.

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "CoroutineTestSupport.h"
#include "coexec/SyncWait.h"
#include "coexec/ThreadPoolExecutor.h"

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

namespace {

/// Hops to `pool` and reports what happened: "hopped to <tag>", "rejected at
/// home", "rejected elsewhere", or "ran at home" (callerRuns).
Task<std::string> tryHop(ThreadPoolExecutor& pool, std::thread::id home) {
  try {
    co_await resumeOn(pool);
  } catch (const RejectedExecution&) {
    co_return std::this_thread::get_id() == home ? "rejected at home" : "rejected elsewhere";
  }
  if (std::this_thread::get_id() == home) co_return "ran at home";
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

TEST_CASE("resumeOn from outside the pool continues on a thread of that pool", "[resumeon]") {
  ThreadPoolExecutor pool(taggedPool("ro", 1, 1, WorkQueue::bounded(4)));
  CHECK(syncWait(tryHop(pool, std::this_thread::get_id())) == "hopped to ro");
}

TEST_CASE("resumeOn between two pools runs the coroutine on each in turn", "[resumeon][affinity]") {
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

TEST_CASE("resumeOn from a coroutine already on the pool is a yield that is never rejected", "[resumeon][admission]") {
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
          "[resumeon][rejection]") {
  SaturatedPool s(RejectionPolicy::abort());
  CHECK(syncWait(tryHop(s.pool, std::this_thread::get_id())) == "rejected at home");
  CHECK(s.pool.stats().rejectedCount == 1);
}

TEST_CASE("resumeOn to a saturated pool under discard throws RejectedExecution", "[resumeon][rejection]") {
  SaturatedPool s(RejectionPolicy::discard());
  CHECK(syncWait(tryHop(s.pool, std::this_thread::get_id())) == "rejected at home");
  CHECK(s.pool.stats().rejectedCount == 1);
}

TEST_CASE("resumeOn to a saturated pool under callerRuns goes on in the calling thread", "[resumeon][rejection]") {
  SaturatedPool s(RejectionPolicy::callerRuns());
  CHECK(syncWait(tryHop(s.pool, std::this_thread::get_id())) == "ran at home");
  CHECK(s.pool.stats().rejectedCount == 1);
}

TEST_CASE("resumeOn to a shut-down pool throws RejectedExecution", "[resumeon][rejection][shutdown]") {
  ThreadPoolExecutor pool(taggedPool("down", 1, 1, WorkQueue::bounded(4)));
  pool.shutdown();
  CHECK(syncWait(tryHop(pool, std::this_thread::get_id())) == "rejected at home");
}

TEST_CASE("a resumeOn hop returned by shutdownNow and dropped resumes the coroutine with BrokenPromise",
          "[resumeon][shutdown]") {
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
