// SPDX-License-Identifier: BSL-1.0
#include "coexec/PendingTask.h"

// PendingTask: the runnable side of a task that has not run, as a rejection
// policy or shutdownNow() hands it out. Dropping it breaks its promise,
// running it settles its Future, and both race safely with Future::cancel().

#include <atomic>
#include <iterator>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include "Assertions.h"

#include "TestSupport.h"
#include "coexec/ThreadPoolExecutor.h"

using namespace std::chrono_literals;

using coexec::BrokenPromise;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::PendingTask;
using coexec::PoolStats;
using coexec::TaskInfo;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::Counter;
using coexec::test::Gate;
using coexec::test::kLeads;
using coexec::test::kLong;
using coexec::test::Lead;
using coexec::test::leadName;
using coexec::test::race;

static_assert(!std::is_copy_constructible_v<PendingTask>);
static_assert(!std::is_copy_assignable_v<PendingTask>);
static_assert(std::is_nothrow_move_constructible_v<PendingTask>);
static_assert(std::is_nothrow_move_assignable_v<PendingTask>);

namespace {

struct CodedError {
  int code;
};

/// A shut-down pool whose rejection policy keeps every task it is given: each
/// submit()/execute() hands the test a PendingTask that never ran.
class Catcher {
 public:
  Catcher() : pool_(options(tasks_)) { pool_.shutdown(); }

  ThreadPoolExecutor& pool() { return pool_; }
  /// The task the last submission produced.
  PendingTask take() {
    REQUIRE_FALSE(tasks_.empty());
    PendingTask task = std::move(tasks_.back());
    tasks_.pop_back();
    return task;
  }

 private:
  static ThreadPoolOptions options(std::vector<PendingTask>& tasks) {
    ThreadPoolOptions o;
    o.name = "catcher";
    // The policy runs on the submitting thread: no synchronisation needed.
    o.rejectionPolicy = [&tasks](PendingTask& task, ThreadPoolExecutor&) { tasks.push_back(std::move(task)); };
    return o;
  }

  std::vector<PendingTask> tasks_;
  ThreadPoolExecutor pool_;
};

}  // namespace

TEST_CASE("destroying a PendingTask that never ran settles its Future with BrokenPromise", "[pending]") {
  Catcher catcher;
  std::atomic<int> ran{0};
  auto future = catcher.pool().submit([&] { return ++ran; });
  {
    PendingTask task = catcher.take();
    CHECK(task.valid());
    CHECK_FALSE(future.isDone());
  }
  CHECK(future.isDone());
  CHECK_FALSE(future.isCancelled());
  CHECK_THROWS_AS(future.get(), BrokenPromise);
  CHECK(ran == 0);
}

TEST_CASE("run executes the task on the calling thread and settles its Future", "[pending]") {
  Catcher catcher;
  auto future = catcher.pool().submit([] { return std::this_thread::get_id(); });
  PendingTask task = catcher.take();
  task.run();
  CHECK_FALSE(task.valid());
  REQUIRE(future.isDone());
  CHECK(future.get() == std::this_thread::get_id());
}

TEST_CASE("run rethrows an execute task's exception and leaves a submit task's in its Future",
          "[pending][exceptions]") {
  Catcher catcher;
  catcher.pool().execute([] { throw CodedError{3}; });
  PendingTask executed = catcher.take();
  CHECK_FALSE(executed.hasFuture());
  try {
    executed.run();
    FAIL("run() of a throwing execute() task returned normally");
  } catch (const CodedError& e) {
    CHECK(e.code == 3);
  }
  CHECK_FALSE(executed.valid());

  auto future = catcher.pool().submit([]() -> int { throw CodedError{4}; });
  PendingTask submitted = catcher.take();
  CHECK(submitted.hasFuture());
  CHECK_NOTHROW(submitted.run());
  try {
    (void)future.get();
    FAIL("the Future of a throwing task returned a value");
  } catch (const CodedError& e) {
    CHECK(e.code == 4);
  }
}

