// SPDX-License-Identifier: BSL-1.0
#include "coexec/TaskGroup.h"

// TaskGroup: spawn() -> Future, co_await join(); the first failure cancels
// the other children and join() rethrows it; OperationCancelled is not a
// failure; a stopped group starts nothing; the awaiting task's cancellation
// flows into the children; a group destroyed with children running and
// without join() cancels them, blocks until they settle and reports the
// misuse to the pool's uncaught-exception handler; composition with
// invokeAll.

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "CombinatorTestSupport.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/InvokeAll.h"
#include "coexec/PendingTask.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using coexec::BrokenPromise;
using coexec::CancellationToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::PendingTask;
using coexec::RejectedExecution;
using coexec::syncWait;
using coexec::Task;
using coexec::TaskGroup;
using coexec::TaskInfo;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::Children;
using coexec::test::Counter;
using coexec::test::currentTag;
using coexec::test::Gate;
using coexec::test::kLong;
using coexec::test::messageOf;
using coexec::test::OpenOnExit;
using coexec::test::taggedPool;
using coexec::test::throwsA;

namespace {

Task<int> triple(int v) { co_return 3 * v; }

/// What a pool's uncaught-exception handler received.
struct Reports {
  std::mutex mutex;
  std::vector<std::string> messages;
  Counter count;
  void add(const std::exception_ptr& error) {
    {
      std::lock_guard lock(mutex);
      messages.push_back(messageOf(error));
    }
    count.arrive();
  }
  std::vector<std::string> all() {
    std::lock_guard lock(mutex);
    return messages;
  }
};

ThreadPoolOptions reportingPool(Reports& reports, std::size_t threads = 2) {
  ThreadPoolOptions options = taggedPool("group", threads, threads, WorkQueue::bounded(64));
  options.uncaughtExceptionHandler = [&reports](std::exception_ptr error, const TaskInfo&) { reports.add(error); };
  return options;
}

}  // namespace

TEST_CASE("join waits for every child, the Futures spawn returned have all settled", "[taskGroup]") {
  ThreadPoolExecutor pool(taggedPool("group", 2, 2, WorkQueue::bounded(64)));
  const auto run = [&]() -> Task<int> {
    TaskGroup group(pool);
    std::vector<Future<int>> futures;
    for (int i = 0; i < 10; ++i)
      futures.push_back(group.spawn([i] { return i; }));
    futures.push_back(group.spawn(triple(5)));                              // a Task
    futures.push_back(group.spawn([] { return triple(7); }));               // a callable returning a Task
    futures.push_back(group.spawn([](CancellationToken) { return 100; }));  // a callable taking a token
    co_await group.join();
    int sum = 0;
    for (Future<int>& f : futures) {
      if (!f.isDone()) co_return -1;
      sum += f.get();
    }
    co_return sum;
  };
  CHECK(syncWait(run()) == 45 + 15 + 21 + 100);
}

TEST_CASE("the first failure cancels the other children and join rethrows it once they have settled",
          "[taskGroup][failure]") {
  Children children;
  std::atomic<int> refusedRan{0};
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("group", 3, 3, WorkQueue::bounded(64)));
  OpenOnExit guard(children.release);
  std::atomic<bool> lateCancelled{false};
  Future<std::string> outer = driver.submit([&]() -> Task<std::string> {
    TaskGroup group(pool);
    Future<int> a = group.spawn(children.cooperative());
    Future<int> b = group.spawn(children.cooperative());
    Future<int> failing = group.spawn([&children]() -> int {
      if (!children.started.waitFor(2)) throw std::logic_error("the others did not start");
      throw std::runtime_error("child failed");
    });
    try {
      co_await group.join();
    } catch (const std::runtime_error& e) {
      // Stopped: a new child starts nothing.
      Future<int> late = group.spawn([&refusedRan] { return refusedRan.fetch_add(1); });
      lateCancelled = late.isDone() && late.isCancelled();
      co_return std::string(e.what());
    }
    co_return std::string("no failure");
  });
  REQUIRE(children.cancelled.waitFor(2));
  CHECK_FALSE(outer.isDone());  // join waits for the cancelled children
  children.release.open();
  CHECK(outer.get() == "child failed");
  CHECK(children.returned.count() == 2);
  CHECK(lateCancelled.load());
  CHECK(refusedRan.load() == 0);
}

