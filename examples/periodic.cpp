// SPDX-License-Identifier: BSL-1.0
// A small job scheduler: one pool runs a periodic metrics flush, a poll that
// backs off while its backend is down, a report job that fails, and two
// one-shot jobs.
//
//   metrics flush  scheduleAtFixedRate, every 5 ms on a fixed grid; runs never
//                  overlap, and a slow flush delays the next one instead of
//                  causing a burst of missed ones; shutdown ends it
//   queue poll     scheduleWithFixedDelay, 2 ms after each poll returns; with
//                  PeriodicOptions{.continueOnError = true} a failed poll is
//                  reported and the schedule goes on; the poller backs off by
//                  skipping polls after each failure
//   report job     scheduleAtFixedRate; its second run throws: the error reaches
//                  the uncaught-exception handler once, ends the schedule, and
//                  the handle's get() rethrows it
//   cache warm-up  schedule() in 50 ms: delay(), then its result
//   reminder       schedule() in an hour, then cancel(): its timer goes at once
//
// It runs on the steady clock with short periods, so how many runs happen
// depends on the machine's load: the program checks final states and bounds,
// never an exact count of timed runs. Exits non-zero on a mismatch.

#include <coexec/coexec.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

namespace {

constexpr auto kFlushPeriod = 5ms;
constexpr auto kPollDelay = 2ms;
constexpr auto kWarmUpDelay = 50ms;

int failures = 0;

void check(bool ok, std::string_view what) {
  fmt::print("{} {}\n", ok ? "ok  " : "FAIL", what);
  failures += ok ? 0 : 1;
}

/// Checks `done` every millisecond until it holds, or gives up after 10 s.
bool eventually(const std::function<bool()>& done) {
  const Steady::time_point limit = Steady::now() + 10s;
  while (!done()) {
    if (Steady::now() >= limit) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

double ms(Steady::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

/// What the pool's uncaught-exception handler received.
class ErrorLog {
 public:
  void record(std::exception_ptr error, const coexec::TaskInfo& info) {
    std::string what = "(not a std::exception)";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    std::lock_guard lock(mutex_);
    fmt::print("     handler: '{}' on {}\n", what, info.threadName);
    messages_.push_back(std::move(what));
  }
  /// How many recorded errors contain `text`.
  std::size_t count(std::string_view text) const {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const std::string& message : messages_)
      n += message.find(text) != std::string::npos ? 1 : 0;
    return n;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> messages_;
};

/// The metrics flush. Its third flush is slow: it lasts over four periods.
class Metrics {
 public:
  void flush() {
    // Runs of one schedule never overlap, even on a pool with threads to spare.
    if (inFlight_.fetch_add(1) != 0) overlapped_ = true;
    std::size_t n = 0;
    {
      std::lock_guard lock(mutex_);
      starts_.push_back(Steady::now());
      n = starts_.size();
    }
    if (n == 3) std::this_thread::sleep_for(22ms);
    inFlight_.fetch_sub(1);
  }
  std::vector<Steady::time_point> starts() const {
    std::lock_guard lock(mutex_);
    return starts_;
  }
  bool overlapped() const { return overlapped_.load(); }

 private:
  mutable std::mutex mutex_;
  std::vector<Steady::time_point> starts_;
  std::atomic<int> inFlight_{0};
  std::atomic<bool> overlapped_{false};
};

/// A poll of a backend that is down for the first three attempts. After the
/// n-th failure the poller skips the next 2^n - 1 polls (1, 3, then 7): a
/// back-off on top of the schedule's fixed delay. The fourth attempt fetches;
/// the polls that run after it (until the caller's cancel() lands) have
/// nothing left to fetch.
class Poller {
 public:
  void poll() {
    std::lock_guard lock(mutex_);
    const Steady::time_point start = Steady::now();
    if (lastEnd_ != Steady::time_point{} && start - lastEnd_ < minGap_) minGap_ = start - lastEnd_;
    EndStamp stamp{lastEnd_};  // records when this poll returned, or threw
    if (fetched_) return;
    if (skip_ > 0) {
      --skip_;
      return;
    }
    ++attempts_;
    if (attempts_ <= 3) {
      skip_ = (1 << attempts_) - 1;
      throw std::runtime_error(fmt::format("backend unavailable (attempt {})", attempts_));
    }
    fetched_ = true;
  }
  bool fetched() const {
    std::lock_guard lock(mutex_);
    return fetched_;
  }
  int attempts() const {
    std::lock_guard lock(mutex_);
    return attempts_;
  }
  /// The shortest time between one poll's end and the next one's start.
  Steady::duration minGap() const {
    std::lock_guard lock(mutex_);
    return minGap_;
  }

 private:
  struct EndStamp {
    Steady::time_point& end;
    ~EndStamp() { end = Steady::now(); }
  };
  mutable std::mutex mutex_;
  int attempts_ = 0;
  int skip_ = 0;
  bool fetched_ = false;
  Steady::time_point lastEnd_{};
  Steady::duration minGap_ = Steady::duration::max();
};

/// The report job: its second run fails.
class ReportJob {
 public:
  void run() {
    if (++runs_ == 2) throw std::runtime_error("report: disk full");
  }

 private:
  std::atomic<int> runs_{0};
};

/// The cache warm-up: loads its entries and says when it ran.
struct Cache {
  std::atomic<Steady::rep> warmedAt{0};
  int warmUp() {
    warmedAt = Steady::now().time_since_epoch().count();
    return 128;
  }
};

}  // namespace

int main() {
  ErrorLog errors;  // outlives the pool, whose handler writes to it
  Metrics metrics;
  Poller poller;
  ReportJob reportJob;
  Cache cache;
  coexec::ThreadPoolOptions options{.name = "jobs", .corePoolSize = 2, .maximumPoolSize = 2};
  // Receives the error of each failed run of a periodic schedule, once.
  options.uncaughtExceptionHandler = [&errors](std::exception_ptr error, const coexec::TaskInfo& info) {
    errors.record(error, info);
  };
  coexec::ThreadPoolExecutor pool(options);

  const Steady::time_point start = Steady::now();
  // A metrics flush every 5 ms, on the grid start + k * 5 ms.
  coexec::PeriodicHandle flush = pool.scheduleAtFixedRate([&] { metrics.flush(); }, 0ms, kFlushPeriod);
  // A poll 2 ms after each poll returns; a failed poll is reported and the schedule goes on.
  coexec::PeriodicHandle poll = pool.scheduleWithFixedDelay([&] { poller.poll(); }, 0ms, kPollDelay,
                                                            coexec::PeriodicOptions{.continueOnError = true});
  // A job whose error ends its schedule (continueOnError is false by default).
  coexec::PeriodicHandle report = pool.scheduleAtFixedRate([&] { reportJob.run(); }, 0ms, 3ms);
  // One-shot jobs: a warm-up in 50 ms, and a reminder in an hour (cancelled
  // below: a pending one would keep close() waiting until it is due).
  coexec::ScheduledFuture<int> warm = pool.schedule([&] { return cache.warmUp(); }, kWarmUpDelay);
  coexec::ScheduledFuture<void> reminder = pool.schedule([] { fmt::print("an hour has passed\n"); }, 1h);

  fmt::print("cache warm-up due in {:.1f} ms\n", ms(warm.delay()));
  const coexec::PoolStats early = pool.stats();
  fmt::print("{}\n", early);
  // The reminder waits for its timer: it counts in scheduledCount, and in no
  // other figure until it is due.
  check(early.scheduledCount >= 1, "a waiting timer counts in scheduledCount");
  check(warm.delay() <= kWarmUpDelay, "delay() is the time left until the warm-up is due");

  // The report job: its second run threw. The handler saw the error once, and
  // before the handle settled; get() rethrows it.
  std::string reportError;
  try {
    report.get();
  } catch (const std::runtime_error& e) {
    reportError = e.what();
  }
  check(reportError == "report: disk full", "the failed report's handle rethrows its error");
  check(errors.count("disk full") == 1, "the handler saw the report's error once");
  check(report.isDone() && report.runCount() == 2, "the error ended the report's schedule after its second run");

  // The poll: three failures, each reported, then a fetch.
  check(eventually([&] { return poller.fetched(); }), "the poll fetched once the backend was up");
  check(poll.cancel(), "cancel() ends the poll's schedule");
  poll.get();  // ended by cancel(): returns normally
  check(errors.count("backend unavailable") == 3, "each failed poll reached the handler once; the schedule went on");
  check(poller.attempts() == 4 && poll.runCount() >= 15, "the poller backed off: 4 attempts in 15 or more polls");
  check(poller.minGap() >= kPollDelay, "fixed delay: each poll started at least 2 ms after the previous one returned");

  // The warm-up: it ran once, no earlier than its delay.
  const int entries = warm.get();
  const Steady::time_point warmedAt{Steady::duration(cache.warmedAt.load())};
  fmt::print("cache warm-up ran at {:.1f} ms\n", ms(warmedAt - start));
  check(entries == 128 && warmedAt - start >= kWarmUpDelay, "the warm-up ran no earlier than 50 ms");
  check(warm.delay() <= 0ms, "once due, its delay() is zero or negative");

  // The reminder: cancelled, its timer is removed at once. Left pending, it
  // would keep close() waiting for an hour: by default a pool still runs its
  // delayed one-shot tasks after shutdown.
  check(reminder.cancel() && reminder.isCancelled(), "cancel() removes the reminder's timer");

  check(eventually([&] { return metrics.starts().size() >= 6; }), "the metrics flush ran six times");
  fmt::print("{}\n", pool.stats());

  // Shutdown ends the periodic schedules that are still going (by default):
  // the flush's handle reports OperationCancelled.
  pool.close();
  const Steady::time_point closed = Steady::now();
  bool endedByShutdown = false;
  try {
    flush.get();
  } catch (const coexec::OperationCancelled&) {
    endedByShutdown = true;
  }
  check(endedByShutdown, "close() ended the metrics flush; its handle reports OperationCancelled");
  check(!metrics.overlapped(), "no two flushes overlapped");

  // Each fixed-rate run stands for its own grid point: a late run starts at
  // once for the latest point passed, and the points it missed are skipped.
  const std::vector<Steady::time_point> starts = metrics.starts();
  std::string offsets;
  for (std::size_t i = 0; i < starts.size() && i < 6; ++i)
    offsets += fmt::format(" {:.1f}", ms(starts[i] - start));
  fmt::print("first flushes at (ms):{} (the third one lasted 22 ms)\n", offsets);
  const auto gridPoints = static_cast<std::size_t>((closed - start) / kFlushPeriod) + 1;
  check(starts.size() <= gridPoints, "at most one flush per grid point passed");

  // The ledger: each schedule and each one-shot that became due counts once
  // in taskCount, and once by how it ended; their runs count nowhere. The
  // cancelled reminder never became due: it counts nowhere.
  const coexec::PoolStats s = pool.stats();
  fmt::print("{}\n", s);
  check(s.taskCount == 4, "taskCount: three schedules and the warm-up");
  check(s.completedTaskCount == 2 && s.failedCount == 1 && s.cancelledCount == 1,
        "completed: the poll (cancel()) and the warm-up; failed: the report; cancelled: the flush (shutdown)");
  check(s.scheduledCount == 0 && s.rejectedCount == 0, "no timer left, nothing rejected");
  return failures == 0 ? 0 : 1;
}
