// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "coexec/CancellationToken.h"
#include "coexec/Export.h"
#include "coexec/SerialExecutor.h"
#include "coexec/ThreadPoolExecutor.h"

namespace coexec {

/// Keyed lanes: tasks of one key run in submission order, one at a time,
/// while tasks of different keys run in parallel on the pool (the "one
/// thread per entity" pattern, without a thread per entity).
///
/// A key is routed by a stable hash to one of `lanes` SerialExecutors: the
/// key's std::hash value, mixed by a 64-bit finalizer (so that std::hash
/// values that differ only in their high bits, or that are consecutive
/// integers, spread over the lanes), modulo `lanes`. Keys that share a lane
/// also share its order: a slow task delays the later tasks of its own lane
/// only (its key, and the keys hashed to the same lane), never other lanes.
/// Use more lanes than the pool has threads so that keys rarely collide
/// (e.g. 4 to 16 per thread); a lane costs one small object and no thread.
///
/// Everything a SerialExecutor guarantees holds per lane: ordering,
/// admission without the pool's rejection policy (a refused task's Future
/// reports RejectedExecution and the lane goes on), cancellation, coroutine
/// tasks holding their lane until they finish, and a destructor that blocks
/// until every submitted task has settled (docs/lanes.md).
///
/// Thread safety: every member may be called from any thread, concurrently.
class COEXEC_EXPORT KeyedExecutor {
 public:
  /// `lanes` lanes on `pool`. Never blocks. The pool must outlive this.
  /// \throws std::invalid_argument if `lanes` is 0; std::bad_alloc.
  KeyedExecutor(ThreadPoolExecutor& pool, std::size_t lanes);
  KeyedExecutor(const KeyedExecutor&) = delete;
  KeyedExecutor& operator=(const KeyedExecutor&) = delete;
  /// Blocks until every task submitted to any lane has settled.
  ~KeyedExecutor();

  /// Runs `f` in the lane of `key` (see SerialExecutor::submit()) and
  /// returns its Future. `Key` is any type with a std::hash. Never blocks.
  /// \throws what SerialExecutor::submit() throws (never RejectedExecution).
  template <class Key, class F>
  [[nodiscard]] auto submit(const Key& key, F&& f) {
    return lane(key).submit(std::forward<F>(f));
  }
  /// submit(key, f), with the task also cancelled when `token` is (see
  /// SerialExecutor::submit(f, token)). Never blocks.
  template <class Key, class F>
  [[nodiscard]] auto submit(const Key& key, F&& f, const CancellationToken& token) {
    return lane(key).submit(std::forward<F>(f), token);
  }
  /// As submit(), fire-and-forget (see SerialExecutor::execute()).
  template <class Key, class F>
  void execute(const Key& key, F&& f) {
    lane(key).execute(std::forward<F>(f));
  }
  /// execute(key, f), with the task also cancelled when `token` is (see
  /// SerialExecutor::submit(f, token)). Never blocks.
  template <class Key, class F>
  void execute(const Key& key, F&& f, const CancellationToken& token) {
    lane(key).execute(std::forward<F>(f), token);
  }

  /// The lane of `key`: to `co_await resumeOn(keyed.lane(key))`. Never blocks.
  template <class Key>
  [[nodiscard]] SerialExecutor& lane(const Key& key) const noexcept {
    return *lanes_[laneIndex(key)];
  }
  /// Which lane `key` goes to, in [0, laneCount()): the same for equal keys
  /// for the life of this executor (and across runs, where std::hash is).
  template <class Key>
  [[nodiscard]] std::size_t laneIndex(const Key& key) const noexcept {
    return static_cast<std::size_t>(mix(static_cast<std::uint64_t>(std::hash<Key>{}(key))) % lanes_.size());
  }
  /// How many lanes there are (`lanes` of the constructor). Never blocks.
  [[nodiscard]] std::size_t laneCount() const noexcept { return lanes_.size(); }
  /// The pool the lanes run on. Never blocks.
  [[nodiscard]] ThreadPoolExecutor& pool() const noexcept { return pool_; }

  /// The 64-bit finalizer of SplitMix64 / MurmurHash3 (fmix64): every input
  /// bit changes about half of the output bits.
  static constexpr std::uint64_t mix(std::uint64_t x) noexcept {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
  }

 private:
  ThreadPoolExecutor& pool_;
  std::vector<std::unique_ptr<SerialExecutor>> lanes_;
};

}  // namespace coexec
