// SPDX-License-Identifier: BSL-1.0
// Scatter-gather: one request fans out to simulated backends with different
// latencies and failure rates, with the combinators:
//
//   1. invokeAny over three replicas of a service: the first good reply
//      wins; the slower replicas are cancelled (their sleeps wake at once)
//      and have settled before invokeAny returns.
//   2. invokeAny over replicas that are all down: AllFailed, with each
//      replica's error in input order.
//   3. invokeAll with a timeout over five shards: the shards past the
//      deadline are cancelled, and TimeoutError comes once they have
//      settled; then the request degrades to the shards that answer in time.
//   4. asCompleted over the same shards, submitted as Futures: partial
//      results are streamed as they arrive, and the stragglers are cancelled
//      at a deadline and still yielded, cancelled.
//
// A backend is a coroutine that sleeps for its latency (no thread is held)
// and then replies or fails; its failures come from a seeded generator, so a
// run is reproducible. Every start and end is journaled with its time since
// the request began: the printed account shows what was cancelled and when.
// The program checks what must hold whatever the machine's load (who may
// win, that every backend settled before the combinator returned, that each
// shard was yielded once), never exact timings, and exits non-zero on a
// mismatch. It runs in about a second.

#include <coexec/coexec.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using coexec::Future;
using coexec::Task;
using coexec::ThreadPoolExecutor;
using Millis = std::chrono::milliseconds;

