// SPDX-License-Identifier: BSL-1.0
// Backpressure: a coroutine reads a stream of items far faster than a
// bounded pool can process them, and paces itself with submitWhenRoom():
// while the pool is full it suspends (its thread free) instead of being
// refused or blocking. The queue never holds more than its capacity and the
// memory stays flat however long the stream is. Checks its own results.
//
//   pipeline [items]     (default 1,000,000)

#include <coexec/coexec.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

/// The process's resident memory now (VmRSS), in KiB; 0 where /proc is not.
std::size_t residentKiB() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      std::size_t kib = 0;
      status >> kib;
      return kib;
    }
    status.ignore(4096, '\n');
  }
  return 0;
}

/// A stream of items, read one at a time (a file, a socket, a queue).
class Stream {
 public:
  explicit Stream(std::uint64_t length) : length_(length) {}
  bool next(std::uint64_t& item) {
    if (read_ == length_) return false;
    item = read_++;
    return true;
  }

 private:
  std::uint64_t length_;
  std::uint64_t read_ = 0;
};

/// Some work per item (a few microseconds): rounds of a 64-bit mix.
std::uint64_t process(std::uint64_t item) {
  std::uint64_t x = item + 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < 2048; ++i) {
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
  }
  return x;
}

struct Totals {
  explicit Totals(std::uint64_t length) : seen(length) {}
  std::atomic<std::uint64_t> processed{0};
  std::atomic<std::uint64_t> duplicates{0};  // items processed more than once
  std::atomic<std::uint64_t> sink{0};        // keeps the work from being optimized away
  std::vector<std::atomic<bool>> seen;       // one flag per item
};

struct Peaks {
  std::size_t queue = 0;
  std::size_t waitingProducers = 0;
  std::size_t rssKiB = 0;        // the highest resident size sampled
  std::size_t rssAtTenthKiB = 0;  // sampled once a tenth of the stream was read
};

coexec::Task<std::uint64_t> pump(coexec::ThreadPoolExecutor& pool, Stream& stream, Totals& totals, Peaks& peaks,
                                 std::uint64_t length) {
  std::uint64_t submitted = 0;
  std::uint64_t item = 0;
  while (stream.next(item)) {
    // Suspends while the queue is full and every thread busy; resumes once
    // this task has been admitted. The Future is not kept: the task's
    // result goes to `totals` (a million Futures would be memory too).
    coexec::Future<void> done = co_await pool.submitWhenRoom([&totals, item] {
      totals.sink.fetch_xor(process(item), std::memory_order_relaxed);
      if (totals.seen[item].exchange(true, std::memory_order_relaxed)) totals.duplicates.fetch_add(1);
      totals.processed.fetch_add(1, std::memory_order_relaxed);
    });
    ++submitted;
    if (submitted % 4096 == 0) {
      const coexec::PoolStats s = pool.stats();
      peaks.queue = std::max(peaks.queue, s.queueSize);
      peaks.waitingProducers = std::max(peaks.waitingProducers, s.waitingProducers);
      peaks.rssKiB = std::max(peaks.rssKiB, residentKiB());
    }
    if (submitted == length / 10) peaks.rssAtTenthKiB = residentKiB();
    if (submitted % (length / 10 == 0 ? 1 : length / 10) == 0) {
      fmt::print("  read {:>9} items, processed {:>9}, queue {:>3}/{}, resident {:>6} KiB\n", submitted,
                 totals.processed.load(), pool.stats().queueSize, pool.workQueue().capacity(), residentKiB());
    }
  }
  co_return submitted;
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t length = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  if (length == 0) {
    fmt::print(stderr, "usage: pipeline [items > 0]\n");
    return 2;
  }
  constexpr std::size_t kCapacity = 64;
  Totals totals(length);
  Peaks peaks;

  coexec::ThreadPoolOptions options;
  options.name = "pipeline";
  options.corePoolSize = 2;
  options.maximumPoolSize = 2;
  options.workQueue = coexec::WorkQueue::bounded(kCapacity);
  options.rejectionPolicy = coexec::RejectionPolicy::abort();  // never called: submitWhenRoom waits instead
  coexec::ThreadPoolExecutor pool(options);
  fmt::print("a stream of {} items into a pool of 2 threads and a queue of {}, paced by submitWhenRoom:\n", length,
             kCapacity);
  const std::size_t rssBefore = residentKiB();
  Stream stream(length);
  const std::uint64_t submitted = coexec::syncWait(pump(pool, stream, totals, peaks, length));
  pool.close();
  const coexec::PoolStats s = pool.stats();
  fmt::print("{}\n", s);
  fmt::print("submitted {}, processed {}, peak queue {}/{}, peak waiting producers {}, resident {} KiB before, "
             "{} KiB at a tenth, {} KiB at the peak\n",
             submitted, totals.processed.load(), peaks.queue, kCapacity, peaks.waitingProducers, rssBefore,
             peaks.rssAtTenthKiB, peaks.rssKiB);

  bool ok = true;
  const auto check = [&ok](bool condition, const char* what) {
    if (!condition) {
      fmt::print(stderr, "FAILED: {}\n", what);
      ok = false;
    }
  };
  check(submitted == length, "every item of the stream was submitted");
  check(totals.processed.load() == length, "every item was processed");
  check(totals.duplicates.load() == 0, "no item was processed twice");
  std::uint64_t missing = 0;
  for (const std::atomic<bool>& flag : totals.seen)
    missing += flag.load() ? 0 : 1;
  check(missing == 0, "no item was lost");
  check(s.rejectedCount == 0, "no task was refused");
  check(s.taskCount == length && s.completedTaskCount == length, "the pool counted every task once");
  check(peaks.queue <= kCapacity, "the queue never held more than its capacity");
  // Flat memory: from a tenth of the stream to its end, the resident size
  // grows by less than 16 MiB (a producer that submitted everything at once
  // would hold a million queued tasks). Not checked under the sanitizers,
  // whose own allocator keeps freed memory in quarantine.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  if (peaks.rssAtTenthKiB > 0) check(peaks.rssKiB < peaks.rssAtTenthKiB + 16 * 1024, "the memory stayed flat");
#endif
  if (!ok) return 1;
  fmt::print("pipeline: all checks passed\n");
  return 0;
}
