// SPDX-License-Identifier: BSL-1.0
// Submitting coroutine tasks to a ThreadPoolExecutor: submit/execute of a Task<R> or of a callable
// returning one, the misuse refused, exceptions, ping-pong, fire-and-forget, blocking waits refused.
#include "coexec/ThreadPoolExecutor.h"

// Coroutine tasks on a ThreadPoolExecutor: submit/execute of a Task<R> or of
// a callable returning one (an empty or already started Task refused);
// ping-pong through the pool; fire-and-forget failures; blocking waits
// refused on the pool's own threads.
//
// Executor affinity, continuations admitted when the queue is full and after
// shutdown(), stats(), cancellation and callerRuns are in
// CoroutinePoolSuspensionTest.cpp; the captures of a coroutine lambda kept
// alive and released in CoroutinePoolLifetimeTest.cpp.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "CoroutinePoolTestSupport.h"
#include "CoroutineTestSupport.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"

using namespace std::chrono_literals;

using coexec::Future;
using coexec::PoolStats;
using coexec::syncWait;
using coexec::Task;
using coexec::TaskInfo;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::CoroutineError;
using coexec::test::Counter;
using coexec::test::currentTag;
using coexec::test::eventually;
using coexec::test::finalStats;
using coexec::test::Gate;
using coexec::test::OpenOnExit;
using coexec::test::taggedPool;
using coexec::test::throwsA;

namespace {

Task<int> pong(int ball) { co_return ball + 1; }

/// Sends the ball through the pool `rounds` times: each round submits a pong
/// coroutine and awaits it.
Task<int> ping(ThreadPoolExecutor& pool, int rounds) {
  int ball = 0;
  for (int i = 0; i < rounds; ++i) {
    Future<int> returned = pool.submit(pong(ball));
    ball = co_await returned;
  }
  co_return ball;
}

Task<void> failingTask(std::string message) {
  throw CoroutineError(message);
  co_return;  // unreachable; makes this a coroutine
}

}  // namespace

// ---- submit and execute of coroutines ------------------------------------------

TEST_CASE("submit of a callable returning Task<R> runs the coroutine on the pool", "[coroutine][submit]") {
  ThreadPoolExecutor pool(taggedPool("cs", 1, 1, WorkQueue::bounded(8)));
  Future<std::string> tag = pool.submit([]() -> Task<std::string> { co_return std::string(currentTag); });
  CHECK(tag.get() == "cs");

  bool ran = false;  // written on the pool; read after the Future settles
  Future<void> done = pool.submit([&ran]() -> Task<void> {
    ran = currentTag == "cs";
    co_return;
  });
  done.get();
  CHECK(ran);

  int target = 0;
  Future<int&> reference = pool.submit([&target]() -> Task<int&> { co_return target; });
  CHECK(&reference.get() == &target);
}

TEST_CASE("submit of a Task<R> runs it on the pool", "[coroutine][submit]") {
  ThreadPoolExecutor pool(taggedPool("ts", 1, 1, WorkQueue::bounded(8)));
  Future<int> value = pool.submit(pong(41));
  CHECK(value.get() == 42);
  auto where = []() -> Task<std::string> { co_return std::string(currentTag); };
  Task<std::string> task = where();
  Future<std::string> tag = pool.submit(std::move(task));
  CHECK(tag.get() == "ts");
}

TEST_CASE("submit of an empty Task is refused with std::invalid_argument", "[coroutine][submit]") {
  ThreadPoolExecutor pool(taggedPool("empty", 1, 1, WorkQueue::bounded(8)));
  CHECK_THROWS_AS((void)pool.submit(Task<int>()), std::invalid_argument);
  CHECK(pool.stats().taskCount == 0);
}

namespace {

/// A Task<int> that has run to the end: co_awaited once through `task`.
void awaitOnce(Task<int>& task) {
  auto awaitIt = [](Task<int>& t) -> Task<int> { co_return co_await t; };
  REQUIRE(syncWait(awaitIt(task)) == 2);
  REQUIRE(task.valid());
}

}  // namespace

/// The message of the std::logic_error `f` throws; fails the test if it throws
/// nothing or something else.
template <class F>
std::string logicErrorOf(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const std::logic_error& e) {
    return e.what();
  } catch (...) {
    FAIL("threw something other than a std::logic_error");
  }
  FAIL("threw nothing");
  return {};
}

