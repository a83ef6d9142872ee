// SPDX-License-Identifier: BSL-1.0
// The coexec side of every mapping in docs/migrating-from-java.md and
// docs/migrating-from-python.md: each snippet between `snippet:begin <name>`
// and `snippet:end` is copied verbatim into the doc (checked by the test
// docs.migrationSnippetsMatch), and each TEST_CASE runs it and checks its
// result.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "CoroutineTestSupport.h"
#include "TestSupport.h"
#include "coexec/coexec.h"

using namespace std::chrono_literals;
using coexec::test::Gate;
using coexec::test::OpenOnExit;
using coexec::test::throwsA;

namespace {

// snippet:begin completable-future
coexec::Task<std::string> priceLabel(coexec::ThreadPoolExecutor& pool, int sku) {
  coexec::Future<int> cents = pool.submit([sku] { return sku * 250; });  // supplyAsync(..., pool)
  const int value = co_await cents;  // thenApply: the coroutine goes on when the value is there
  co_return std::to_string(value / 100) + "." + std::to_string(value % 100);
}
// snippet:end

// snippet:begin invoke-all
coexec::Task<int> sumOfSquares(coexec::ThreadPoolExecutor& pool, std::vector<int> parts) {
  std::vector<std::function<int()>> tasks;
  for (int p : parts)
    tasks.push_back([p] { return p * p; });
  auto all = pool.invokeAll(tasks, 5s);  // results in input order, or TimeoutError once all have settled
  std::vector<int> squares = co_await all;
  co_return std::accumulate(squares.begin(), squares.end(), 0);
}
// snippet:end

// snippet:begin invoke-any
coexec::Task<std::string> fastestReplica(coexec::ThreadPoolExecutor& pool) {
  std::vector<std::function<std::string()>> replicas{
      []() -> std::string { throw std::runtime_error("replica a is down"); }, [] { return std::string("replica b"); }};
  auto any = pool.invokeAny(replicas);  // the first success; AllFailed (every error) if none
  co_return co_await any;
}
// snippet:end

// snippet:begin as-completed
coexec::Task<int> sumAsTheyComplete(coexec::ThreadPoolExecutor& pool) {
  std::vector<coexec::Future<int>> futures;
  for (int i = 1; i <= 4; ++i)
    futures.push_back(pool.submit([i] { return i; }));
  auto completions = coexec::asCompleted(std::move(futures));
  int sum = 0;
  while (std::optional<coexec::Future<int>> done = co_await completions.next())
    sum += done->get();  // settled already: returns (or throws) at once
  co_return sum;
}
// snippet:end

// snippet:begin fork-join
coexec::Task<long> fib(coexec::ThreadPoolExecutor& pool, int n) {
  if (n < 2) co_return n;
  coexec::Future<long> left = pool.submit(fib(pool, n - 1));  // fork
  coexec::Future<long> right = pool.submit(fib(pool, n - 2));
  const long l = co_await left;  // join: the coroutine suspends, the worker runs other tasks
  co_return l + co_await right;
}
// snippet:end

// snippet:begin task-local
const coexec::TaskLocal<std::string> requestId;  // ScopedValue<String> REQUEST_ID = ScopedValue.newInstance();

coexec::Task<std::string> handle(coexec::ThreadPoolExecutor& pool) {
  coexec::TaskLocal<std::string>::Scope scope(requestId, "req-7");  // ScopedValue.where(REQUEST_ID, "req-7")
  coexec::Future<std::string> child = pool.submit([] { return *requestId.get(); });  // inherited
  std::string seen = co_await child;
  co_await coexec::sleepFor(1ms);  // still bound after any co_await, on any thread
  co_return seen + "/" + *requestId.get();
}
// snippet:end

// snippet:begin py-wait
coexec::Task<std::size_t> firstCompleted(coexec::ThreadPoolExecutor& pool) {
  coexec::Future<int> fast = pool.submit([] { return 1; });
  coexec::Future<int> slow = pool.submit([](coexec::CancellationToken token) {
    while (!token.isCancellationRequested())
      std::this_thread::yield();
    return 2;
  });
  auto first = coexec::whenAny(fast, slow);  // FIRST_COMPLETED; the others are cancelled and awaited
  auto winner = co_await first;
  co_return winner.index;
}

coexec::Task<int> allCompleted(coexec::ThreadPoolExecutor& pool) {
  coexec::Future<int> a = pool.submit([] { return 1; });
  coexec::Future<std::string> b = pool.submit([] { return std::string("two"); });
  auto both = coexec::whenAll(a, b);  // ALL_COMPLETED; the first failure is rethrown once all settled
  auto [one, two] = co_await both;
  co_return one + static_cast<int>(two.size());
}
// snippet:end

// snippet:begin py-task-group
coexec::Task<int> gather(coexec::ThreadPoolExecutor& pool) {
  coexec::TaskGroup group(pool);  // async with asyncio.TaskGroup() as group:
  coexec::Future<int> a = group.spawn([] { return 20; });
  coexec::Future<int> b = group.spawn([] { return 22; });
  co_await group.join();  // every child settled; the first failure cancelled the rest and is rethrown
  co_return a.get() + b.get();
}
// snippet:end

// snippet:begin py-timeout
coexec::Task<void> slowBackend() { co_await coexec::sleepFor(1h); }

coexec::Task<bool> callWithBudget() {
  auto timed = coexec::withTimeout(slowBackend(), 10ms);  // async with asyncio.timeout(0.01):
  try {
    co_await timed;
  } catch (const coexec::TimeoutError&) {  // the work was cancelled and has settled
    co_return false;
  }
  co_return true;
}
// snippet:end

}  // namespace

