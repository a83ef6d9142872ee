// SPDX-License-Identifier: BSL-1.0
// Custom rejection handlers, and a task in a policy's hands: the standard policies called by hand
// (REJ-11), a coroutine run by callerRuns or newThreadRuns; construction, names, tryExecute.
#include "coexec/RejectionPolicy.h"

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "AdmissionTestSupport.h"
#include "RejectionPolicyTestSupport.h"
#include "TestSupport.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/FaultInjection.h"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace coexec::test {
namespace {

// ---- user handlers -----------------------------------------------------------

TEST_CASE(
    "a custom handler that leaves the task lets it be destroyed: its Future reports BrokenPromise (REJ-02, Java leaves "
    "it pending)",
    "[rejection][custom]") {
  HandlerLog log;
  Saturated sat("rejcust", recordingHandler(log));
  std::atomic<bool> ran{false};
  Future<int> future = sat.pool.submit(
      [&] {
        ran = true;
        return 1;
      },
      7);
  CHECK(log.calls.load() == 1);
  CHECK(log.priority.load() == 7);
  CHECK(log.hasFuture.load());
  CHECK(log.pool.load() == &sat.pool);
  REQUIRE(future.isDone());
  CHECK_FALSE(future.isCancelled());
  CHECK_THROWS_AS(future.get(), BrokenPromise);
  CHECK_FALSE(ran.load());
  CHECK(sat.pool.stats().rejectedCount == 1);
  CHECK(sat.pool.stats().taskCount == 2);
}

TEST_CASE("a custom handler may move the task away and run it later, outside the pool's counters",
          "[rejection][custom]") {
  std::vector<PendingTask> parked;
  Saturated sat("rejpark", [&parked](PendingTask& task, ThreadPoolExecutor&) { parked.push_back(std::move(task)); });
  Future<int> future = sat.pool.submit([] { return 5; });
  REQUIRE(parked.size() == 1);
  CHECK(parked[0].valid());
  CHECK(parked[0].hasFuture());
  CHECK_FALSE(future.isDone());  // still owned by the handler's holder

  parked[0].run();
  CHECK_FALSE(parked[0].valid());
  REQUIRE(future.isDone());
  CHECK(future.get() == 5);
  const PoolStats stats = sat.pool.stats();
  CHECK(stats.rejectedCount == 1);
  CHECK(stats.taskCount == 2);
  CHECK(stats.completedTaskCount == 0);
}

TEST_CASE("a custom handler may run the task in the submitting thread", "[rejection][custom]") {
  Saturated sat("rejrun", [](PendingTask& task, ThreadPoolExecutor&) { task.run(); });
  const std::thread::id caller = std::this_thread::get_id();
  Future<bool> future = sat.pool.submit([caller] { return std::this_thread::get_id() == caller; });
  REQUIRE(future.isDone());
  CHECK(future.get());
  CHECK(sat.pool.stats().rejectedCount == 1);
}

TEST_CASE("a custom handler's exception reaches the submitter of execute and of submit", "[rejection][custom]") {
  struct HandlerError : std::exception {
    const char* what() const noexcept override { return "the handler refuses"; }
  };
  Saturated sat("rejthrow", [](PendingTask&, ThreadPoolExecutor&) { throw HandlerError(); });
  std::atomic<bool> ran{false};
  CHECK_THROWS_AS(sat.pool.execute([&] { ran = true; }), HandlerError);
  CHECK_THROWS_AS((void)sat.pool.submit([&] { ran = true; }), HandlerError);
  CHECK_THROWS_AS((void)sat.pool.submit([&] {
    ran = true;
    return 1;
  }),
                  HandlerError);
  CHECK_FALSE(ran.load());
  const PoolStats stats = sat.pool.stats();
  CHECK(stats.rejectedCount == 3);
  CHECK(stats.taskCount == 2);
}

TEST_CASE("a custom handler runs without the pool's lock: it may call back into the pool", "[rejection][custom]") {
  std::atomic<std::size_t> queueSizeSeen{0};
  std::atomic<bool> shutdownSeen{true};
  Saturated sat("rejcb", [&](PendingTask&, ThreadPoolExecutor& pool) {
    queueSizeSeen = pool.stats().queueSize;
    shutdownSeen = pool.isShutdown();
  });
  sat.pool.execute([] {});
  CHECK(queueSizeSeen.load() == 1);
  CHECK_FALSE(shutdownSeen.load());
}

TEST_CASE("an empty policy callable throws invalid_argument (Java's null handler)", "[rejection][construction]") {
  CHECK_THROWS_AS(RejectionPolicy(RejectionPolicy::Handler{}), std::invalid_argument);
  void (*nullHandler)(PendingTask&, ThreadPoolExecutor&) = nullptr;
  CHECK_THROWS_AS(RejectionPolicy(nullHandler), std::invalid_argument);
  CHECK_THROWS_WITH(RejectionPolicy(nullHandler), "coexec::RejectionPolicy: the handler callable is empty");
}

TEST_CASE("policies report their names, a callable converts implicitly to a custom policy",
          "[rejection][construction]") {
  CHECK(RejectionPolicy::abort().name() == "abort");
  CHECK(RejectionPolicy::callerRuns().name() == "callerRuns");
  CHECK(RejectionPolicy::discard().name() == "discard");
  CHECK(RejectionPolicy::discardOldest().name() == "discardOldest");
  CHECK(RejectionPolicy::block(1s).name() == "block");
  ThreadPoolOptions options;
  CHECK(options.rejectionPolicy.name() == "abort");
  options.rejectionPolicy = [](PendingTask&, ThreadPoolExecutor&) {};
  CHECK(options.rejectionPolicy.name() == "custom");
}

// ---- REJ-11: calling the policies directly ------------------------------------

/// Hands out PendingTasks that never ran, each with its Future: a shut-down
/// pool whose policy parks every task it is given.
class PendingTasks {
 public:
  PendingTasks()
      : pool_(poolOptions("parking", 1, 1, WorkQueue::bounded(1),
                          [this](PendingTask& task, ThreadPoolExecutor&) { parked_.push_back(std::move(task)); })) {
    pool_.shutdown();
  }