TEST_CASE("run on an empty PendingTask throws std::logic_error", "[pending]") {
  PendingTask empty;
  CHECK_FALSE(empty.valid());
  CHECK_THROWS_AS(empty.run(), std::logic_error);
  CHECK_THROWS_WITH(empty.run(), "coexec::PendingTask::run: the handle is empty (already run or moved from)");

  Catcher catcher;
  catcher.pool().execute([] {});
  PendingTask task = catcher.take();
  task.run();
  CHECK_THROWS_AS(task.run(), std::logic_error);  // a task runs once
  PendingTask moved = std::move(task);
  CHECK_FALSE(moved.valid());
}

TEST_CASE("priority and hasFuture describe the submission", "[pending]") {
  Catcher catcher;
  catcher.pool().execute([] {}, 3);
  PendingTask executed = catcher.take();
  CHECK(executed.priority() == 3);
  CHECK_FALSE(executed.hasFuture());
  CHECK_FALSE(executed.isCancelled());

  auto future = catcher.pool().submit([] { return 1; }, -2);
  PendingTask submitted = catcher.take();
  CHECK(submitted.priority() == -2);
  CHECK(submitted.hasFuture());

  (void)catcher.pool().submit([] { return 1; });
  CHECK(catcher.take().priority() == 0);
}

TEST_CASE("a PendingTask cancelled through its Future does nothing when run", "[pending][cancel]") {
  const bool runIt = GENERATE(true, false);
  INFO((runIt ? "then run" : "then dropped"));
  Catcher catcher;
  std::atomic<int> ran{0};
  auto future = catcher.pool().submit([&] { return ++ran; });
  PendingTask task = catcher.take();
  CHECK(future.cancel());
  CHECK(task.isCancelled());
  if (runIt) {
    CHECK_NOTHROW(task.run());
  } else {
    task = PendingTask();
  }
  CHECK(ran == 0);
  CHECK(future.isCancelled());
  CHECK_THROWS_AS(future.get(), OperationCancelled);  // not BrokenPromise: cancellation came first
}

TEST_CASE("move-assigning over a PendingTask drops the task it held", "[pending]") {
  Catcher catcher;
  auto first = catcher.pool().submit([] { return 1; });
  PendingTask a = catcher.take();
  auto second = catcher.pool().submit([] { return 2; });
  PendingTask b = catcher.take();

  a = std::move(b);
  CHECK(first.isDone());
  CHECK_THROWS_AS(first.get(), BrokenPromise);
  CHECK_FALSE(b.valid());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  REQUIRE(a.valid());
  CHECK_FALSE(second.isDone());
  a.run();
  CHECK(second.get() == 2);
}

