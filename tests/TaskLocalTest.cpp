// SPDX-License-Identifier: BSL-1.0
#include "coexec/TaskLocal.h"

// TaskLocal: a Scope binds a value for the code of its task (or thread) and
// the work that code starts; visible after every co_await whatever thread
// resumes, in children submitted (any pool, lanes, invokeAll) or awaited
// (Task, withTimeout), shadowed and restored by nested Scopes, and never
// seen by the next task on the same worker.

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "CoroutineTestSupport.h"
#include "DeathTestSupport.h"
#include "TestSupport.h"
#include "coexec/InvokeAll.h"
#include "coexec/KeyedExecutor.h"
#include "coexec/ResumeOn.h"
#include "coexec/Sleep.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/AsCompleted.h"
#include "coexec/TaskGroup.h"
#include "coexec/WhenAll.h"
#include "coexec/WithTimeout.h"

using coexec::Future;
using coexec::resumeOn;
using coexec::Task;
using coexec::TaskLocal;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::Counter;
using coexec::test::currentTag;
using coexec::test::Gate;
using coexec::test::OpenOnExit;
using coexec::test::stressSize;
using coexec::test::taggedPool;

namespace {

const TaskLocal<std::string> requestId;
const TaskLocal<int> depth;

/// The bound request id, or "-" where none is.
std::string idOrDash() {
  const std::string* id = requestId.get();
  return id != nullptr ? *id : std::string("-");
}

ThreadPoolOptions localsPool(const char* name, std::size_t threads) {
  return taggedPool(name, threads, threads, WorkQueue::bounded(4096));
}

}  // namespace

TEST_CASE("nothing is bound by default, in a task or outside one", "[tasklocal]") {
  ThreadPoolExecutor pool(localsPool("tl", 1));
  CHECK(requestId.get() == nullptr);
  CHECK_FALSE(requestId.isBound());
  Future<bool> bound = pool.submit([] { return requestId.isBound(); });
  CHECK_FALSE(bound.get());
}

TEST_CASE("nested scopes shadow the outer binding and restore it when they end", "[tasklocal][scope]") {
  {
    TaskLocal<std::string>::Scope outer(requestId, "outer");
    CHECK(idOrDash() == "outer");
    {
      TaskLocal<std::string>::Scope inner(requestId, "inner");
      TaskLocal<int>::Scope level(depth, 2);
      CHECK(idOrDash() == "inner");
      CHECK(*depth.get() == 2);
    }
    CHECK(idOrDash() == "outer");
    CHECK(depth.get() == nullptr);
  }
  CHECK(requestId.get() == nullptr);
}

TEST_CASE("a binding made outside any task is seen by the tasks submitted under it and by syncWait",
          "[tasklocal][thread]") {
  ThreadPoolExecutor pool(localsPool("tl", 2));
  Future<std::string> unbound = pool.submit([] { return idOrDash(); });
  Future<std::string> child;
  {
    TaskLocal<std::string>::Scope scope(requestId, "from-main");
    child = pool.submit([] { return idOrDash(); });
    CHECK(coexec::syncWait([]() -> Task<std::string> { co_return idOrDash(); }()) == "from-main");
  }
  Future<std::string> after = pool.submit([] { return idOrDash(); });
  CHECK(unbound.get() == "-");
  CHECK(child.get() == "from-main");  // kept after the Scope ended: a snapshot
  CHECK(after.get() == "-");
}

TEST_CASE("a coroutine task sees its binding after every co_await, whatever thread resumes it",
          "[tasklocal][coroutine]") {
  ThreadPoolExecutor pool(localsPool("home", 2));
  ThreadPoolExecutor other(localsPool("other", 1));
  Future<std::vector<std::string>> seen = pool.submit([&]() -> Task<std::vector<std::string>> {
    std::vector<std::string> log;
    TaskLocal<std::string>::Scope scope(requestId, "req-1");
    Future<int> elsewhere = other.submit([] { return 1; });
    (void)co_await elsewhere;
    log.push_back(idOrDash());
    co_await coexec::sleepFor(std::chrono::milliseconds(1));
    log.push_back(idOrDash());
    co_await resumeOn(other);
    log.push_back(std::string(currentTag) + ":" + idOrDash());
    co_await resumeOn(pool);
    log.push_back(std::string(currentTag) + ":" + idOrDash());
    co_return log;
  });
  CHECK(seen.get() == std::vector<std::string>{"req-1", "req-1", "other:req-1", "home:req-1"});
}

