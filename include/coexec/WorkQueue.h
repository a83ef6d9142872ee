// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "coexec/Export.h"

namespace coexec {

/// Describes the work queue a ThreadPoolExecutor holds waiting tasks in. A
/// plain value: the pool builds the queue from it.
///
/// - `bounded(n)`: FIFO of at most n tasks. The usual choice: it bounds memory
///   and lets the pool grow from core to max threads when the queue fills.
/// - `unbounded()`: FIFO without a limit. Explicit opt-in only: under overload
///   it grows until the process runs out of memory, and the pool never grows
///   past corePoolSize (the queue never refuses).
/// - `synchronous()`: a hand-off with capacity 0. A task is accepted only if an
///   idle thread takes it at once; otherwise a new thread is started (up to
///   maximumPoolSize), then the rejection policy runs.
/// - `priority(n)`: at most n tasks, the highest `priority` first, FIFO among
///   equal priorities.
///
/// Thread safety: a plain value; copy freely.
class COEXEC_EXPORT WorkQueue {
 public:
  /// Which of the four queues above.
  enum class Kind : std::uint8_t { bounded, unbounded, synchronous, priority };
  /// capacity() of unbounded(): the largest std::size_t.
  static constexpr std::size_t kUnboundedCapacity = std::numeric_limits<std::size_t>::max();

  /// \throws std::invalid_argument if `capacity` is 0 (use synchronous()).
  static WorkQueue bounded(std::size_t capacity);
  /// A FIFO without a limit (see above).
  static WorkQueue unbounded() noexcept;
  /// A hand-off with capacity 0 (see above).
  static WorkQueue synchronous() noexcept;
  /// \throws std::invalid_argument if `capacity` is 0.
  static WorkQueue priority(std::size_t capacity);

  /// Which queue this describes.
  [[nodiscard]] Kind kind() const noexcept { return kind_; }
  /// n for bounded(n) and priority(n); kUnboundedCapacity for unbounded(); 0
  /// for synchronous().
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /// "bounded(1024)", "unbounded", "synchronous", "priority(64)".
  [[nodiscard]] std::string describe() const;

 private:
  WorkQueue(Kind kind, std::size_t capacity) noexcept : kind_(kind), capacity_(capacity) {}
  Kind kind_;
  std::size_t capacity_;
};

}  // namespace coexec
