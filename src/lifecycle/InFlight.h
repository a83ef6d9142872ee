// SPDX-License-Identifier: BSL-1.0
#pragma once

// The pool's in-flight tracker: what keeps a pool that is shut down from
// terminating besides its queues and threads. Coroutine tasks started and
// not finished ("in flight"), guests' holds (a coroutine suspended in an
// awaiter on one of the pool's workers, a coroutine run outside the
// workers), and the tasks with a token among them, which shutdownNow()
// cancels. Part of the lifecycle tracker (Lifecycle.h), which owns the
// pool's state: the one call here that reads it (leaveIfRunning()) is given
// the state's mirror by the tracker.
//
// Invariants:
// - The total (totalLocked()) is exact under the pool's mutex, and the pool
//   terminates only when it is 0 and no worker is left.
// - A worker counts the coroutine tasks it starts, and the finishes on its
//   thread, in its own counters (PoolCounters::coroutinesStarted and
//   coroutinesFinished) with plain stores: no read-modify-write on the path
//   of a coroutine that starts and ends on the pool's threads. Any worker
//   may count any finish: only the sum matters. A worker's counts move here
//   when it exits (workerExitedLocked()). A reader under the mutex may miss
//   a worker's latest plain stores; such a worker is alive and brings them
//   to the lock before it parks or exits, and the pool terminates only once
//   no worker is left.
// - A finish on any other thread (another pool's, an io_context's, a
//   caller's) is a wrapping decrement of a shard, and a guest's hold an
//   increment of the guests' shard. Such a finisher must not touch the pool
//   once its decrement may let the pool terminate (the owner may be freeing
//   it in close()). So it first announces itself in its shard's `finishing`,
//   then reads the state (seq_cst both):
//   - running: it decrements `count` and then `finishing`, and touches
//     nothing after that (leaveIfRunning()). shutdown() and shutdownNow()
//     change the state and then wait until every `finishing` is 0
//     (waitLeaversLocked()), so they see every such decrement before they
//     decide anything.
//   - not running: it takes the pool's mutex before it decrements
//     (leaveLocked()), and the pool decides under the lock whether it can
//     now terminate; it cannot terminate (and so cannot be freed) while the
//     count is still in the total.
// - A task with a token is tracked from its start (or from the moment its
//   coroutine creates the token) until its finish, in the list of its
//   in-flight shard, under that list's own mutex; shutdownNow() stores
//   STOP, then reads each list under its mutex, and a task added to a list
//   after that read sees STOP and cancels itself. The lists are sharded as
//   the counts are, so that the workers' tracking does not contend on one
//   lock, and a finish searches its list from the newest entry (tasks tend
//   to finish in the reverse order of their start).

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <thread>
#include <vector>

#include "coexec/PoolStats.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/TaskCore.h"

namespace coexec::detail {

class InFlight {
 public:
  /// Shards for finishes on other threads and for guests' holds; a worker
  /// counts in `number % kShards` (fits a byte: PoolTaskState's shard).
  static constexpr std::size_t kShards = 8;
  /// The shard of the guests' holds: one for all, since a hold may be
  /// dropped on any thread.
  static constexpr std::uint8_t kGuestShard = 0;

  /// A guest's hold: one more in flight. On a thread that keeps the pool
  /// from terminating meanwhile (one of its workers, a temporary thread, or
  /// under the pool's mutex). Never throws.
  void hold() noexcept { shards_[kGuestShard].count.fetch_add(1, std::memory_order_seq_cst); }
  /// One less in flight in `shard`, from a thread that may not keep the pool
  /// alive, if the pool is running (`state`: the state's mirror, stored
  /// seq_cst): true, and the pool must not be touched afterwards. False,
  /// changing nothing, if it is not running: the caller takes the pool's
  /// mutex and calls leaveLocked(). Never throws.
  bool leaveIfRunning(std::uint8_t shard, const std::atomic<PoolState>& state) noexcept {
    Shard& s = shards_[shard];
    s.finishing.fetch_add(1, std::memory_order_seq_cst);
    if (state.load(std::memory_order_seq_cst) == PoolState::running) {
      s.count.fetch_sub(1, std::memory_order_seq_cst);
      s.finishing.fetch_sub(1, std::memory_order_seq_cst);  // the last access to the pool
      return true;
    }
    s.finishing.fetch_sub(1, std::memory_order_seq_cst);  // still in flight: the pool stays
    return false;
  }
  /// Requires: the pool's mutex held. One less in flight in `shard`.
  void leaveLocked(std::uint8_t shard) noexcept { shards_[shard].count.fetch_sub(1, std::memory_order_seq_cst); }
  /// Requires: the pool's mutex held, after a change of state. Waits out the
  /// leaveIfRunning() calls under way (they never take the mutex).
  void waitLeaversLocked() const noexcept {
    for (const Shard& shard : shards_) {
      while (shard.finishing.load(std::memory_order_seq_cst) != 0)
        std::this_thread::yield();
    }
  }
  /// Requires: the pool's mutex held. The total in flight, given the live
  /// workers' own counts (started minus finished, wrapping).
  [[nodiscard]] std::size_t totalLocked(std::uint64_t workersNet) const noexcept {
    std::uint64_t total = exited_ + workersNet;
    for (const Shard& shard : shards_)
      total += shard.count.load(std::memory_order_seq_cst);
    return static_cast<std::size_t>(total);
  }
  /// Requires: the pool's mutex held. An exiting worker's own counts
  /// (started minus finished, wrapping) move here.
  void workerExitedLocked(std::uint64_t net) noexcept { exited_ += net; }

  /// Tracks `task`, which has a token and is in flight in `shard`, until
  /// untrack(). \throws std::bad_alloc.
  void track(TaskCore& task, std::uint8_t shard) {
    Tracked& list = tracked_[shard];
    std::lock_guard lock(list.mutex);
    list.tasks.push_back(&task);
  }
  /// Stops tracking `task` (if tracked), which is in flight in `shard`.
  /// Never throws.
  void untrack(TaskCore& task, std::uint8_t shard) noexcept {
    Tracked& list = tracked_[shard];
    std::lock_guard lock(list.mutex);
    const auto it = std::find(list.tasks.rbegin(), list.tasks.rend(), &task);
    if (it != list.tasks.rend()) list.tasks.erase(std::next(it).base());  // keeps the order of the rest
  }
  /// Appends a reference to every tracked task to `into` (shutdownNow(),
  /// after it stored STOP). The tasks stay alive meanwhile: a finish
  /// untracks its task under its list's mutex before it drops it. \throws
  /// std::bad_alloc.
  void collect(std::vector<Ref<TaskCore>>& into) {
    for (Tracked& list : tracked_) {
      std::lock_guard lock(list.mutex);
      for (TaskCore* task : list.tasks) {
        task->addRef();
        into.push_back(Ref<TaskCore>::adopt(task));
      }
    }
  }

 private:
  struct alignas(64) Shard {
    std::atomic<std::size_t> count{0};  // wraps: finishes on other threads decrement it
    std::atomic<std::size_t> finishing{0};
  };
  Shard shards_[kShards];
  std::uint64_t exited_ = 0;  // exited workers' started minus finished (wrapping); the pool's mutex
  struct alignas(64) Tracked {
    std::mutex mutex;
    std::vector<TaskCore*> tasks;  // those with a token in flight in this shard; guarded by mutex
  };
  Tracked tracked_[kShards];
};

}  // namespace coexec::detail