namespace {

/// A simulated backend: how long it takes and how often it fails.
struct Backend {
  std::string name;
  Millis latency;
  double failureRate;  // 0: never fails, 1: always
};

struct Reply {
  std::string backend;
  int value = 0;
};

/// A backend that is down.
class BackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What every backend did, and when (since the start of the program's
/// request), from any thread.
class Journal {
 public:
  Journal() : start_(std::chrono::steady_clock::now()) {}

  void started(const std::string& backend) { note(backend, "started", "started", ""); }
  /// `how`: replied, failed or cancelled; `detail` is printed after it.
  void ended(const std::string& backend, const char* how, const std::string& detail) {
    note(backend, how, how, detail);
  }

  /// How `backend` ended: "replied", "failed", "cancelled", or "started"
  /// while it runs.
  std::string endingOf(const std::string& backend) const {
    std::lock_guard lock(mutex_);
    const auto it = endings_.find(backend);
    return it == endings_.end() ? "not started" : it->second;
  }
  [[nodiscard]] Millis sinceStart() const {
    return std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - start_);
  }
  void print(std::string_view heading) {
    std::lock_guard lock(mutex_);
    fmt::print("  {}\n", heading);
    for (const std::string& line : lines_)
      fmt::print("    {}\n", line);
    lines_.clear();
  }

 private:
  void note(const std::string& backend, const char* what, const char* state, const std::string& detail) {
    const Millis at = sinceStart();
    std::lock_guard lock(mutex_);
    lines_.push_back(fmt::format("[+{:4} ms] {:<10} {}{}", at.count(), backend, what, detail));
    endings_[backend] = state;
  }

  const std::chrono::steady_clock::time_point start_;
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;              // guarded by mutex_
  std::map<std::string, std::string> endings_;  // guarded by mutex_
};

/// One call to `backend`: sleeps for its latency (cancellable: the sleep
/// wakes at once with OperationCancelled when the call's task is cancelled),
/// then fails with the backend's failure rate or replies.
Task<Reply> call(const Backend& backend, bool fails, Journal& journal) {
  journal.started(backend.name);
  const Millis start = journal.sinceStart();
  try {
    co_await coexec::sleepFor(backend.latency);
  } catch (const coexec::OperationCancelled&) {
    journal.ended(
        backend.name, "cancelled",
        fmt::format(" after {} of its {} ms", (journal.sinceStart() - start).count(), backend.latency.count()));
    throw;
  }
  if (fails) {
    journal.ended(backend.name, "failed", fmt::format(" (failure rate {:.0f} %)", 100 * backend.failureRate));
    throw BackendError(backend.name + " is down");
  }
  journal.ended(backend.name, "replied", "");
  co_return Reply{backend.name, static_cast<int>(backend.latency.count())};
}

/// The calls of one request to `backends`, as callables returning a Task,
/// each failure drawn once from `rng` (so a run is reproducible).
std::vector<std::function<Task<Reply>()>> calls(const std::vector<Backend>& backends, Journal& journal,
                                                std::mt19937& rng) {
  std::vector<std::function<Task<Reply>()>> tasks;
  for (const Backend& backend : backends) {
    const bool fails = std::uniform_real_distribution<double>(0, 1)(rng) < backend.failureRate;
    tasks.push_back([&backend, &journal, fails] { return call(backend, fails, journal); });
  }
  return tasks;
}

int failures = 0;

void check(bool ok, std::string_view what) {
  fmt::print("  {:<70} {}\n", what, ok ? "ok" : "MISMATCH");
  failures += ok ? 0 : 1;
}

bool allSettled(const std::vector<Backend>& backends, const Journal& journal) {
  for (const Backend& b : backends) {
    const std::string how = journal.endingOf(b.name);
    if (how != "replied" && how != "failed" && how != "cancelled") return false;
  }
  return true;
}

Task<void> fastestReplica(ThreadPoolExecutor& pool, Journal& journal, std::mt19937& rng) {
  fmt::print("1. invokeAny over three replicas: the first good reply wins\n");
  const std::vector<Backend> replicas{{"replica-a", 150ms, 0.1}, {"replica-b", 20ms, 1.0}, {"replica-c", 60ms, 0.2}};
  auto tasks = calls(replicas, journal, rng);
  const Reply reply = co_await pool.invokeAny(tasks);
  journal.print(fmt::format("invokeAny returned {}'s reply at +{} ms:", reply.backend, journal.sinceStart().count()));
  check(reply.backend != "replica-b", "the winner is a replica that is up");
  check(allSettled(replicas, journal), "every replica had settled when invokeAny returned");
  check(journal.endingOf("replica-b") == "failed", "replica-b (always down) failed, and the others went on");
  const std::string loser = reply.backend == "replica-a" ? "replica-c" : "replica-a";
  const std::string how = journal.endingOf(loser);
  check(how == "cancelled" || how == "replied" || how == "failed",
        "the other replica was cancelled (or had just replied, or failed)");
}

Task<void> allReplicasDown(ThreadPoolExecutor& pool, Journal& journal, std::mt19937& rng) {
  fmt::print("\n2. invokeAny over replicas that are all down: AllFailed\n");
  const std::vector<Backend> replicas{{"mirror-1", 30ms, 1.0}, {"mirror-2", 10ms, 1.0}, {"mirror-3", 20ms, 1.0}};
  auto tasks = calls(replicas, journal, rng);
  std::vector<std::string> errors;
  try {
    (void)co_await pool.invokeAny(tasks);
  } catch (const coexec::AllFailed& e) {
    for (const std::exception_ptr& error : e.errors()) {
      try {
        std::rethrow_exception(error);
      } catch (const BackendError& down) {
        errors.emplace_back(down.what());
      }
    }
  }
  journal.print(fmt::format("AllFailed at +{} ms, errors in input order:", journal.sinceStart().count()));
  for (const std::string& e : errors)
    fmt::print("    - {}\n", e);
  check(errors == std::vector<std::string>{"mirror-1 is down", "mirror-2 is down", "mirror-3 is down"},
        "AllFailed holds every replica's error, in input order");
}

const std::vector<Backend> kShards{{"shard-1", 30ms, 0.0},
                                   {"shard-2", 60ms, 0.0},
                                   {"shard-3", 90ms, 0.0},
                                   {"shard-4", 120ms, 0.0},
                                   {"shard-5", 600ms, 0.0}};

Task<void> fullSetWithDeadline(ThreadPoolExecutor& pool, Journal& journal, std::mt19937& rng) {
  fmt::print("\n3. invokeAll with a 250 ms timeout over five shards\n");
  auto tasks = calls(kShards, journal, rng);
  bool timedOut = false;
  try {
    (void)co_await pool.invokeAll(tasks, 250ms);
  } catch (const coexec::TimeoutError&) {
    timedOut = true;
  }
  journal.print(
      fmt::format("invokeAll {} at +{} ms:", timedOut ? "timed out" : "returned", journal.sinceStart().count()));
  check(timedOut, "the full set missed its deadline: TimeoutError");
  check(journal.endingOf("shard-5") == "cancelled", "shard-5 (600 ms) was cancelled at the deadline");
  check(allSettled(kShards, journal), "every shard had settled when the TimeoutError came");

  // Degrade: ask again without the slow shard, with a generous deadline.
  std::vector<Backend> fast(kShards.begin(), kShards.end() - 1);
  auto retry = calls(fast, journal, rng);
  const std::vector<Reply> replies = co_await pool.invokeAll(retry, 5s);
  journal.print(fmt::format("the retry without shard-5 returned {} replies at +{} ms:", replies.size(),
                            journal.sinceStart().count()));
  bool inOrder = replies.size() == fast.size();
  for (std::size_t i = 0; inOrder && i < replies.size(); ++i)
    inOrder = replies[i].backend == fast[i].name;
  check(inOrder, "invokeAll returned the four replies in input order");
}

Task<void> streamPartialResults(ThreadPoolExecutor& pool, Journal& journal, std::mt19937& rng) {
  fmt::print("\n4. asCompleted over the shards: stream replies, cancel the stragglers at 250 ms\n");
  std::vector<Future<Reply>> futures;
  for (auto& task : calls(kShards, journal, rng))
    futures.push_back(pool.submit(std::move(task)));
  auto completions = coexec::asCompleted(std::move(futures));
  const Millis deadline = journal.sinceStart() + 250ms;
  // A timer on the pool cancels whatever has not replied by the deadline.
  auto stragglers = pool.schedule([&completions] { return completions.cancelRemaining(); }, 250ms);
  int total = 0;
  int replied = 0;
  int cancelled = 0;
  std::vector<std::string> seen;
  while (std::optional<Future<Reply>> done = co_await completions.next()) {
    try {
      const Reply reply = done->get();  // settled: returns (or throws) at once
      total += reply.value;
      ++replied;
      seen.push_back(reply.backend);
      fmt::print("    [+{:4} ms] partial result: {} shard(s), total {}\n", journal.sinceStart().count(), replied,
                 total);
    } catch (const coexec::OperationCancelled&) {
      ++cancelled;
      seen.emplace_back("(cancelled)");
    }
  }
  // Every shard has settled: the timer is of no use if it has not fired. It
  // refers to `completions`, so it must be over before that goes.
  (void)stragglers.cancel();
  Future<std::size_t>& timer = stragglers;
  try {
    (void)co_await timer;
  } catch (const coexec::OperationCancelled&) {
    // cancelled before it was due
  }
  journal.print(fmt::format("every shard yielded at +{} ms (deadline was +{} ms):", journal.sinceStart().count(),
                            deadline.count()));
  check(seen.size() == kShards.size(), "each shard was yielded exactly once");
  check(replied + cancelled == static_cast<int>(kShards.size()), "each yielded shard replied or was cancelled");
  check(journal.endingOf("shard-5") == "cancelled", "shard-5 was cancelled at the deadline and still yielded");
  check(replied >= 1, "at least one shard replied before the deadline");
}

Task<void> request(ThreadPoolExecutor& pool) {
  Journal journal;
  std::mt19937 rng(7);
  co_await fastestReplica(pool, journal, rng);
  co_await allReplicasDown(pool, journal, rng);
  co_await fullSetWithDeadline(pool, journal, rng);
  co_await streamPartialResults(pool, journal, rng);
}

}  // namespace

int main() try {
  coexec::ThreadPoolOptions options;
  options.name = "backends";
  options.corePoolSize = 2;
  options.maximumPoolSize = 2;
  options.workQueue = coexec::WorkQueue::bounded(64);
  ThreadPoolExecutor pool(options);
  fmt::print("coexec scatter-gather: pool '{}' with {} threads; backends are coroutines that sleep\n\n", pool.name(),
             pool.corePoolSize());
  const auto start = std::chrono::steady_clock::now();
  coexec::syncWait(request(pool));
  pool.shutdown();
  (void)pool.awaitTermination(std::chrono::seconds(10));
  const coexec::PoolStats stats = pool.stats();
  fmt::print("\n{}\n", stats);
  fmt::print("done in {} ms\n", std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - start).count());
  if (failures != 0) {
    fmt::print("{} check(s) failed\n", failures);
    return 1;
  }
  fmt::print("every check held\n");
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "scatter_gather: {}\n", e.what());
  return 1;
}
