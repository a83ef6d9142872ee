// SPDX-License-Identifier: BSL-1.0
#include "coexec/SyncWait.h"

// syncWait(task): returns the value or rethrows; coroutines that suspend
// inside it resume on the calling thread (its run loop) unless they hop; it
// refuses empty and already-started Tasks, and refuses to block a pool thread.

#include <atomic>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "CoroutineTestSupport.h"
#include "coexec/ResumeOn.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/ThisThread.h"

using coexec::Future;
using coexec::resumeOn;
using coexec::syncWait;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::test::currentTag;
using coexec::test::taggedPool;

namespace {

struct SyncError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Task<int> answer() { co_return 42; }

Task<int> fails() {
  throw SyncError("from the task");
  co_return 0;  // unreachable; makes this a coroutine
}

/// Awaits `count` pool tasks and records, after each await, whether it
/// resumed on `home`.
Task<int> awaitPoolWork(ThreadPoolExecutor& pool, int count, std::thread::id home, int& resumedAtHome) {
  int sum = 0;
  for (int i = 0; i < count; ++i) {
    Future<int> future = pool.submit([i] { return i; });
    sum += co_await future;
    if (coexec::thisThreadId() == home) ++resumedAtHome;
  }
  co_return sum;
}

}  // namespace

TEST_CASE("syncWait returns the value of a Task", "[syncWait]") {
  CHECK(syncWait(answer()) == 42);
  bool ran = false;
  syncWait([](bool& flag) -> Task<void> {
    flag = true;
    co_return;
  }(ran));
  CHECK(ran);
  std::string text = "referenced";
  std::string& same = syncWait([](std::string& s) -> Task<std::string&> { co_return s; }(text));
  CHECK(&same == &text);
}

TEST_CASE("syncWait rethrows the exception of the Task", "[syncWait][exceptions]") {
  CHECK_THROWS_MATCHES(syncWait(fails()), SyncError, Catch::Matchers::Message("from the task"));
}

TEST_CASE("syncWait of an empty Task throws std::logic_error", "[syncWait]") {
  CHECK_THROWS_AS(syncWait(Task<int>()), std::logic_error);
  CHECK_THROWS_AS(syncWait(Task<int>()), std::invalid_argument);
  CHECK_THROWS_WITH(syncWait(Task<int>()),
                    "coexec::syncWait: the Task is empty (default-constructed or moved from), so there is no coroutine "
                    "to start.");
}

TEST_CASE("syncWait of a Task that was already awaited throws std::logic_error", "[syncWait]") {
  auto awaitAndHandOver = []() -> Task<Task<int>> {
    Task<int> inner = answer();
    (void)co_await inner;
    co_return std::move(inner);
  };
  Task<int> started = syncWait(awaitAndHandOver());
  REQUIRE(started.valid());
  std::string message = "no std::logic_error";
  try {
    (void)syncWait(std::move(started));
  } catch (const std::logic_error& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Matchers::StartsWith("coexec::syncWait: the Task was already started"));
}

TEST_CASE("a coroutine awaiting pool work inside syncWait resumes on the calling thread", "[syncWait][affinity]") {
  ThreadPoolExecutor pool(taggedPool("sw", 2, 2, WorkQueue::bounded(16)));
  const std::thread::id home = std::this_thread::get_id();
  int resumedAtHome = 0;
  CHECK(syncWait(awaitPoolWork(pool, 100, home, resumedAtHome)) == 4950);
  CHECK(resumedAtHome == 100);
}

TEST_CASE("syncWait returns once a Task that hopped to a pool finishes there", "[syncWait][resumeOn]") {
  ThreadPoolExecutor pool(taggedPool("hop", 1, 1, WorkQueue::bounded(4)));
  auto hop = [](ThreadPoolExecutor& p) -> Task<std::string> {
    co_await resumeOn(p);
    co_return std::string(currentTag);
  };
  CHECK(syncWait(hop(pool)) == "hop");
}