  template <class F>
  std::pair<PendingTask, Future<std::invoke_result_t<F&>>> make(F f) {
    auto future = pool_.submit(std::move(f));
    REQUIRE(parked_.size() == 1);
    PendingTask task = std::move(parked_.back());
    parked_.clear();
    return {std::move(task), std::move(future)};
  }

 private:
  std::vector<PendingTask> parked_;
  ThreadPoolExecutor pool_;
};

TEST_CASE(
    "the standard policies called directly on an idle pool act on the task and change nothing in the pool (REJ-11)",
    "[rejection][direct]") {
  ThreadPoolExecutor pool(1, 1, 1s, WorkQueue::bounded(1));
  PendingTasks source;
  std::atomic<bool> ran{false};
  std::atomic<bool> onCaller{false};
  const std::thread::id caller = std::this_thread::get_id();
  auto made = source.make([&, caller] {
    onCaller = std::this_thread::get_id() == caller;
    ran = true;
    return 3;
  });
  PendingTask& task = made.first;
  Future<int>& future = made.second;
  REQUIRE(task.valid());

  SECTION("abort throws RejectedExecution with the pool's snapshot") {
    const std::exception_ptr thrown = thrownBy([&] { RejectionPolicy::abort()(task, pool); });
    requireRejectedExecution(thrown, "coexec", PoolState::running);
    // The reason is about this pool, which runs (the task came from a
    // shut-down one).
    CHECK_THAT(whatOf(thrown), !Contains("shut down"));
    CHECK_FALSE(ran.load());
  }
  SECTION("discard drops the task; its Future reports RejectedExecution") {
    RejectionPolicy::discard()(task, pool);
    CHECK_FALSE(ran.load());
    REQUIRE(future.isDone());
    CHECK_THROWS_AS(future.get(), RejectedExecution);
  }
  SECTION("callerRuns runs the task on the calling thread") {
    RejectionPolicy::callerRuns()(task, pool);
    CHECK(ran.load());
    CHECK(onCaller.load());
    REQUIRE(future.isDone());
    CHECK(future.get() == 3);
  }
  CHECK(pool.rejectionPolicy().name() == "abort");
  const PoolStats stats = pool.stats();
  CHECK(stats.taskCount == 0);
  CHECK(stats.queueSize == 0);
  CHECK(stats.rejectedCount == 0);
  CHECK(stats.completedTaskCount == 0);
  CHECK(stats.poolSize == 0);
}

// ---- tryExecute ---------------------------------------------------------------

TEST_CASE("tryExecute returns false on a saturated or shut-down pool without calling the policy or counting",
          "[rejection][tryExecute]") {
  HandlerLog log;
  Saturated sat("rejtry", recordingHandler(log));
  std::atomic<bool> ran{false};
  CHECK_FALSE(sat.pool.tryExecute([&] { ran = true; }));
  CHECK(log.calls.load() == 0);
  PoolStats stats = sat.pool.stats();
  CHECK(stats.rejectedCount == 0);
  CHECK(stats.taskCount == 2);

  sat.gate.open();
  REQUIRE(eventually([&] { return sat.pool.stats().completedTaskCount == 2; }));
  CHECK(sat.pool.tryExecute([&] { ran = true; }));
  REQUIRE(eventually([&] { return ran.load(); }));
  CHECK(sat.pool.stats().taskCount == 3);

  sat.pool.shutdown();
  CHECK_FALSE(sat.pool.tryExecute([] {}));
  CHECK(log.calls.load() == 0);
  CHECK(sat.pool.stats().rejectedCount == 0);
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("a policy applied by hand to an empty PendingTask throws invalid_argument and counts nothing",
          "[rejection][custom][bad-input]") {
  ThreadPoolExecutor pool(poolOptions("rejempty", 1, 1, WorkQueue::bounded(1)));
  PendingTask empty;
  for (const RejectionPolicy& policy : {RejectionPolicy::abort(), RejectionPolicy::callerRuns(),
                                        RejectionPolicy::discard(), RejectionPolicy::block(1ms)}) {
    INFO("policy " << policy.name());
    CHECK_THROWS_AS(policy(empty, pool), std::invalid_argument);
    CHECK_THROWS_WITH(policy(empty, pool), "coexec::RejectionPolicy: the task handle is empty");
  }
  CHECK(pool.stats().rejectedCount == 0);
}

/// An event outside any pool: a coroutine that awaits it (co_await
/// event.wait()) suspends, and resume() resumes it on the calling thread, as
/// foreign code would (an I/O completion).
class ForeignEvent {
 public:
  struct Awaiter {
    ForeignEvent* event;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> handle) {
      event->handle_ = handle;
      event->suspended_.arrive();  // touches no frame: the coroutine may be resumed from here on
    }
    void await_resume() const noexcept {}
  };
  [[nodiscard]] Awaiter wait() noexcept { return Awaiter{this}; }
  [[nodiscard]] bool waitSuspended() { return suspended_.waitFor(1); }
  /// Resumes the coroutine, once, if it has suspended.
  void resume() {
    if (suspended_.count() > 0 && !resumed_.exchange(true)) handle_.resume();
  }

 private:
  std::coroutine_handle<> handle_;
  Counter suspended_;
  std::atomic<bool> resumed_{false};
};

struct OutsideError : std::runtime_error {
  OutsideError() : std::runtime_error("the coroutine run outside the pool failed") {}
};

TEST_CASE("a coroutine task run by callerRuns or newThreadRuns holds the pool until its state is released",
          "[rejection][coroutine][lifecycle][reliability]") {
  // Caught by the model-based stress driver (a task state live after the pool
  // and every Future were gone): a caller-run coroutine that slept on the
  // process's timer service finished on that thread, whose reference to the
  // task outlived the pool, which did not wait for it. Here the coroutine
  // resumes on a thread of the test's, which is held in the uncaught handler
  // (the last thing the task's thread does before it drops the task).
  using coexec::detail::FaultInjection;
  if (!FaultInjection::available()) {
    WARN("this build has no fault points (COEXEC_FAULT_INJECTION=OFF): nothing to check");
    return;
  }
  const bool temporary = GENERATE(false, true);
  INFO((temporary ? "newThreadRuns" : "callerRuns"));
  Gate release;
  Counter reported;
  ForeignEvent event;
  std::atomic<std::int64_t> liveAtTermination{-1};
  const std::int64_t before = FaultInjection::liveFrameBlocks();
  {
    ThreadPoolOptions options =
        poolOptions("outside", 0, 1, WorkQueue::synchronous(),
                    temporary ? RejectionPolicy::newThreadRuns(1) : RejectionPolicy::callerRuns());
    // No worker can start: every task reaches the policy, and the pool has
    // no thread to wait for when it shuts down.
    options.threadFactory = [](const std::string&, const std::function<void()>&) -> std::thread {
      throw std::runtime_error("no threads here");
    };
    options.uncaughtExceptionHandler = [&](std::exception_ptr error, const TaskInfo&) {
      try {
        std::rethrow_exception(error);
      } catch (const OutsideError&) {
        reported.arrive();
        release.wait();
      } catch (...) {  // the factory's failures
      }
    };
    options.hooks.terminated = [&] { liveAtTermination = FaultInjection::liveFrameBlocks(); };
    ThreadPoolExecutor pool(std::move(options));
    // On every way out, before the pool's destructor: the coroutine ends (a
    // pool waits for it), its thread joined.
    struct Finish {
      Gate& gate;
      ForeignEvent& event;
      std::thread resumer;
      ~Finish() {
        gate.open();
        if (resumer.joinable()) resumer.join();
        event.resume();  // if the thread never started
      }
    } finish{release, event, {}};
    pool.execute([&event]() -> Task<void> {
      co_await event.wait();
      throw OutsideError();
    });
    REQUIRE(event.waitSuspended());
    if (temporary) REQUIRE(eventually([&] { return pool.dumpThreads().temporaryThreads == 0; }));
    finish.resumer = std::thread([&event] { event.resume(); });  // finishes there, held in the handler
    REQUIRE(reported.waitFor(1));
    pool.shutdown();  // no thread, nothing queued: only the coroutine's task may hold the pool
    CHECK_FALSE(pool.isTerminated());
    release.open();
    REQUIRE(pool.awaitTermination(kLong));
    CHECK(liveAtTermination.load() == before);  // the task's state went before the pool terminated
  }
  CHECK(FaultInjection::liveFrameBlocks() == before);
}

}  // namespace
}  // namespace coexec::test