TEST_CASE("a Task that was already awaited is refused with std::logic_error by every way of starting it",
          "[coroutine][submit]") {
  ThreadPoolExecutor pool(taggedPool("used", 1, 1, WorkQueue::bounded(8)));
  Task<int> task = pong(1);
  awaitOnce(task);
  std::string message;
  bool keptByCaller = true;  // refused before the pool took it
  SECTION("submit") {
    message = logicErrorOf([&] { (void)pool.submit(std::move(task)); });
    CHECK_THAT(message, Catch::Matchers::StartsWith("coexec::ThreadPoolExecutor::submit: "));
  }
  SECTION("execute") {
    message = logicErrorOf([&] { pool.execute(std::move(task)); });
    CHECK_THAT(message, Catch::Matchers::StartsWith("coexec::ThreadPoolExecutor::execute: "));
  }
  SECTION("tryExecute") {
    message = logicErrorOf([&] { (void)pool.tryExecute(std::move(task)); });
    CHECK_THAT(message, Catch::Matchers::StartsWith("coexec::ThreadPoolExecutor::tryExecute: "));
  }
  SECTION("co_await") {
    auto awaitAgain = [](Task<int>& t) -> Task<int> { co_return co_await t; };
    message = logicErrorOf([&] { (void)syncWait(awaitAgain(task)); });
    CHECK_THAT(message, Catch::Matchers::StartsWith("coexec::Task::operator co_await: "));
  }
  SECTION("syncWait") {
    message = logicErrorOf([&] { (void)syncWait(std::move(task)); });
    CHECK_THAT(message, Catch::Matchers::StartsWith("coexec::syncWait: "));
    keptByCaller = false;  // syncWait's parameter took it
  }
  // One check for all of them: the same sentence after the caller's name.
  CHECK_THAT(message, Catch::Matchers::Contains(": the Task was already started (co_awaited, run by syncWait or "
                                                "submitted to a pool); a Task runs once"));
  CHECK_THAT(message, Catch::Matchers::EndsWith("."));
  CHECK(task.valid() == keptByCaller);  // NOLINT(bugprone-use-after-move): refused before the pool took it
  const PoolStats stats = pool.stats();
  CHECK(stats.taskCount == 0);
  CHECK(stats.rejectedCount == 0);
}

TEST_CASE("submit of a moved-from Task throws std::logic_error naming the misuse", "[coroutine][submit]") {
  ThreadPoolExecutor pool(taggedPool("moved", 1, 1, WorkQueue::bounded(8)));
  Task<int> task = pong(1);
  const int ran = syncWait(std::move(task));
  CHECK(ran == 2);
  // NOLINTNEXTLINE(bugprone-use-after-move): the misuse under test
  const std::string message = logicErrorOf([&] { (void)pool.submit(std::move(task)); });
  CHECK_THAT(message, Catch::Matchers::StartsWith("coexec::ThreadPoolExecutor::submit: the Task is empty"));
  CHECK(pool.stats().taskCount == 0);
}

TEST_CASE("a callable returning a Task that was already awaited fails its Future with std::logic_error",
          "[coroutine][submit]") {
  ThreadPoolExecutor pool(taggedPool("usedc", 1, 1, WorkQueue::bounded(8)));
  Task<int> task = pong(1);
  awaitOnce(task);
  Future<int> result = pool.submit([&task] { return std::move(task); });
  const std::string message = logicErrorOf([&] { (void)result.get(); });
  CHECK_THAT(message, Catch::Matchers::Contains("the Task was already started"));
  CHECK(finalStats(pool).failedCount == 1);
}

TEST_CASE("a callable returning an empty Task fails its Future with std::invalid_argument",
          "[coroutine][submit][bad-input]") {
  ThreadPoolExecutor pool(taggedPool("emptyc", 1, 1, WorkQueue::bounded(8)));
  Future<int> result = pool.submit([] { return Task<int>(); });
  const std::string message = logicErrorOf([&] { (void)result.get(); });
  CHECK(message ==
        "coexec::ThreadPoolExecutor::submit: the Task is empty (default-constructed or moved from), so there is no "
        "coroutine to start.");
  CHECK(throwsA<std::invalid_argument>([&] {
    Future<int> again = pool.submit([] { return Task<int>(); });
    (void)again.get();
  }));
  CHECK(finalStats(pool).failedCount == 2);
}

TEST_CASE("a submitted coroutine's exception reaches its Future, awaited or waited on", "[coroutine][exceptions]") {
  ThreadPoolExecutor pool(taggedPool("cx", 1, 1, WorkQueue::bounded(8)));
  Future<void> waited = pool.submit(failingTask("waited"));
  CHECK_THROWS_MATCHES(waited.get(), CoroutineError, Catch::Matchers::Message("waited"));
  auto awaitIt = [](ThreadPoolExecutor& p) -> Task<std::string> {
    Future<void> failed = p.submit(failingTask("awaited"));
    try {
      co_await failed;
    } catch (const CoroutineError& e) {
      co_return e.what();
    }
    co_return "no exception";
  };
  CHECK(syncWait(awaitIt(pool)) == "awaited");
  CHECK(finalStats(pool).failedCount == 2);
}

TEST_CASE("ping-pong of two coroutines through the pool 100,000 times", "[coroutine][pingpong]") {
  const std::size_t threads = GENERATE(1, 2);
  CAPTURE(threads);
  constexpr int kRounds = 100'000;
  ThreadPoolExecutor pool(taggedPool("pp", threads, threads, WorkQueue::bounded(16)));
  Future<int> result = pool.submit(ping(pool, kRounds));
  CHECK(result.get() == kRounds);
  const PoolStats stats = finalStats(pool);
  CHECK(stats.taskCount == kRounds + 1);
  CHECK(stats.completedTaskCount == kRounds + 1);
  CHECK(stats.rejectedCount == 0);
}