TEST_CASE("a child ending with OperationCancelled is not a failure of the group", "[taskGroup][cancel]") {
  Children children;
  ThreadPoolExecutor pool(taggedPool("group", 2, 2, WorkQueue::bounded(64)));
  OpenOnExit guard(children.release);
  const auto run = [&]() -> Task<int> {
    TaskGroup group(pool);
    Future<int> cancelled = group.spawn(children.cooperative());
    Future<int> fine = group.spawn([] { return 5; });
    if (!children.started.waitFor(1)) co_return -1;
    cancelled.cancel();  // settles it at once; the child sees its token cancelled
    if (!cancelled.isDone()) co_return -2;
    children.release.open();
    co_await group.join();  // returns: a cancellation is not a failure
    co_return fine.get();
  };
  CHECK(syncWait(run()) == 5);
  CHECK(children.cancelled.count() == 1);
  CHECK(children.returned.count() == 1);
}

TEST_CASE("cancel() cancels every child and refuses new ones, join then returns normally", "[taskGroup][cancel]") {
  Children children;
  ThreadPoolExecutor pool(taggedPool("group", 2, 2, WorkQueue::bounded(64)));
  OpenOnExit guard(children.release);
  const auto run = [&]() -> Task<bool> {
    TaskGroup group(pool);
    Future<int> a = group.spawn(children.cooperative());
    Future<int> b = group.spawn(children.cooperative());
    if (!children.started.waitFor(2)) co_return false;
    group.cancel();
    children.release.open();
    co_await group.join();
    Future<int> late = group.spawn([] { return 1; });
    co_return group.running() == 0 && late.isCancelled() && throwsA<OperationCancelled>([&] { (void)a.get(); });
  };
  CHECK(syncWait(run()));
  CHECK(children.cancelled.count() == 2);
}

TEST_CASE(
    "cancelling the joining coroutine's task cancels the children, join throws OperationCancelled once they "
    "have settled",
    "[taskGroup][cancel]") {
  Children children;
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("group", 2, 2, WorkQueue::bounded(64)));
  OpenOnExit guard(children.release);
  std::atomic<bool> reachedEnd{false};
  Future<void> outer = driver.submit([&]() -> Task<void> {
    TaskGroup group(pool);
    (void)group.spawn(children.cooperative());
    (void)group.spawn(children.cooperative());
    co_await group.join();
    reachedEnd = true;
  });
  REQUIRE(children.started.waitFor(2));
  // The cancel must reach the coroutine parked in join(): until then it is
  // the driver's active task (a join that finds the group idle, its children
  // cancelled through their link to the task, returns as any await that need
  // not suspend does; a loaded machine can keep the driver from reaching it).
  REQUIRE(coexec::test::eventually([&] { return driver.stats().activeCount == 0; }));
  CHECK(outer.cancel());
  REQUIRE(children.cancelled.waitFor(2));
  CHECK_FALSE(outer.isDone());
  children.release.open();
  CHECK(throwsA<OperationCancelled>([&] { outer.get(); }));
  CHECK_FALSE(reachedEnd.load());
}

TEST_CASE("children spawned from a running task are cancelled with it before it reaches join()",
          "[taskGroup][cancel]") {
  // spawn() links each child to the running task, as submit() does: the
  // cancellation reaches them while the task still runs (here it blocks on
  // a gate before its join()), not only once it awaits join().
  Children children;
  Gate beforeJoin;
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("group", 2, 2, WorkQueue::bounded(64)));
  OpenOnExit guard(children.release);
  OpenOnExit guardJoin(beforeJoin);
  Future<void> outer = driver.submit([&]() -> Task<void> {
    TaskGroup group(pool);
    (void)group.spawn(children.cooperative());
    (void)group.spawn(children.cooperative());
    beforeJoin.wait();  // still running: no join() yet
    co_await group.join();
  });
  REQUIRE(children.started.waitFor(2));
  CHECK(outer.cancel());
  REQUIRE(children.cancelled.waitFor(2));  // while the task is held before its join()
  CHECK_FALSE(outer.isDone());
  children.release.open();
  beforeJoin.open();
  CHECK(throwsA<OperationCancelled>([&] { outer.get(); }));  // cancelled while it ran
}

