// SPDX-License-Identifier: BSL-1.0
// The ledger under a storm: several producers submit and execute quick,
// throwing, slow and token-aware tasks, cancel some of them, against pools of
// every queue kind and rejection policy; the pool is then stopped with
// shutdownNow (during or after the storm) or shut down gracefully. Afterwards:
//
//   taskCount == completed + failed + cancelled + discarded + drained + queueSize
//                + localQueueSize
//
// and the counters agree with what the task bodies themselves saw; every
// Future the test holds settles (none hangs) with an outcome its task could
// have had. A monitor samples stats() during the storm and checks the
// invariants that hold at every instant. Fixed seeds: a failure reproduces.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <latch>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "Assertions.h"
#include <fmt/format.h>

#include "TestSupport.h"
#include "coexec/coexec.h"

using namespace std::chrono_literals;

using coexec::BrokenPromise;
using coexec::CancellationToken;
using coexec::Future;
using coexec::OperationCancelled;
using coexec::PendingTask;
using coexec::PoolState;
using coexec::PoolStats;
using coexec::RejectedExecution;
using coexec::RejectionPolicy;
using coexec::TaskInfo;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::test::checkLedgerAddsUp;
using coexec::test::kLong;

namespace {

/// True on the producers and the test thread: a body running there was run by
/// the caller (callerRuns) or by the test (a drained PendingTask), not by a
/// pool thread, and no pool counter may count it.
thread_local bool tlsOutsidePool = false;

struct StormError {
  int value;
};

enum class Kind { quick, throwing, slowReturning, slowThrowingCancelled };
enum class Ending { shutdownNowAfter, shutdownNowDuring, shutdownAfter };

struct Config {
  const char* label;
  std::size_t core;
  std::size_t max;
  WorkQueue queue;
  RejectionPolicy policy;
};

/// What the task bodies saw, to check the pool's counters against.
struct Tally {
  std::atomic<std::uint64_t> returnedOnPool{0};
  std::atomic<std::uint64_t> thrownOnPool{0};         // own error (StormError)
  std::atomic<std::uint64_t> executeThrownOnPool{0};  // subset of thrownOnPool
  std::atomic<std::uint64_t> cancelThrownOnPool{0};   // OperationCancelled
  std::atomic<std::uint64_t> uncaught{0};
  std::atomic<std::uint64_t> uncaughtOther{0};  // not a StormError
  std::atomic<std::uint64_t> submissions{0};
  std::atomic<std::uint64_t> rejectedCaught{0};
  std::atomic<std::uint64_t> producerSurprises{0};
};

/// A Future the test holds and what its task was.
struct Held {
  Future<int> future;
  Kind kind;
  int value;
  bool cancelledByUs = false;
};

/// The body every storm task runs.
int body(Tally& tally, Kind kind, bool isExecute, int value, const CancellationToken& token) {
  const bool onPool = !tlsOutsidePool;
  switch (kind) {
    case Kind::quick: break;
    case Kind::throwing:
      if (onPool) {
        ++tally.thrownOnPool;
        if (isExecute) ++tally.executeThrownOnPool;
      }
      throw StormError{value};
    case Kind::slowReturning:
    case Kind::slowThrowingCancelled: {
      const auto until = std::chrono::steady_clock::now() + 200us;
      while (std::chrono::steady_clock::now() < until) {
        if (token.isCancellationRequested()) {
          if (kind == Kind::slowThrowingCancelled) {
            if (onPool) ++tally.cancelThrownOnPool;
            throw OperationCancelled();
          }
          break;
        }
        std::this_thread::yield();
      }
      break;
    }
  }
  if (onPool) ++tally.returnedOnPool;
  return value;
}

/// Samples stats() during the storm and records the first broken invariant.
class Monitor {
 public:
  explicit Monitor(ThreadPoolExecutor& pool) : thread_([this, &pool] { run(pool); }) {}
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;
  ~Monitor() { stop(); }

  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::string violation() const {
    std::lock_guard lock(mutex_);
    return violation_;
  }
  std::uint64_t samples() const { return samples_; }

 private:
  void run(ThreadPoolExecutor& pool) {
    PoolStats previous = pool.stats();
    while (!stop_) {
      const PoolStats s = pool.stats();
      ++samples_;
      if (s.activeCount > s.poolSize) fail("activeCount > poolSize", s);
      if (s.poolSize > s.largestPoolSize) fail("poolSize > largestPoolSize", s);
      if (s.poolSize > s.maximumPoolSize) fail("poolSize > maximumPoolSize", s);
      if (s.queueSize > s.queueCapacity) fail("queueSize > queueCapacity", s);
      if (s.taskCount < previous.taskCount) fail("taskCount went down", s);
      if (s.completedTaskCount < previous.completedTaskCount) fail("completedTaskCount went down", s);
      if (s.rejectedCount < previous.rejectedCount) fail("rejectedCount went down", s);
      if (s.largestPoolSize < previous.largestPoolSize) fail("largestPoolSize went down", s);
      if (static_cast<int>(s.state) < static_cast<int>(previous.state)) fail("state went back", s);
      previous = s;
      std::this_thread::sleep_for(100us);
    }
  }
  void fail(const char* what, const PoolStats& s) {
    std::lock_guard lock(mutex_);
    if (violation_.empty()) violation_ = fmt::format("{}: {}", what, s);
  }

  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> samples_{0};
  mutable std::mutex mutex_;
  std::string violation_;
  std::thread thread_;  // last: starts once the members above exist
};

constexpr int kProducers = 3;
constexpr int kOpsPerProducer = 600;

}  // namespace