TEST_CASE("running a task shutdownNow returned calls no hook and changes no pool counter", "[pending][hooks]") {
  Counter started;
  std::atomic<int> beforeCalls{0};
  std::atomic<int> afterCalls{0};
  Gate gate;
  ThreadPoolOptions options;
  options.workQueue = WorkQueue::bounded(8);
  options.hooks.beforeExecute = [&](const TaskInfo&) { ++beforeCalls; };
  options.hooks.afterExecute = [&](const TaskInfo&, std::exception_ptr) { ++afterCalls; };
  ThreadPoolExecutor pool(std::move(options));
  struct OpenOnExit {
    Gate& gate;
    ~OpenOnExit() { gate.open(); }
  } release{gate};

  pool.execute([&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  auto ok = pool.submit([] { return 1; });
  auto failing = pool.submit([]() -> int { throw CodedError{1}; });
  std::vector<PendingTask> drained = pool.shutdownNow();
  REQUIRE(drained.size() == 2u);
  gate.open();
  REQUIRE(pool.awaitTermination(kLong));
  const PoolStats before = pool.stats();

  for (auto& task : drained)
    task.run();
  CHECK(ok.get() == 1);
  CHECK_THROWS_AS(failing.get(), CodedError);
  const PoolStats after = pool.stats();
  CHECK(beforeCalls == 1);  // the blocker only
  CHECK(afterCalls == 1);
  CHECK(after.taskCount == before.taskCount);
  CHECK(after.completedTaskCount == before.completedTaskCount);
  CHECK(after.failedCount == before.failedCount);
  CHECK(after.cancelledCount == before.cancelledCount);
  CHECK(after.drainedCount == 2u);
}

TEST_CASE("run and destruction racing Future::cancel settle the Future exactly once", "[pending][cancel][race]") {
  const bool destroy = GENERATE(false, true);
  INFO((destroy ? "the other thread drops the task" : "the other thread runs the task"));
  constexpr int kRounds = 300;
  Catcher catcher;
  int cancelWon = 0;
  int otherWon = 0;
  for (int round = 0; round < kRounds; ++round) {
    const Lead lead = kLeads[round % std::size(kLeads)];
    INFO("round " << round << ": " << leadName(lead));
    std::atomic<int> ran{0};
    auto future = catcher.pool().submit([&] { return ++ran; });
    PendingTask task = catcher.take();
    bool cancelled = false;
    race(
        lead, [&] { cancelled = future.cancel(); },
        [&] {
          if (destroy) {
            task = PendingTask();
          } else {
            task.run();
          }
        });

    REQUIRE(future.isDone());
    CHECK(future.isCancelled() == cancelled);
    if (cancelled) {
      ++cancelWon;
      CHECK_THROWS_AS(future.get(), OperationCancelled);
    } else {
      ++otherWon;
      if (destroy) {
        CHECK_THROWS_AS(future.get(), BrokenPromise);
        CHECK(ran == 0);
      } else {
        CHECK(future.get() == 1);
        CHECK(ran == 1);
      }
    }
    CHECK(ran <= 1);
  }
  // Both outcomes the test claims to cover occurred.
  INFO("cancel won " << cancelWon << " of " << kRounds << " rounds, " << (destroy ? "the drop" : "run") << " won "
                     << otherWon);
  CHECK(cancelWon > 0);
  CHECK(otherWon > 0);
}

namespace {

/// A capture that counts the copies of itself alive.
struct LiveCopies {
  explicit LiveCopies(int& live) : live(&live) { ++*this->live; }
  LiveCopies(const LiveCopies& other) : live(other.live) { ++*live; }
  LiveCopies(LiveCopies&& other) noexcept : live(other.live) { ++*live; }
  LiveCopies& operator=(const LiveCopies&) = delete;
  ~LiveCopies() { --*live; }
  int* live;
};

}  // namespace

TEST_CASE("a callable's captures are destroyed once: when it has run, when it threw, or with a task that never ran",
          "[pending][lifetime]") {
  Catcher catcher;
  int live = 0;
  SECTION("run") {
    auto future = catcher.pool().submit([t = LiveCopies(live)] { return *t.live; });
    CHECK(live == 1);
    catcher.take().run();
    CHECK(live == 0);  // before the result is read
    CHECK(future.get() == 1);
  }
  SECTION("threw") {
    auto future = catcher.pool().submit([t = LiveCopies(live)]() -> int { throw CodedError{*t.live}; });
    catcher.take().run();
    CHECK(live == 0);
    CHECK_THROWS_AS(future.get(), CodedError);
  }
  SECTION("never ran") {
    {
      auto future = catcher.pool().submit([t = LiveCopies(live)] { return *t.live; });
      CHECK(live == 1);
      (void)catcher.take();
      CHECK_THROWS_AS(future.get(), BrokenPromise);
      CHECK(live == 1);  // the task, and so its callable, lives on with the Future
    }
    CHECK(live == 0);
  }
  CHECK(live == 0);
}

TEST_CASE(
    "a coroutine lambda's captures are destroyed once: when its coroutine has finished, or with a task that never ran",
    "[pending][lifetime][coroutine]") {
  Catcher catcher;
  int live = 0;
  SECTION("ran to the end") {
    auto future = catcher.pool().submit([t = LiveCopies(live)]() -> coexec::Task<int> { co_return *t.live; });
    CHECK(live == 1);
    catcher.take().run();  // the coroutine never suspends: it finishes here
    CHECK(live == 0);
    CHECK(future.get() == 1);
  }
  SECTION("threw") {
    auto future = catcher.pool().submit([t = LiveCopies(live)]() -> coexec::Task<int> {
      throw CodedError{*t.live};
      co_return 0;
    });
    catcher.take().run();
    CHECK(live == 0);
    CHECK_THROWS_AS(future.get(), CodedError);
  }
  SECTION("never ran") {
    {
      auto future = catcher.pool().submit([t = LiveCopies(live)]() -> coexec::Task<int> { co_return *t.live; });
      (void)catcher.take();
      CHECK_THROWS_AS(future.get(), BrokenPromise);
      CHECK(live == 1);  // the task, and so its callable, lives on with the Future
    }
    CHECK(live == 0);
  }
  CHECK(live == 0);
}