TEST_CASE("children submitted from a task see its bindings as they were at submission", "[tasklocal][children]") {
  ThreadPoolExecutor pool(localsPool("tl", 2));
  ThreadPoolExecutor other(localsPool("other", 1));
  Future<std::vector<std::string>> seen = pool.submit([&]() -> Task<std::vector<std::string>> {
    std::vector<std::string> log;
    Future<std::string> before = pool.submit([] { return idOrDash(); });
    Future<std::string> inside;
    Future<std::string> onOther;
    {
      TaskLocal<std::string>::Scope scope(requestId, "parent");
      inside = pool.submit([&pool]() -> Task<std::string> {
        // A grandchild, submitted by the child after it bound its own value.
        TaskLocal<std::string>::Scope own(requestId, "child");
        Future<std::string> grandchild = pool.submit([] { return idOrDash(); });
        co_return idOrDash() + "/" + co_await grandchild;
      });
      onOther = other.submit([] { return idOrDash(); });
    }
    log.push_back(co_await before);
    log.push_back(co_await inside);
    log.push_back(co_await onOther);
    log.push_back(idOrDash());  // the child's Scope never reached the parent
    co_return log;
  });
  CHECK(seen.get() == std::vector<std::string>{"-", "child/child", "parent", "-"});
}

TEST_CASE("an awaited Task and a Task under withTimeout see the binding, and their own scopes end with them",
          "[tasklocal][task]") {
  ThreadPoolExecutor pool(localsPool("tl", 2));
  Future<std::string> seen = pool.submit([&]() -> Task<std::string> {
    TaskLocal<std::string>::Scope scope(requestId, "outer");
    auto inner = []() -> Task<std::string> {
      const std::string before = idOrDash();
      TaskLocal<std::string>::Scope shadow(requestId, "inner");
      co_await coexec::sleepFor(std::chrono::milliseconds(1));
      co_return before + ">" + idOrDash();
    };
    Task<std::string> first = inner();
    std::string result = co_await first;
    result += "|" + idOrDash();
    auto timed = coexec::withTimeout(inner(), std::chrono::hours(1));
    result += "|" + co_await timed;
    result += "|" + idOrDash();
    co_return result;
  });
  CHECK(seen.get() == "outer>inner|outer|outer>inner|outer");
}

TEST_CASE("invokeAll children and lane tasks see the submitter's binding", "[tasklocal][children]") {
  ThreadPoolExecutor pool(localsPool("tl", 2));
  coexec::KeyedExecutor keyed(pool, 4);
  Future<std::vector<std::string>> seen = pool.submit([&]() -> Task<std::vector<std::string>> {
    TaskLocal<std::string>::Scope scope(requestId, "fan");
    std::vector<std::function<std::string()>> tasks(3, [] { return idOrDash(); });
    auto all = pool.invokeAll(tasks);
    std::vector<std::string> results = co_await all;
    Future<std::string> inLane = keyed.submit(42, [] { return idOrDash(); });
    results.push_back(co_await inLane);
    co_return results;
  });
  CHECK(seen.get() == std::vector<std::string>{"fan", "fan", "fan", "fan"});
}

