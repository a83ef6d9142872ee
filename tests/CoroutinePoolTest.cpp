#include "coexec/ThreadPoolExecutor.h"

// Coroutine tasks on a ThreadPoolExecutor: submit/execute of a Task<R> or of
// a callable returning one; ping-pong through the pool; executor affinity
// (resume on the pool the coroutine ran on, inline when the completing thread
// belongs to it); fire-and-forget failures; continuations admitted when the
// queue is full and after shutdown(); blocking waits refused on the pool's own
// threads; stats(); and the captures of a coroutine lambda kept alive.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "CoroutineTestSupport.h"
#include "coexec/CancellationToken.h"
#include "coexec/ResumeOn.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"

using namespace std::chrono_literals;

using coexec::CancellationRegistration;
using coexec::CancellationToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::PendingTask;
using coexec::PoolStats;
using coexec::RejectedExecution;
using coexec::RejectionPolicy;
using coexec::resumeOn;
using coexec::syncWait;
using coexec::Task;
using coexec::TaskInfo;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::checkLedgerAddsUp;
using coexec::test::Counter;
using coexec::test::currentTag;
using coexec::test::eventually;
using coexec::test::executeBlocked;
using coexec::test::Gate;
using coexec::test::holdsA;
using coexec::test::kLong;
using coexec::test::Lifetimes;
using coexec::test::OpenOnExit;
using coexec::test::releaseSignal;
using coexec::test::taggedPool;
using coexec::test::throwsA;
using coexec::test::Tracker;

namespace {

struct CoroutineError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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

/// Blocks until a coroutine task of the one-thread `pool` has suspended. The
/// coroutine arrives at `reached` right before its co_await on work that
/// cannot be done yet; a probe task submitted after that can run on the
/// pool's only thread only once the coroutine has given the thread back.
/// The probe counts as a task of `pool`.
void requireSuspended(ThreadPoolExecutor& pool, Counter& reached) {
  REQUIRE(pool.maximumPoolSize() == 1);
  REQUIRE(reached.waitFor(1));
  Future<void> probe = pool.submit([] {});
  REQUIRE(probe.waitFor(kLong));
}

/// A shut-down pool that keeps every task submitted to it: its rejection
/// policy stores the PendingTask, for the test to run on a thread it chooses.
class Keeper {
 public:
  Keeper() : pool_(options(*this)) { pool_.shutdown(); }
  Keeper(const Keeper&) = delete;
  Keeper& operator=(const Keeper&) = delete;

  ThreadPoolExecutor& pool() { return pool_; }
  /// The task the last submission left.
  PendingTask take() {
    std::lock_guard lock(mutex_);
    REQUIRE_FALSE(tasks_.empty());
    PendingTask task = std::move(tasks_.back());
    tasks_.pop_back();
    return task;
  }

 private:
  static ThreadPoolOptions options(Keeper& self) {
    ThreadPoolOptions o;
    o.name = "keeper";
    // On the submitting thread, which may be a pool thread: under the mutex.
    o.rejectionPolicy = [&self](PendingTask& task, ThreadPoolExecutor&) {
      std::lock_guard lock(self.mutex_);
      self.tasks_.push_back(std::move(task));
    };
    return o;
  }