TEST_CASE(
    "a group destroyed with children running and without join cancels them, blocks until they settle and "
    "reports the misuse",
    "[taskGroup][misuse]") {
  Children children;
  Reports reports;
  ThreadPoolExecutor pool(reportingPool(reports));
  OpenOnExit guard(children.release);
  std::atomic<bool> destroyed{false};
  std::thread owner([&] {
    {
      TaskGroup group(pool);
      (void)group.spawn(children.cooperative());
      (void)group.spawn(children.cooperative());
      if (!children.started.waitFor(2)) return;
    }  // the misuse: no join()
    destroyed = true;
  });
  REQUIRE(children.cancelled.waitFor(2));  // the destructor cancelled them...
  CHECK_FALSE(destroyed.load());           // ...and waits for them
  children.release.open();
  owner.join();
  CHECK(destroyed.load());
  CHECK(children.returned.count() == 2);
  REQUIRE(reports.count.waitFor(1));
  const std::vector<std::string> messages = reports.all();
  REQUIRE(messages.size() == 1);
  CHECK(messages[0].find("destroyed while 2 of its children were still running, without join()") != std::string::npos);
}

TEST_CASE("a failure that no join rethrew is reported when the group is destroyed", "[taskGroup][misuse]") {
  Reports reports;
  ThreadPoolExecutor pool(reportingPool(reports));
  {
    TaskGroup group(pool);
    Future<int> f = group.spawn([]() -> int { throw std::runtime_error("nobody joined"); });
    f.wait();
    REQUIRE(coexec::test::eventually([&] { return group.running() == 0; }));
  }
  REQUIRE(reports.count.waitFor(1));
  CHECK(reports.all() == std::vector<std::string>{"nobody joined"});
}

TEST_CASE("a child dropped unrun after shutdownNow fails the group but is not reported when the group is destroyed",
          "[taskGroup][shutdown][reliability]") {
  // Caught by the model-based stress driver (the uncaught handler got a
  // BrokenPromise): the first failure of a group whose join() threw
  // OperationCancelled was a child that shutdownNow() had drained and the
  // caller dropped, and the group's destructor reported it as an unread
  // failure, which a refusal never is (reportUnobservedFailures). Here
  // nobody joins, so any failure is unread.
  Reports reports;
  Gate busy;
  ThreadPoolExecutor pool(reportingPool(reports, 1));
  OpenOnExit guard(busy);
  Counter blocking;
  pool.execute([&] {
    blocking.arrive();
    busy.wait();
  });
  REQUIRE(blocking.waitFor(1));  // the only thread is taken: the child stays queued
  {
    TaskGroup group(pool);
    Future<int> child = group.spawn([] { return 1; });
    std::vector<PendingTask> drained = pool.shutdownNow();
    REQUIRE(drained.size() == 1);
    drained.clear();  // dropped unrun
    CHECK(throwsA<BrokenPromise>([&] { (void)child.get(); }));
    CHECK(group.running() == 0);
  }  // no join(): every child has settled, the group's failure is the refusal
  busy.open();
  REQUIRE(pool.awaitTermination(kLong));
  CHECK(reports.all().empty());
}

TEST_CASE("children may spawn siblings, join waits for them all", "[taskGroup]") {
  std::atomic<int> ran{0};
  ThreadPoolExecutor pool(taggedPool("group", 2, 2, WorkQueue::bounded(256)));
  const auto run = [&]() -> Task<int> {
    TaskGroup group(pool);
    for (int i = 0; i < 4; ++i) {
      (void)group.spawn([&group, &ran] {
        ran.fetch_add(1);
        for (int j = 0; j < 4; ++j)
          (void)group.spawn([&ran] { ran.fetch_add(1); });
      });
    }
    co_await group.join();
    co_return ran.load();
  };
  CHECK(syncWait(run()) == 4 + 16);
}

TEST_CASE("spawn after shutdown throws RejectedExecution and leaves the group as it was", "[taskGroup][shutdown]") {
  std::atomic<int> ran{0};
  ThreadPoolExecutor pool(taggedPool("group", 1, 1, WorkQueue::bounded(8), coexec::RejectionPolicy::discard()));
  const auto run = [&]() -> Task<bool> {
    TaskGroup group(pool);
    Future<int> before = group.spawn([] { return 1; });
    co_await group.join();
    pool.shutdown();
    const bool refused = throwsA<RejectedExecution>([&] { (void)group.spawn([&ran] { return ran.fetch_add(1); }); });
    co_await group.join();  // nothing to wait for, no failure
    co_return refused&& before.get() == 1;
  };
  CHECK(syncWait(run()));
  CHECK(ran.load() == 0);
  CHECK(pool.stats().rejectedCount == 1);  // the refused child counts, whatever the policy
}