TEST_CASE("the ledger adds up and every Future settles after a storm of submissions cancels and throws",
          "[stress][ledger]") {
  const Config config = GENERATE(values<Config>({
      {"bounded(8) callerRuns core 1 max 3", 1, 3, WorkQueue::bounded(8), RejectionPolicy::callerRuns()},
      {"bounded(2) callerRuns core 1 max 1", 1, 1, WorkQueue::bounded(2), RejectionPolicy::callerRuns()},
      {"bounded(4) discardOldest core 2 max 2", 2, 2, WorkQueue::bounded(4), RejectionPolicy::discardOldest()},
      {"synchronous abort core 1 max 4", 1, 4, WorkQueue::synchronous(), RejectionPolicy::abort()},
      {"synchronous discard core 0 max 3", 0, 3, WorkQueue::synchronous(), RejectionPolicy::discard()},
      {"synchronous discardOldest core 1 max 2", 1, 2, WorkQueue::synchronous(), RejectionPolicy::discardOldest()},
      {"priority(8) discardOldest core 1 max 2", 1, 2, WorkQueue::priority(8), RejectionPolicy::discardOldest()},
      {"priority(6) abort core 2 max 3", 2, 3, WorkQueue::priority(6), RejectionPolicy::abort()},
      {"unbounded abort core 2 max 2", 2, 2, WorkQueue::unbounded(), RejectionPolicy::abort()},
  }));
  const Ending ending = GENERATE(Ending::shutdownNowAfter, Ending::shutdownNowDuring, Ending::shutdownAfter);
  const char* endingName = ending == Ending::shutdownNowAfter    ? "shutdownNow after the storm"
                           : ending == Ending::shutdownNowDuring ? "shutdownNow during the storm"
                                                                 : "shutdown after the storm";
  INFO(config.label << ", " << endingName);
  const std::string policyName(config.policy.name());
  tlsOutsidePool = true;

  Tally tally;
  std::vector<std::vector<Held>> held(kProducers);
  std::vector<PendingTask> drained;
  bool drainedOnce = false;

  ThreadPoolOptions options;
  options.name = "storm";
  options.corePoolSize = config.core;
  options.maximumPoolSize = config.max;
  options.keepAliveTime = 5ms;  // threads come and go during the storm
  options.workQueue = config.queue;
  options.rejectionPolicy = config.policy;
  options.uncaughtExceptionHandler = [&tally](std::exception_ptr error, const TaskInfo&) {
    ++tally.uncaught;
    try {
      std::rethrow_exception(error);
    } catch (const StormError&) {
    } catch (...) {
      ++tally.uncaughtOther;
    }
  };
  ThreadPoolExecutor pool(std::move(options));
  Monitor monitor(pool);

  std::latch halfway(kProducers);
  {
    std::vector<std::jthread> producers;
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        tlsOutsidePool = true;
        std::mt19937 random(20240601u + static_cast<unsigned>(p));
        auto& mine = held[static_cast<std::size_t>(p)];
        for (int op = 0; op < kOpsPerProducer; ++op) {
          if (op == kOpsPerProducer / 2) halfway.count_down();
          const int value = p * 100'000 + op;
          const int priority = static_cast<int>(random() % 5) - 2;
          const unsigned roll = random() % 100;
          if (roll >= 92) {  // cancel one of ours
            if (!mine.empty()) {
              Held& victim = mine[random() % mine.size()];
              if (victim.future.cancel()) victim.cancelledByUs = true;
            }
            continue;
          }
          const bool isExecute = roll >= 70;
          const Kind kind = roll < 35   ? Kind::quick
                            : roll < 50 ? Kind::throwing
                            : roll < 62 ? Kind::slowReturning
                            : roll < 70 ? Kind::slowThrowingCancelled
                            : roll < 80 ? Kind::quick
                            : roll < 88 ? Kind::throwing
                                        : Kind::slowReturning;
          ++tally.submissions;
          try {
            if (isExecute) {
              pool.execute(
                  [&tally, kind, value](CancellationToken token) { (void)body(tally, kind, true, value, token); },
                  priority);
            } else {
              mine.push_back(Held{
                  pool.submit(
                      [&tally, kind, value](CancellationToken token) { return body(tally, kind, false, value, token); },
                      priority),
                  kind, value});
            }
          } catch (const RejectedExecution&) {
            ++tally.rejectedCaught;
          } catch (const StormError&) {
            // a caller-run execute() task threw on this thread
          } catch (...) {
            ++tally.producerSurprises;  // nothing else may come out of execute()/submit()
          }
        }
      });
    }
    if (ending == Ending::shutdownNowDuring) {
      halfway.wait();
      drained = pool.shutdownNow();
      drainedOnce = true;
    }
  }  // producers join

  if (ending == Ending::shutdownNowAfter) {
    drained = pool.shutdownNow();
    drainedOnce = true;
  } else if (ending == Ending::shutdownAfter) {
    pool.shutdown();
  }
  const bool terminated = pool.awaitTermination(kLong);
  monitor.stop();
  REQUIRE(terminated);

  // The caller's share of the drained tasks: run half, drop the rest.
  std::uint64_t droppedLive = 0;
  for (std::size_t i = 0; i < drained.size(); ++i) {
    PendingTask& task = drained[i];
    REQUIRE(task.valid());
    if (i % 2 == 0) {
      try {
        task.run();
      } catch (const StormError&) {
      }
    } else {
      if (task.hasFuture() && !task.isCancelled()) ++droppedLive;
      task = PendingTask();
    }
  }

  const PoolStats s = pool.stats();
  INFO(fmt::format("{}", s));
  INFO("submissions " << tally.submissions.load() << ", rejections caught " << tally.rejectedCaught.load()
                      << ", drained " << drained.size() << ", monitor samples " << monitor.samples());
  CHECK(monitor.violation() == "");
  CHECK(s.state == PoolState::terminated);
  CHECK(s.poolSize == 0u);
  CHECK(s.activeCount == 0u);
  CHECK(s.queueSize == 0u);

  // The ledger.
  checkLedgerAddsUp(s);
  CHECK(s.drainedCount == drained.size());
  if (!drainedOnce) CHECK(s.drainedCount == 0u);

  // The counters agree with what the bodies saw on pool threads.
  CHECK(s.completedTaskCount == tally.returnedOnPool.load());
  CHECK(s.failedCount == tally.thrownOnPool.load());
  CHECK(tally.uncaught.load() == tally.executeThrownOnPool.load());
  CHECK(tally.uncaughtOther.load() == 0u);
  CHECK(tally.producerSurprises.load() == 0u);
  CHECK(s.cancelledCount >= tally.cancelThrownOnPool.load());

  // Every submission was admitted or reached the policy (discardOldest re-admits
  // the task it evicted for, so that one is in both).
  CHECK(s.taskCount <= tally.submissions.load());
  if (policyName == "discardOldest") {
    CHECK(s.taskCount + s.rejectedCount >= tally.submissions.load());
  } else {
    CHECK(s.taskCount + s.rejectedCount == tally.submissions.load());
  }
  if (policyName == "abort") CHECK(s.rejectedCount == tally.rejectedCaught.load());
  if (policyName != "discardOldest") CHECK(s.discardedCount == 0u);

  // Every Future settles, with an outcome its task could have had.
  std::uint64_t broken = 0;
  std::uint64_t unexpected = 0;
  std::uint64_t unsettled = 0;
  std::string firstUnexpected;
  auto note = [&](const std::string& what) {
    ++unexpected;
    if (firstUnexpected.empty()) firstUnexpected = what;
  };
  for (auto& mine : held) {
    for (Held& h : mine) {
      if (!h.future.waitFor(kLong)) {
        ++unsettled;
        continue;
      }
      try {
        const int got = h.future.get();
        if (h.cancelledByUs) note("a Future cancelled by the test returned a value");
        if (h.kind == Kind::throwing) note("a throwing task's Future returned a value");
        if (got != h.value) note(fmt::format("a Future returned {} instead of {}", got, h.value));
      } catch (const StormError& e) {
        if (h.cancelledByUs) note("a Future cancelled by the test reported the task's own error");
        if (h.kind != Kind::throwing) note("a non-throwing task's Future reported StormError");
        if (e.value != h.value) note("a Future reported another task's error");
      } catch (const OperationCancelled&) {
        if (!h.cancelledByUs && h.kind != Kind::slowThrowingCancelled && ending == Ending::shutdownAfter) {
          note("a Future nobody cancelled reported OperationCancelled");
        }
      } catch (const RejectedExecution&) {
        if (h.cancelledByUs) note("a Future cancelled by the test reported RejectedExecution");
        if (policyName == "abort") note("under abort a Future reported RejectedExecution");
      } catch (const BrokenPromise&) {
        if (h.cancelledByUs) note("a Future cancelled by the test reported BrokenPromise");
        ++broken;
      } catch (const std::exception& e) {
        note(std::string("unexpected exception: ") + e.what());
      } catch (...) {
        note("unexpected non-standard exception");
      }
    }
  }
  INFO(firstUnexpected);
  CHECK(unsettled == 0u);
  CHECK(unexpected == 0u);
  CHECK(broken == droppedLive);
}