  std::mutex mutex_;
  std::vector<PendingTask> tasks_;  // guarded by mutex_
  ThreadPoolExecutor pool_;         // last: its policy uses the members above
};

/// Terminates `pool` and returns its final stats.
PoolStats finalStats(ThreadPoolExecutor& pool) {
  pool.shutdown();
  REQUIRE(pool.awaitTermination(kLong));
  return pool.stats();
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

/// A Task<int> that has run to the end: co_awaited once through `task`.
void awaitOnce(Task<int>& task) {
  auto awaitIt = [](Task<int>& t) -> Task<int> { co_return co_await t; };
  REQUIRE(syncWait(awaitIt(task)) == 2);
  REQUIRE(task.valid());
}

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

// ---- affinity ---------------------------------------------------------------------

TEST_CASE("a coroutine on pool P awaiting a Future that completes on pool Q resumes on a thread of P",
          "[coroutine][affinity]") {
  Gate gate;
  ThreadPoolExecutor p(taggedPool("P", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor q(taggedPool("Q", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit release(gate);
  std::atomic<bool> completedOnQ{false};
  Counter reached;
  Future<std::string> path = p.submit([&q, &gate, &completedOnQ, &reached]() -> Task<std::string> {
    std::string before(currentTag);
    Future<int> fromQ = q.submit([&gate, &completedOnQ] {
      gate.wait();
      completedOnQ = currentTag == "Q";
      return 1;
    });
    reached.arrive();
    const int one = co_await fromQ;
    co_return before + "->" + std::string(currentTag) + (one == 1 ? "" : " (wrong value)");
  });
  requireSuspended(p, reached);  // so the completion on Q must post the resumption to P
  gate.open();
  CHECK(path.get() == "P->P");
  CHECK(completedOnQ.load());
}

TEST_CASE("a coroutine awaiting work that completes on a thread of its own pool resumes there inline",
          "[coroutine][affinity]") {
  // The awaited work is a PendingTask (kept by a shut-down pool) that a task of
  // the coroutine's own pool runs. Inline means the coroutine continues inside
  // that run() call, on its thread, before the task that called run() goes
  // on; a resumption posted to the pool would run after that task.
  Keeper keeper;
  ThreadPoolExecutor pool(taggedPool("in", 1, 1, WorkQueue::bounded(4)));
  Counter reached;
  std::atomic<bool> insideRun{false};
  struct Seen {
    std::thread::id resumedOn;
    bool duringRun = false;
    int value = 0;
  };
  Future<Seen> seen = pool.submit([&keeper, &reached, &insideRun]() -> Task<Seen> {
    Future<int> work = keeper.pool().submit([] { return 1; });
    reached.arrive();
    const int one = co_await work;
    co_return Seen{std::this_thread::get_id(), insideRun.load(), one};
  });
  requireSuspended(pool, reached);
  PendingTask work = keeper.take();
  Future<std::thread::id> runner = pool.submit([&work, &insideRun] {
    insideRun = true;
    work.run();
    insideRun = false;
    return std::this_thread::get_id();
  });
  const std::thread::id runnerThread = runner.get();
  const Seen s = seen.get();
  CHECK(s.value == 1);
  CHECK(s.resumedOn == runnerThread);
  CHECK(s.duringRun);
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

// ---- continuations are admitted work ----------------------------------------------

TEST_CASE("a continuation is admitted while the pool's queue is full", "[coroutine][admission]") {
  Gate remote;
  Gate blocker;
  ThreadPoolExecutor q(taggedPool("rq", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor p(taggedPool("fp", 1, 1, WorkQueue::bounded(1)));
  OpenOnExit releaseRemote(remote);
  OpenOnExit releaseBlocker(blocker);
  Counter reached;
  Future<std::string> coroutine = p.submit([&q, &remote, &reached]() -> Task<std::string> {
    Future<int> later = q.submit([&remote] {
      remote.wait();
      return 5;
    });
    reached.arrive();
    const int five = co_await later;
    co_return std::string(currentTag) + " " + std::to_string(five);
  });
  REQUIRE(reached.waitFor(1));
  // Saturate P: its only thread blocked (which it can be only once the
  // coroutine has suspended and given it back), its queue full.
  Counter started;
  p.execute([&] {
    started.arrive();
    blocker.wait();
  });
  REQUIRE(started.waitFor(1));
  p.execute([] {});
  REQUIRE_FALSE(p.tryExecute([] {}));  // a new task would be rejected now
  remote.open();                       // the continuation arrives at the saturated pool
  REQUIRE(eventually([&q] { return q.stats().completedTaskCount == 1; }));
  blocker.open();
  CHECK(coroutine.get() == "fp 5");
  const PoolStats stats = finalStats(p);
  CHECK(stats.rejectedCount == 0);
  CHECK(stats.completedTaskCount == 3);
}

TEST_CASE("a coroutine suspended when the pool shuts down completes, and awaitTermination waits for it",
          "[coroutine][shutdown]") {
  Gate remote;
  ThreadPoolExecutor q(taggedPool("rq", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor p(taggedPool("sd", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit releaseRemote(remote);
  Counter reached;
  Future<std::string> coroutine = p.submit([&q, &remote, &reached]() -> Task<std::string> {
    Future<int> later = q.submit([&remote] {
      remote.wait();
      return 5;
    });
    reached.arrive();
    const int five = co_await later;
    co_return std::string(currentTag) + " " + std::to_string(five);
  });
  requireSuspended(p, reached);
  p.shutdown();
  CHECK(p.isShutdown());
  CHECK_FALSE(p.awaitTermination(0ns));  // a suspended coroutine keeps the pool from terminating
  CHECK_FALSE(p.isTerminated());
  CHECK(throwsA<RejectedExecution>([&p] { p.execute([] {}); }));  // new work is refused
  remote.open();
  REQUIRE(p.awaitTermination(kLong));
  CHECK(coroutine.isDone());
  CHECK(coroutine.get() == "sd 5");
  const PoolStats stats = p.stats();
  CHECK(stats.taskCount == 2);  // the coroutine and requireSuspended's probe
  CHECK(stats.completedTaskCount == 2);
  CHECK(stats.rejectedCount == 1);  // the execute above, not the continuation
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

// ---- stats and lifetimes ---------------------------------------------------------------

TEST_CASE("stats counts a coroutine task once, and a suspended coroutine is not active", "[coroutine][stats]") {
  Gate remote;
  ThreadPoolExecutor q(taggedPool("rq", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor p(taggedPool("st", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit releaseRemote(remote);
  Counter reached;
  Future<int> coroutine = p.submit([&p, &q, &remote, &reached]() -> Task<int> {
    co_await resumeOn(p);  // yields: resumptions, not new tasks
    co_await resumeOn(p);
    Future<int> later = q.submit([&remote] {
      remote.wait();
      return 5;
    });
    reached.arrive();
    const int five = co_await later;
    co_await resumeOn(p);
    co_return five;
  });
  requireSuspended(p, reached);
  // The probe's Future settles before its thread has counted it and left it:
  // wait for that bookkeeping. The coroutine stays suspended meanwhile
  // (`remote` is closed), so it must not count as active.
  CHECK(eventually([&p] {
    const PoolStats s = p.stats();
    return s.completedTaskCount == 1 && s.activeCount == 0;
  }));
  const PoolStats suspended = p.stats();
  CHECK(suspended.taskCount == 2);  // the coroutine and requireSuspended's probe
  CHECK(suspended.activeCount == 0);
  CHECK(suspended.completedTaskCount == 1);  // the probe
  CHECK(suspended.poolSize == 1);
  remote.open();
  CHECK(coroutine.get() == 5);
  const PoolStats done = finalStats(p);
  CHECK(done.taskCount == 2);
  CHECK(done.completedTaskCount == 2);
  CHECK(done.failedCount == 0);
  checkLedgerAddsUp(done);
}

TEST_CASE("the pool keeps a coroutine lambda's captures alive until the coroutine finishes", "[coroutine][lifetime]") {
  Lifetimes lifetimes;
  Gate remote;
  {
    ThreadPoolExecutor q(taggedPool("rq", 1, 1, WorkQueue::bounded(4)));
    ThreadPoolExecutor p(taggedPool("cap", 1, 1, WorkQueue::bounded(4)));
    OpenOnExit releaseRemote(remote);
    const std::string text(200, 'x');  // long: on the heap, so ASan sees a use after free
    Counter reached;
    Future<std::size_t> length =
        p.submit([text, tracker = Tracker(lifetimes), &q, &remote, &lifetimes, &reached]() -> Task<std::size_t> {
          Future<int> later = q.submit([&remote] {
            remote.wait();
            return 1;
          });
          reached.arrive();
          const int one = co_await later;  // by now submit()'s lambda temporary is long gone
          if (lifetimes.alive() < 1) co_return 0;
          co_return text.size() + static_cast<std::size_t>(one) - 1;
        });
    CHECK(lifetimes.alive() == 1);  // the pool's copy
    requireSuspended(p, reached);
    CHECK(lifetimes.alive() == 1);
    remote.open();
    CHECK(length.get() == 200);
    (void)finalStats(p);
  }
  CHECK(lifetimes.alive() == 0);
}

TEST_CASE("a fire-and-forget coroutine lambda's captures live until it finishes", "[coroutine][execute][lifetime]") {
  Lifetimes lifetimes;
  Gate remote;
  Counter finished;
  std::atomic<bool> captureAlive{false};
  {
    ThreadPoolExecutor q(taggedPool("rq", 1, 1, WorkQueue::bounded(4)));
    ThreadPoolExecutor p(taggedPool("fcap", 1, 1, WorkQueue::bounded(4)));
    OpenOnExit releaseRemote(remote);
    const std::string text(200, 'y');
    Counter reached;
    p.execute([text, tracker = Tracker(lifetimes), &q, &remote, &lifetimes, &captureAlive, &finished,
               &reached]() -> Task<void> {
      Future<void> later = q.submit([&remote] { remote.wait(); });
      reached.arrive();
      co_await later;
      captureAlive = text.size() == 200 && lifetimes.alive() >= 1;
      finished.arrive();
    });
    requireSuspended(p, reached);
    remote.open();
    REQUIRE(finished.waitFor(1));
    (void)finalStats(p);
  }
  CHECK(captureAlive.load());
  CHECK(lifetimes.alive() == 0);
}

/// How the coroutine in the release tests ends, and on which thread.
enum class Ending {
  withoutSuspending,  ///< inside the start call, on the pool thread that started it
  afterAwaitingQ,     ///< resumed by a continuation on its own pool's thread
  onAnotherPool,      ///< hopped to q with resumeOn: finished on q's thread
};

TEST_CASE("a coroutine lambda's captures are released before its Future settles and with nothing else submitted",
          "[coroutine][lifetime]") {
  const Ending ending = GENERATE(Ending::withoutSuspending, Ending::afterAwaitingQ, Ending::onAnotherPool);
  CAPTURE(static_cast<int>(ending));
  Counter released;
  Gate remote;
  ThreadPoolExecutor q(taggedPool("rq", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor p(taggedPool("rel", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit releaseRemote(remote);
  std::string finishedOn;  // written by the coroutine before its Future settles
  Future<int> value = p.submit([res = releaseSignal(42, released), ending, &q, &remote, &finishedOn]() -> Task<int> {
    if (ending == Ending::afterAwaitingQ) {
      Future<void> later = q.submit([&remote] { remote.wait(); });
      co_await later;
    } else if (ending == Ending::onAnotherPool) {
      co_await resumeOn(q);
    }
    finishedOn = currentTag;
    co_return *res;
  });
  remote.open();
  REQUIRE(value.get() == 42);
  CHECK(finishedOn == (ending == Ending::onAnotherPool ? "rq" : "rel"));
  // At once: the Future is still alive, and p ran nothing after the coroutine.
  CHECK(released.count() == 1);
  REQUIRE(released.waitFor(1));  // bounded: fails after kLong instead of hanging
}

TEST_CASE("a coroutine lambda's captures are released when its coroutine finishes after its Future was dropped unread",
          "[coroutine][lifetime]") {
  Counter released;
  Counter finished;
  Gate gate;
  ThreadPoolExecutor q(taggedPool("rq", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor p(taggedPool("drop", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit release(gate);
  {
    Future<int> dropped = p.submit([res = releaseSignal(7, released), &q, &gate]() -> Task<int> {
      Future<void> later = q.submit([&gate] { gate.wait(); });
      co_await later;
      co_return *res;
    });
  }
  p.execute([&finished] { finished.arrive(); });  // proves the coroutine has suspended: p's only thread got here
  REQUIRE(finished.waitFor(1));
  CHECK(released.count() == 0);  // suspended: the captures are still needed
  gate.open();
  REQUIRE(released.waitFor(1));  // bounded: nothing else is submitted to p
}

TEST_CASE("a submitted Task's frame and its parameters are released before its Future settles",
          "[coroutine][lifetime]") {
  Counter released;
  ThreadPoolExecutor p(taggedPool("frm", 1, 1, WorkQueue::bounded(4)));
  auto read = [](std::shared_ptr<int> res) -> Task<int> { co_return *res; };
  Future<int> value = p.submit(read(releaseSignal(5, released)));
  REQUIRE(value.get() == 5);
  CHECK(released.count() == 1);
}

TEST_CASE("a fire-and-forget coroutine lambda's captures are released when it finishes with nothing else submitted",
          "[coroutine][execute][lifetime]") {
  Counter released;
  Gate remote;
  ThreadPoolExecutor q(taggedPool("rq", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor p(taggedPool("frel", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit releaseRemote(remote);
  p.execute([res = releaseSignal(1, released), &q, &remote]() -> Task<void> {
    Future<void> later = q.submit([&remote] { remote.wait(); });
    co_await later;
    if (*res != 1) throw CoroutineError("the capture changed");
  });
  remote.open();
  REQUIRE(released.waitFor(1));
}

TEST_CASE("cancel of a suspended coroutine task cancels its token", "[coroutine][cancel]") {
  Gate remote;
  ThreadPoolExecutor q(taggedPool("rq", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor p(taggedPool("cn", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit releaseRemote(remote);
  Counter reached;
  Future<int> coroutine = p.submit([&q, &remote, &reached](CancellationToken token) -> Task<int> {
    Future<int> later = q.submit([&remote] {
      remote.wait();
      return 5;
    });
    reached.arrive();
    const int five = co_await later;
    token.throwIfCancellationRequested();
    co_return five;
  });
  requireSuspended(p, reached);
  CHECK(coroutine.cancel());
  remote.open();
  CHECK_THROWS_AS(coroutine.get(), OperationCancelled);
  CHECK(finalStats(p).cancelledCount == 1);
}

TEST_CASE("shutdownNow cancels the token of a suspended coroutine task and what it awaits, then waits for it to settle",
          "[coroutine][shutdown][cancel]") {
  Gate remote;
  Counter reached;
  Counter childRuns;
  Counter cancelled;
  ThreadPoolExecutor q(taggedPool("rq", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor p(taggedPool("sn", 1, 1, WorkQueue::bounded(4)));
  OpenOnExit releaseRemote(remote);
  Future<bool> sawCancellation = p.submit([&q, &remote, &reached, &childRuns,
                                           &cancelled](CancellationToken token) -> Task<bool> {
    // Runs on the thread that cancels the token.
    CancellationRegistration registration(token, [&cancelled] { cancelled.arrive(); });
    // Submitted from the coroutine: its child, cancelled with it.
    Future<int> later = q.submit([&remote, &childRuns] {
      childRuns.arrive();
      remote.wait();
      return 5;
    });
    reached.arrive();
    try {
      (void)co_await later;
    } catch (const OperationCancelled&) {
      co_return token.isCancellationRequested() && later.isCancelled();
    }
    co_return false;
  });
  requireSuspended(p, reached);
  REQUIRE(childRuns.waitFor(1));   // running, not queued (a queued child would settle at once)
  CHECK(p.shutdownNow().empty());  // nothing was queued: the coroutine is in flight, not returned
  // Cancelled while it is still suspended: `remote` has not opened.
  REQUIRE(cancelled.waitFor(1));
  // Structured: the child runs on (it ignores its token) and the coroutine
  // waits for it; the pool does not terminate meanwhile.
  CHECK_FALSE(p.awaitTermination(0ns));
  CHECK_FALSE(sawCancellation.isDone());
  remote.open();
  CHECK(sawCancellation.get());  // its co_await threw OperationCancelled once the child had settled
  REQUIRE(p.awaitTermination(kLong));
  const PoolStats stats = p.stats();
  CHECK(stats.completedTaskCount == 2);  // the coroutine (it returned a value) and requireSuspended's probe
  checkLedgerAddsUp(stats);
  REQUIRE(q.awaitTermination(0ns) == false);
  q.shutdown();
  REQUIRE(q.awaitTermination(kLong));
  CHECK(q.stats().completedTaskCount == 1);  // the child returned normally; its Future reports the cancellation
}

TEST_CASE("callerRuns runs a rejected coroutine task in the caller until it first suspends", "[coroutine][rejection]") {
  Gate gate;
  ThreadPoolExecutor pool(taggedPool("cr", 1, 1, WorkQueue::bounded(1), RejectionPolicy::callerRuns()));
  OpenOnExit release(gate);
  Counter started;
  executeBlocked(pool, 1, started, gate);
  REQUIRE(started.waitFor(1));
  pool.execute([] {});
  const std::thread::id caller = std::this_thread::get_id();
  Future<bool> ranHere = pool.submit([caller]() -> Task<bool> { co_return std::this_thread::get_id() == caller; });
  CHECK(ranHere.isDone());
  CHECK(ranHere.get());
  CHECK(pool.stats().rejectedCount == 1);
}