TEST_CASE("java: new ThreadPoolExecutor(core, max, keepAlive, ArrayBlockingQueue, CallerRunsPolicy)",
          "[migration][java]") {
  // snippet:begin java-tpe
  coexec::ThreadPoolExecutor pool(2, 4, 30s, coexec::WorkQueue::bounded(100), coexec::RejectionPolicy::callerRuns());
  coexec::Future<int> answer = pool.submit([] { return 6 * 7; });
  int value = answer.get();  // blocks this (non-pool) thread; co_await it from a coroutine
  // snippet:end
  CHECK(value == 42);
  CHECK(pool.corePoolSize() == 2);
  CHECK(pool.maximumPoolSize() == 4);
}

TEST_CASE("java: Executors.newFixedThreadPool and a ThreadFactory", "[migration][java]") {
  // snippet:begin java-options
  coexec::ThreadPoolOptions options;
  options.name = "orders";  // threads orders-1, orders-2, ...
  options.corePoolSize = 4;
  options.maximumPoolSize = 4;
  options.workQueue = coexec::WorkQueue::bounded(10'000);  // not unbounded: the queue is the back-pressure
  options.rejectionPolicy = coexec::RejectionPolicy::abort();
  options.threadFactory = [](std::string threadName, std::function<void()> body) {
    return std::thread([threadName, body = std::move(body)] {
      // name the thread, pin it, raise its priority... then:
      body();
    });
  };
  coexec::ThreadPoolExecutor pool(options);
  // snippet:end
  coexec::Future<std::string> name = pool.submit([] { return std::string("ok"); });
  CHECK(name.get() == "ok");
  CHECK(pool.name() == "orders");
  CHECK(pool.stats().queueCapacity == 10'000);
}

TEST_CASE("java: ScheduledExecutorService.schedule and scheduleAtFixedRate", "[migration][java]") {
  coexec::ThreadPoolExecutor pool(1, 1, 0s, coexec::WorkQueue::bounded(16));
  // snippet:begin java-scheduled
  coexec::ScheduledFuture<int> later = pool.schedule([] { return 1; }, 5ms);
  std::atomic<int> ticks{0};
  coexec::PeriodicHandle tick =
      pool.scheduleAtFixedRate([&] { ++ticks; }, 0ms, 1ms, coexec::PeriodicOptions{.continueOnError = true});
  int first = later.get();
  while (ticks.load() < 3)
    std::this_thread::yield();
  tick.cancel();  // no run starts after this
  tick.get();     // returns: the schedule ended by cancel(); a failure would be rethrown here
  // snippet:end
  CHECK(first == 1);
  CHECK(ticks.load() >= 3);
}

TEST_CASE("java: Future.get and cancel(true)", "[migration][java]") {
  coexec::ThreadPoolExecutor pool(1, 1, 0s, coexec::WorkQueue::bounded(16));
  // snippet:begin java-future
  coexec::Future<int> slow = pool.submit([](coexec::CancellationToken token) {
    while (!token.isCancellationRequested())  // cooperative: no Thread.interrupt()
      std::this_thread::yield();
    token.throwIfCancellationRequested();
    return 0;
  });
  bool cancelled = slow.cancel();  // settles the Future; the task sees its token
  // slow.get() now throws coexec::OperationCancelled
  // snippet:end
  CHECK(cancelled);
  CHECK(throwsA<coexec::OperationCancelled>([&] { (void)slow.get(); }));
}

TEST_CASE("java: CompletableFuture.supplyAsync(...).thenApply(...)", "[migration][java]") {
  coexec::ThreadPoolExecutor pool(2, 2, 0s, coexec::WorkQueue::bounded(16));
  CHECK(coexec::syncWait(priceLabel(pool, 3)) == "7.50");
}

TEST_CASE("java: invokeAll and invokeAny", "[migration][java]") {
  coexec::ThreadPoolExecutor pool(2, 2, 0s, coexec::WorkQueue::bounded(16));
  CHECK(coexec::syncWait(sumOfSquares(pool, {1, 2, 3})) == 14);
  CHECK(coexec::syncWait(fastestReplica(pool)) == "replica b");
}

TEST_CASE("java: ExecutorCompletionService, python: as_completed", "[migration][java][python]") {
  coexec::ThreadPoolExecutor pool(2, 2, 0s, coexec::WorkQueue::bounded(16));
  CHECK(coexec::syncWait(sumAsTheyComplete(pool)) == 10);
}

TEST_CASE("java: ForkJoinPool and RecursiveTask", "[migration][java]") {
  coexec::ThreadPoolExecutor pool(2, 2, 0s, coexec::WorkQueue::unbounded());
  coexec::Future<long> result = pool.submit(fib(pool, 15));
  CHECK(result.get() == 610);
}

TEST_CASE("java: ThreadLocal and ScopedValue", "[migration][java]") {
  coexec::ThreadPoolExecutor pool(2, 2, 0s, coexec::WorkQueue::bounded(16));
  coexec::Future<std::string> seen = pool.submit(handle(pool));
  CHECK(seen.get() == "req-7/req-7");
  CHECK(requestId.get() == nullptr);
}

TEST_CASE("python: ThreadPoolExecutor.submit and map", "[migration][python]") {
  // snippet:begin py-submit-map
  coexec::ThreadPoolExecutor pool(5, 5, 0s, coexec::WorkQueue::bounded(1000));  // max_workers=5
  coexec::Future<int> four = pool.submit([] { return 2 + 2; });                 // pool.submit(fn)
  int result = four.get();                                                      // future.result()

  std::vector<coexec::Future<int>> futures;  // pool.map(square, [1, 2, 3])
  for (int x : {1, 2, 3})
    futures.push_back(pool.submit([x] { return x * x; }));
  std::vector<int> squares;
  for (coexec::Future<int>& f : futures)
    squares.push_back(f.get());  // in input order; the first exception is rethrown here
  // snippet:end
  CHECK(result == 4);
  CHECK(squares == std::vector<int>{1, 4, 9});
}

TEST_CASE("python: wait(FIRST_COMPLETED) and wait(ALL_COMPLETED)", "[migration][python]") {
  coexec::ThreadPoolExecutor pool(2, 2, 0s, coexec::WorkQueue::bounded(16));
  CHECK(coexec::syncWait(firstCompleted(pool)) == 0);
  CHECK(coexec::syncWait(allCompleted(pool)) == 4);
}

TEST_CASE("python: shutdown(wait=True) and shutdown(cancel_futures=True)", "[migration][python]") {
  Gate gate;
  coexec::ThreadPoolExecutor pool(1, 1, 0s, coexec::WorkQueue::bounded(16));
  OpenOnExit opener(gate);
  coexec::Future<void> running = pool.submit([&] { gate.wait(); });
  coexec::Future<int> queued = pool.submit([] { return 1; });
  coexec::Future<int> queuedToo = pool.submit([] { return 2; });
  gate.open();
  // snippet:begin py-shutdown
  std::vector<coexec::PendingTask> unrun = pool.shutdownNow();  // cancel_futures=True: queued tasks come back
  unrun.clear();  // dropped: their Futures report BrokenPromise (or run them: unrun[i].run())
  bool terminated = pool.awaitTermination(10s);  // wait=True (the destructor, close(), waits too)
  // snippet:end
  CHECK(terminated);
  running.get();
  // Each queued task was either returned (and dropped) or taken by the worker just before.
  for (coexec::Future<int>* f : {&queued, &queuedToo}) {
    CHECK(f->isDone());
    try {
      (void)f->get();
    } catch (const coexec::BrokenPromise&) {
    }
  }
}

TEST_CASE("python: asyncio.TaskGroup and asyncio.timeout", "[migration][python]") {
  coexec::ThreadPoolExecutor pool(2, 2, 0s, coexec::WorkQueue::bounded(16));
  CHECK(coexec::syncWait(gather(pool)) == 42);
  CHECK_FALSE(coexec::syncWait(callWithBudget()));
}

TEST_CASE("node: workerpool.pool({minWorkers, maxWorkers, maxQueueSize}), exec, terminate", "[migration][node]") {
  // snippet:begin node-workerpool
  coexec::ThreadPoolExecutor workers(2, 4, 60s, coexec::WorkQueue::bounded(100));  // min 2, max 4, queue 100
  coexec::Future<int> sum = workers.submit([] { return 1 + 2; });                  // pool.exec(fn)
  int three = sum.get();                                                           // or co_await sum
  std::vector<coexec::PendingTask> pending = workers.shutdownNow();                // pool.terminate(true)
  workers.close();                                                                 // waits for the running tasks
  // snippet:end
  CHECK(three == 3);
  CHECK(pending.empty());
  CHECK(workers.isTerminated());
}