TEST_CASE("syncWait nested in a coroutine restores the outer run loop", "[syncWait][affinity]") {
  ThreadPoolExecutor pool(taggedPool("nest", 1, 1, WorkQueue::bounded(4)));
  const std::thread::id home = std::this_thread::get_id();
  auto outer = [](ThreadPoolExecutor& p, std::thread::id h) -> Task<int> {
    int innerResumedAtHome = 0;
    const int inner = syncWait(awaitPoolWork(p, 3, h, innerResumedAtHome));
    Future<int> future = p.submit([] { return 10; });
    const int after = co_await future;  // resumes through the outer loop
    const bool atHome = coexec::thisThreadId() == h;
    co_return (atHome && innerResumedAtHome == 3) ? inner + after : -1;
  };
  CHECK(syncWait(outer(pool, home)) == 13);
}

TEST_CASE("syncWait on a pool thread throws std::logic_error", "[syncWait][blocking]") {
  ThreadPoolExecutor pool(taggedPool("swp", 1, 1, WorkQueue::bounded(4)));
  Future<bool> refused = pool.submit([] {
    try {
      (void)syncWait(answer());
    } catch (const std::logic_error& e) {
      return std::string(e.what()) ==
             "coexec::syncWait: called on a thread of pool 'swp'; blocking a pool thread until a task finishes can "
             "deadlock the pool (co_await the task instead)";
    }
    return false;
  });
  CHECK(refused.get());
  // And from a coroutine task of that pool.
  Future<bool> refusedInCoroutine = pool.submit([]() -> Task<bool> {
    try {
      (void)syncWait(answer());
    } catch (const std::logic_error&) {
      co_return true;
    }
    co_return false;
  });
  CHECK(refusedInCoroutine.get());
}

TEST_CASE("syncWait may be called from several plain threads at once", "[syncWait]") {
  ThreadPoolExecutor pool(taggedPool("many", 2, 2, WorkQueue::bounded(64)));
  constexpr int kThreads = 4;
  std::atomic<int> resumedAtHomeTotal{0};
  std::atomic<int> sumTotal{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      int resumedAtHome = 0;
      sumTotal += syncWait(awaitPoolWork(pool, 50, std::this_thread::get_id(), resumedAtHome));
      resumedAtHomeTotal += resumedAtHome;
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  CHECK(sumTotal.load() == kThreads * 1225);
  CHECK(resumedAtHomeTotal.load() == kThreads * 50);
}

TEST_CASE("a coroutine that syncWait started and that outlives it resumes on the thread that completes its await",
          "[syncWait][lifetime]") {
  // callerRuns starts a fire-and-forget coroutine on the syncWait thread; it
  // suspends on a Future of another pool, and syncWait returns before that
  // Future completes. The loop it recorded is closed by then: the coroutine
  // goes on on the thread that completed the Future.
  coexec::test::Gate releaseBlocker;
  coexec::test::Gate releaseRemote;
  coexec::test::Counter blockerStarted;
  coexec::test::Counter finished;
  std::atomic<bool> resumedOnRemote{false};
  coexec::ThreadPoolOptions options = taggedPool("full", 1, 1, WorkQueue::bounded(1));
  options.rejectionPolicy = coexec::RejectionPolicy::callerRuns();
  ThreadPoolExecutor remote(taggedPool("remote", 1, 1, WorkQueue::bounded(4)));
  ThreadPoolExecutor full(std::move(options));
  struct OpenBoth {
    coexec::test::Gate& a;
    coexec::test::Gate& b;
    ~OpenBoth() {
      a.open();
      b.open();
    }
  } openBoth{releaseBlocker, releaseRemote};
  full.execute([&] {
    blockerStarted.arrive();
    releaseBlocker.wait();
  });
  REQUIRE(blockerStarted.waitFor(1));
  full.execute([] {});  // fills the queue: the next execute runs in the caller
  syncWait([&]() -> Task<void> {
    full.execute([&remote, &releaseRemote, &resumedOnRemote, &finished]() -> Task<void> {
      Future<int> later = remote.submit([&releaseRemote] {
        releaseRemote.wait();
        return 1;
      });
      (void)co_await later;
      resumedOnRemote = currentTag == "remote";
      finished.arrive();
    });
    co_return;
  }());
  releaseRemote.open();
  REQUIRE(finished.waitFor(1));
  CHECK(resumedOnRemote.load());
  releaseBlocker.open();
}