// ---- fire and forget ----------------------------------------------------------------

TEST_CASE("a fire-and-forget coroutine's exception reaches the uncaught handler exactly once",
          "[coroutine][execute][exceptions]") {
  std::mutex mutex;
  std::vector<std::string> reported;  // guarded by mutex
  Counter handled;
  Gate gate;
  ThreadPoolExecutor other(taggedPool("oth", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolOptions options = taggedPool("ff", 1, 1, WorkQueue::bounded(8));
  options.uncaughtExceptionHandler = [&](std::exception_ptr error, const TaskInfo&) {
    try {
      std::rethrow_exception(error);
    } catch (const CoroutineError& e) {
      std::lock_guard lock(mutex);
      reported.emplace_back(e.what());
    } catch (...) {
      std::lock_guard lock(mutex);
      reported.emplace_back("unexpected exception type");
    }
    handled.arrive();
  };
  ThreadPoolExecutor pool(options);
  OpenOnExit release(gate);

  pool.execute([]() -> Task<void> {
    throw CoroutineError("before suspending");
    co_return;
  });
  pool.execute(failingTask("a Task<void> itself"));
  pool.execute([&other, &gate]() -> Task<void> {
    Future<void> elsewhere = other.submit([&gate] { gate.wait(); });
    co_await elsewhere;
    throw CoroutineError("after resuming");
  });
  REQUIRE(handled.waitFor(2));
  gate.open();
  REQUIRE(handled.waitFor(3));
  const PoolStats stats = finalStats(pool);
  CHECK(handled.count() == 3);
  std::lock_guard lock(mutex);
  std::sort(reported.begin(), reported.end());
  CHECK(reported == std::vector<std::string>{"a Task<void> itself", "after resuming", "before suspending"});
  CHECK(stats.failedCount == 3);
  CHECK(stats.taskCount == 3);
}

// ---- blocking from inside the pool ---------------------------------------------------

TEST_CASE("Future::get and wait on a pool thread for an unfinished task of the same pool throw std::logic_error",
          "[coroutine][blocking]") {
  ThreadPoolExecutor pool(taggedPool("blk", 1, 1, WorkQueue::bounded(4)));
  struct Refusals {
    bool get = false;
    bool wait = false;
    bool namesPool = false;
  };
  auto probe = [&pool] {
    Refusals r;
    Future<int> queued = pool.submit([] { return 1; });  // queued behind the caller: waiting would deadlock
    r.get = throwsA<std::logic_error>([&] { (void)queued.get(); });
    r.wait = throwsA<std::logic_error>([&] { queued.wait(); });
    try {
      queued.wait();
    } catch (const std::logic_error& e) {
      r.namesPool = std::string(e.what()).find("pool 'blk'") != std::string::npos;
    }
    return r;
  };
  SECTION("from a plain task") {
    const Refusals r = pool.submit(probe).get();
    CHECK(r.get);
    CHECK(r.wait);
    CHECK(r.namesPool);
  }
  SECTION("from a coroutine task") {
    const Refusals r = pool.submit([&probe]() -> Task<Refusals> { co_return probe(); }).get();
    CHECK(r.get);
    CHECK(r.wait);
    CHECK(r.namesPool);
  }
}

TEST_CASE("Future::get on a pool thread is allowed for another pool's task and for a finished task",
          "[coroutine][blocking]") {
  ThreadPoolExecutor pool(taggedPool("ok", 2, 2, WorkQueue::bounded(4)));
  ThreadPoolExecutor other(taggedPool("ot", 1, 1, WorkQueue::bounded(4)));
  Future<int> result = pool.submit([&pool, &other] {
    const int fromOther = other.submit([] { return 10; }).get();
    Future<int> sibling = pool.submit([] { return 1; });  // runs on the second thread
    if (!eventually([&sibling] { return sibling.isDone(); })) return -1;
    return fromOther + sibling.get();
  });
  CHECK(result.get() == 11);
}

TEST_CASE("awaitTermination and close on a pool thread throw std::logic_error", "[coroutine][blocking]") {
  ThreadPoolExecutor pool(taggedPool("at", 1, 1, WorkQueue::bounded(4)));
  Future<bool> awaitRefused =
      pool.submit([&pool] { return throwsA<std::logic_error>([&pool] { (void)pool.awaitTermination(1ms); }); });
  CHECK(awaitRefused.get());
  Future<bool> closeRefused =
      pool.submit([&pool]() -> Task<bool> { co_return throwsA<std::logic_error>([&pool] { pool.close(); }); });
  CHECK(closeRefused.get());
  CHECK_FALSE(pool.isShutdown());
}
