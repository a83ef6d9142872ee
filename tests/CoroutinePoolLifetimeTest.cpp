// SPDX-License-Identifier: BSL-1.0
// The captures of a coroutine lambda run by a ThreadPoolExecutor: kept alive until the coroutine
// finishes, released before its Future settles, with nothing else submitted; a Task's frame too.
#include "coexec/ThreadPoolExecutor.h"

// Submitting coroutine tasks is in CoroutinePoolSubmitTest.cpp; affinity,
// continuations, stats and cancellation in CoroutinePoolSuspensionTest.cpp.

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "Assertions.h"

#include "CoroutinePoolTestSupport.h"
#include "CoroutineTestSupport.h"
#include "coexec/ResumeOn.h"
#include "coexec/Task.h"

using coexec::Future;
using coexec::resumeOn;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using coexec::WorkQueue;
using coexec::test::CoroutineError;
using coexec::test::Counter;
using coexec::test::currentTag;
using coexec::test::finalStats;
using coexec::test::Gate;
using coexec::test::Lifetimes;
using coexec::test::OpenOnExit;
using coexec::test::releaseSignal;
using coexec::test::requireSuspended;
using coexec::test::taggedPool;
using coexec::test::Tracker;

// ---- lifetimes ------------------------------------------------------------------------

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