TEST_CASE("a TaskGroup inside an invokeAll child", "[taskGroup][compose]") {
  ThreadPoolExecutor pool(taggedPool("group", 2, 2, WorkQueue::bounded(256)));
  std::vector<std::function<Task<int>()>> tasks;
  for (int i = 1; i <= 3; ++i) {
    tasks.push_back([&pool, i]() -> Task<int> {
      TaskGroup group(pool);
      Future<int> a = group.spawn([i] { return i; });
      Future<int> b = group.spawn([i] { return 10 * i; });
      co_await group.join();
      co_return a.get() + b.get();  // settled: get() on a pool thread does not wait
    });
  }
  const auto run = [&]() -> Task<std::vector<int>> { co_return co_await pool.invokeAll(tasks); };
  CHECK(syncWait(run()) == std::vector<int>{11, 22, 33});
}

TEST_CASE("join resumes the coroutine on the executor it was running on", "[taskGroup]") {
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("group", 2, 2, WorkQueue::bounded(64)));
  Future<std::string> where = driver.submit([&]() -> Task<std::string> {
    TaskGroup group(pool);
    (void)group.spawn([] { return 1; });
    co_await group.join();
    co_return std::string(currentTag);
  });
  CHECK(where.get() == "driver");
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE(
    "spawn of an empty callable or Task throws invalid_argument naming TaskGroup::spawn, not "
    "ThreadPoolExecutor::TaskGroup::spawn, and the group is unchanged",
    "[taskGroup][bad-input]") {
  ThreadPoolExecutor pool(taggedPool("group", 1, 1, WorkQueue::bounded(8)));
  TaskGroup group(pool);
  const std::function<int()> empty;
  CHECK_THROWS_AS((void)group.spawn(empty), std::invalid_argument);
  CHECK_THROWS_WITH((void)group.spawn(empty),
                    "coexec::TaskGroup::spawn: the task is empty (an empty std::function or a null pointer)");
  CHECK_THROWS_AS((void)group.spawn(Task<int>()), std::invalid_argument);
  CHECK_THROWS_WITH((void)group.spawn(Task<int>()), Catch::Contains("coexec::TaskGroup::spawn: the Task is empty"));
  CHECK(group.running() == 0);
  CHECK(pool.stats().taskCount == 0);
  const auto run = [&]() -> Task<int> {
    Future<int> after = group.spawn([] { return 7; });  // the group goes on as if nothing happened
    co_await group.join();
    co_return after.get();
  };
  CHECK(syncWait(run()) == 7);
}

TEST_CASE(
    "spawn of a Task that was already started throws std::logic_error naming TaskGroup::spawn, and the group is "
    "unchanged",
    "[taskGroup][bad-input]") {
  ThreadPoolExecutor pool(taggedPool("group", 1, 1, WorkQueue::bounded(8)));
  TaskGroup group(pool);
  Task<int> task = triple(2);
  CHECK(syncWait([&]() -> Task<int> { co_return co_await task; }()) == 6);
  CHECK_THROWS_AS((void)group.spawn(std::move(task)), std::logic_error);
  Task<int> again = triple(2);
  (void)syncWait([&]() -> Task<int> { co_return co_await again; }());
  CHECK_THROWS_WITH((void)group.spawn(std::move(again)),
                    Catch::Contains("coexec::TaskGroup::spawn: the Task was already started"));
  CHECK(group.running() == 0);
  CHECK(pool.stats().taskCount == 0);
}

TEST_CASE("a second coroutine joining while another one is parked in join() gets std::logic_error",
          "[taskGroup][bad-input][misuse]") {
  Children children;
  ThreadPoolExecutor driver(taggedPool("driver", 1, 1, WorkQueue::bounded(8)));
  ThreadPoolExecutor pool(taggedPool("group", 1, 1, WorkQueue::bounded(8)));
  OpenOnExit guard(children.release);
  TaskGroup group(pool);
  Future<int> child = group.spawn(children.uncooperative(5));
  REQUIRE(children.started.waitFor(1));
  Future<void> first = driver.submit([&]() -> Task<void> { co_await group.join(); });
  // Parked: the driver's only thread is no longer busy with it.
  REQUIRE(coexec::test::eventually([&] { return driver.stats().activeCount == 0; }));
  REQUIRE_FALSE(first.isDone());
  const std::string message = syncWait([&]() -> Task<std::string> {
    try {
      co_await group.join();
    } catch (const std::logic_error& e) {
      co_return e.what();
    }
    co_return "no exception";
  }());
  CHECK(message == "coexec::TaskGroup::join: another coroutine is already joining this group (one join at a time)");
  CHECK_FALSE(first.isDone());  // the first joiner still waits for the child
  children.release.open();
  first.get();
  CHECK(child.get() == 5);
}
