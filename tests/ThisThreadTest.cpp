// SPDX-License-Identifier: BSL-1.0
#include "coexec/ThisThread.h"

// Thread identity inside a coroutine that moves between threads, in the
// optimized builds users ship: thisThreadId() against the compiler's reuse of
// std::this_thread::get_id() across a suspension (clang, from -O1 on), and
// the library's own per-thread state (the current task, read and written
// inline by the awaiters) following the coroutine to each thread it resumes
// on. docs/coroutines.md, "Thread identity inside a coroutine".

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "TestSupport.h"
#include "coexec/CancellationToken.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/ResumeOn.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

using namespace std::chrono_literals;
using coexec::CancellationToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::resumeOn;
using coexec::syncWait;
using coexec::Task;
using coexec::thisThreadId;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::test::Gate;
using coexec::test::kLong;

namespace {

// clang with optimization merges two std::this_thread::get_id() calls of one
// coroutine body across its suspension points (glibc declares pthread_self()
// pure); GCC 12 and clang at -O0 call it again.
#if defined(__clang__) && defined(__OPTIMIZE__)
constexpr bool kReusesPthreadSelf = true;
#else
constexpr bool kReusesPthreadSelf = false;
#endif

struct Hop {
  std::thread::id before;
  std::thread::id after;
};

/// The id of the one thread of `pool`.
std::thread::id threadOf(ThreadPoolExecutor& pool) {
  return pool.submit([] { return thisThreadId(); }).get();
}

Task<Hop> hopWithThisThreadId(ThreadPoolExecutor& from, ThreadPoolExecutor& to) {
  co_await resumeOn(from);
  Hop hop;
  hop.before = thisThreadId();
  co_await resumeOn(to);
  hop.after = thisThreadId();
  co_return hop;
}

Task<Hop> hopWithGetId(ThreadPoolExecutor& from, ThreadPoolExecutor& to) {
  co_await resumeOn(from);
  Hop hop;
  hop.before = std::this_thread::get_id();
  co_await resumeOn(to);
  hop.after = std::this_thread::get_id();
  co_return hop;
}

}  // namespace

TEST_CASE("thisThreadId is the calling thread's id", "[thread]") {
  CHECK(thisThreadId() == std::this_thread::get_id());
  std::thread::id seen;
  std::thread other([&seen] { seen = thisThreadId(); });
  const std::thread::id otherId = other.get_id();
  other.join();
  CHECK(seen == otherId);
  CHECK(seen != thisThreadId());
}

TEST_CASE("thisThreadId read after a co_await is the thread the coroutine resumed on", "[thread][coroutine]") {
  ThreadPoolExecutor a(1, 1, 60s, WorkQueue::unbounded());
  ThreadPoolExecutor b(1, 1, 60s, WorkQueue::unbounded());
  const std::thread::id threadA = threadOf(a);
  const std::thread::id threadB = threadOf(b);
  REQUIRE(threadA != threadB);
  for (int round = 0; round < 100; ++round) {
    const Hop hop = syncWait(hopWithThisThreadId(a, b));
    REQUIRE(hop.before == threadA);
    REQUIRE(hop.after == threadB);
  }
}

TEST_CASE("compiler reproducer: clang with optimization reuses std::this_thread::get_id() across a co_await",
          "[thread][coroutine][compiler]") {
  // The minimal form of the hazard thisThreadId() exists for: the same code
  // with std::this_thread::get_id(). CHECKed both ways, so a compiler that
  // changes its behaviour shows up here.
  ThreadPoolExecutor a(1, 1, 60s, WorkQueue::unbounded());
  ThreadPoolExecutor b(1, 1, 60s, WorkQueue::unbounded());
  const std::thread::id threadA = threadOf(a);
  const std::thread::id threadB = threadOf(b);
  const Hop hop = syncWait(hopWithGetId(a, b));
  CHECK(hop.before == threadA);
  INFO("clang with optimization: " << kReusesPthreadSelf);
  CHECK((hop.after == threadA) == kReusesPthreadSelf);  // stale: the value read before the hop
  CHECK((hop.after == threadB) == !kReusesPthreadSelf);
}

TEST_CASE("the current task follows a coroutine across threads: work it submits after each hop is its child",
          "[thread][coroutine][cancel]") {
  // The awaiters set the thread's current task inline, in the coroutine body,
  // on every resumption; submit() reads it (out of line) to link the child.
  // Were the thread-local's address reused across a suspension, the write
  // would land in the thread the coroutine left, and a child submitted after
  // the hop would not be cancelled with its parent.
  ThreadPoolExecutor a(1, 1, 60s, WorkQueue::unbounded());
  ThreadPoolExecutor b(1, 1, 60s, WorkQueue::unbounded());
  ThreadPoolExecutor children(2, 2, 60s, WorkQueue::unbounded());
  const std::thread::id threadA = threadOf(a);
  const std::thread::id threadB = threadOf(b);
  constexpr int kHops = 6;
  std::vector<Future<void>> kids;  // written by the coroutine before it opens the gate
  Gate allSubmitted;
  coexec::test::OpenOnExit releaseOnExit(allSubmitted);
  std::atomic<int> wrongThread{0};
  Future<void> parent = a.submit([&]() -> Task<void> {
    for (int hop = 0; hop < kHops; ++hop) {
      ThreadPoolExecutor& next = hop % 2 == 0 ? b : a;
      co_await resumeOn(next);
      if (thisThreadId() != (hop % 2 == 0 ? threadB : threadA)) wrongThread.fetch_add(1);
      kids.push_back(children.submit([](CancellationToken token) {
        const auto deadline = std::chrono::steady_clock::now() + kLong;
        while (!token.isCancellationRequested() && std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(1ms);  // bounds the wait only: the cancel ends it
      }));
    }
    allSubmitted.open();
    for (Future<void>& kid : kids)
      co_await kid;
  });
  allSubmitted.wait();
  CHECK(parent.cancel());
  CHECK_THROWS_AS(parent.get(), OperationCancelled);
  CHECK(wrongThread.load() == 0);
  REQUIRE(kids.size() == kHops);
  // Queued ones never ran, running ones saw their token: each reports the
  // cancellation, whatever the thread it was submitted from.
  for (std::size_t i = 0; i < kids.size(); ++i) {
    CAPTURE(i);
    REQUIRE(kids[i].waitFor(kLong));
    CHECK(kids[i].isCancelled());
    if (i > 0) CHECK_THROWS_AS(kids[i].get(), OperationCancelled);  // the first: consumed by the parent's co_await
  }
}
