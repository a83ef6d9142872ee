// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "coexec/Export.h"
#include "coexec/PoolStats.h"
#include "coexec/detail/Ref.h"

namespace coexec {

/// Base of every error coexec throws on its own account. `what()` is a whole
/// sentence with the context needed to act on it.
///
/// Thread safety: immutable once constructed; safe to share.
class COEXEC_EXPORT Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A task was refused by a pool: the pool is shut down, or it is saturated and
/// its rejection policy refused the task. The message carries a snapshot of the
/// pool (name, state, sizes, active, queued, completed) taken at the moment of
/// the rejection; `snapshot()` returns it as data.
class COEXEC_EXPORT RejectedExecution : public Error {
 public:
  /// Never blocks. `reason` says why ("the pool is shut down", ...); the
  /// snapshot is appended to it in `what()`.
  RejectedExecution(const std::string& reason, const PoolStats& snapshot);

  /// The pool's state when the task was rejected.
  [[nodiscard]] const PoolStats& snapshot() const noexcept { return snapshot_; }

 private:
  PoolStats snapshot_;
};

/// A task was cancelled (through `Future::cancel()`, a cancellation token, or
/// `shutdownNow()`) before it produced a result.
class COEXEC_EXPORT OperationCancelled : public Error {
 public:
  OperationCancelled();
  using Error::Error;
};

/// A timed wait (`Future::get(timeout)`, a `timeout` overload) ran out, or
/// `withTimeout` cancelled its work at the deadline (thrown once the work has
/// settled).
class COEXEC_EXPORT TimeoutError : public Error {
 public:
  using Error::Error;
};

namespace detail {
/// AllFailed's errors, shared by its copies (copying an exception must not
/// throw). Immutable once built.
struct ErrorList final : RefCounted {
  explicit ErrorList(std::vector<std::exception_ptr> list) noexcept : errors(std::move(list)) {}
  const std::vector<std::exception_ptr> errors;
};
}  // namespace detail

/// Every task of an `invokeAny()` failed. `errors()` holds each task's
/// exception, in the order of the input range; `what()` names how many
/// failed and the first error's message.
///
/// Thread safety: immutable once constructed; copies share the errors.
class COEXEC_EXPORT AllFailed : public Error {
 public:
  /// Never blocks. \throws std::bad_alloc.
  explicit AllFailed(std::vector<std::exception_ptr> errors);

  /// Each task's exception, in input order. Never empty when invokeAny()
  /// throws it; one built by user code holds what it was given (an empty
  /// vector gives an empty list, and `what()` then says 0 tasks).
  [[nodiscard]] const std::vector<std::exception_ptr>& errors() const noexcept { return errors_->errors; }

 private:
  detail::Ref<detail::ErrorList> errors_;
};

/// The task behind a Future will never run: it was destroyed unrun (a
/// `PendingTask` dropped by a rejection handler or after `shutdownNow()`).
class COEXEC_EXPORT BrokenPromise : public Error {
 public:
  BrokenPromise();
  using Error::Error;
};

}  // namespace coexec