TEST_CASE("a binding never leaks to the next task on the same worker", "[tasklocal][isolation]") {
  Gate gate;
  ThreadPoolExecutor pool(localsPool("one", 1));
  ThreadPoolExecutor other(localsPool("other", 1));
  OpenOnExit opener(gate);
  Counter suspended;
  // A binds and suspends; B runs on the same (only) worker meanwhile.
  Future<std::string> a = pool.submit([&]() -> Task<std::string> {
    TaskLocal<std::string>::Scope scope(requestId, "task-a");
    Future<int> wait = other.submit([&] {
      suspended.arrive();
      gate.wait();
      return 0;
    });
    (void)co_await wait;
    co_return idOrDash();
  });
  REQUIRE(suspended.waitFor(1));
  Future<std::string> b = pool.submit([] { return idOrDash(); });
  CHECK(b.get() == "-");
  gate.open();
  CHECK(a.get() == "task-a");
  // A callable that binds and returns: the next task sees nothing either.
  Future<void> c = pool.submit([] { TaskLocal<std::string>::Scope scope(requestId, "task-c"); });
  c.get();
  Future<std::string> d = pool.submit([] { return idOrDash(); });
  CHECK(d.get() == "-");
}

TEST_CASE("many tasks with different values interleaving on two workers each see only their own",
          "[tasklocal][concurrency]") {
  ThreadPoolExecutor pool(localsPool("two", 2));
  const int tasks = static_cast<int>(stressSize(2'000, 4));
  std::atomic<int> mismatches{0};
  std::atomic<int> checks{0};
  std::vector<Future<void>> futures;
  for (int i = 0; i < tasks; ++i) {
    futures.push_back(pool.submit([&pool, &mismatches, &checks, i]() -> Task<void> {
      TaskLocal<int>::Scope scope(depth, i);
      for (int step = 0; step < 4; ++step) {
        co_await resumeOn(pool);  // a yield: other tasks run on this worker meanwhile
        const int* seen = depth.get();
        if (seen == nullptr || *seen != i) mismatches.fetch_add(1);
        checks.fetch_add(1);
      }
    }));
  }
  for (Future<void>& f : futures)
    f.get();
  CHECK(checks.load() == tasks * 4);
  CHECK(mismatches.load() == 0);
}

TEST_CASE("after awaiting a combinator, the coroutine's submissions still carry its bindings",
          "[tasklocal][combinators]") {
  ThreadPoolExecutor pool(localsPool("tl", 2));
  Future<std::vector<std::string>> seen = pool.submit([&]() -> Task<std::vector<std::string>> {
    TaskLocal<std::string>::Scope scope(requestId, "after");
    std::vector<std::string> log;
    auto probe = [&pool]() -> Future<std::string> { return pool.submit([] { return idOrDash(); }); };

    Future<int> a = pool.submit([] { return 1; });
    Future<int> b = pool.submit([] { return 2; });
    auto both = coexec::whenAll(a, b);
    (void)co_await both;
    Future<std::string> afterWhenAll = probe();
    log.push_back(co_await afterWhenAll);

    std::vector<Future<int>> futures;
    futures.push_back(pool.submit([] { return 3; }));
    auto completions = coexec::asCompleted(std::move(futures));
    while (std::optional<Future<int>> done = co_await completions.next())
      (void)done->get();
    Future<std::string> afterAsCompleted = probe();
    log.push_back(co_await afterAsCompleted);

    coexec::TaskGroup group(pool);
    Future<int> child = group.spawn([] { return 4; });
    co_await group.join();
    (void)child.get();
    Future<std::string> afterJoin = probe();
    log.push_back(co_await afterJoin);
    co_return log;
  });
  CHECK(seen.get() == std::vector<std::string>{"after", "after", "after"});
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("death child: TaskLocal scopes ended out of order", "[.][tasklocal][death]") {
  if (!coexec::test::isDeathChild()) return;
  coexec::test::prepareDeathChild();
  std::optional<TaskLocal<int>::Scope> outer;
  std::optional<TaskLocal<int>::Scope> inner;
  outer.emplace(depth, 1);
  inner.emplace(depth, 2);
  outer.reset();  // the outer Scope ends first: the assertion fires
}

TEST_CASE("TaskLocal scopes ended out of order fail an assertion in debug builds",
          "[tasklocal][scope][bad-input][death]") {
#ifdef NDEBUG
  WARN("assertions are compiled out (NDEBUG): scopes ended out of order are undefined behaviour here");
#else
  coexec::test::requireAbortsWith("death child: TaskLocal scopes ended out of order",
                                  "TaskLocal::Scope: scopes must end in reverse order, where they began");
#endif
}
