#pragma once

#include <cstddef>
#include <functional>
#include <utility>

#include "coexec/Export.h"

namespace coexec {

class CancellationToken;
class CancellationRegistration;

namespace detail {
class CancellationState;
/// Registrations on `token`'s source that have neither run nor been
/// deregistered (0 for a token that can never be cancelled). For tests and
/// diagnostics: a task linked to a long-lived token must leave none behind
/// once it has settled. O(registrations); takes the source's lock.
COEXEC_EXPORT std::size_t registrationCount(const CancellationToken& token) noexcept;
}  // namespace detail

/// A read-only view of a cancellation request. A default-constructed token can
/// never be cancelled. Tokens are cheap to copy (one atomic increment).
///
/// Thread safety: every member may be called from any thread, concurrently
/// with `CancellationSource::requestCancellation()`.
///
/// Memory ordering: a thread that sees `isCancellationRequested() == true`
/// also sees everything the cancelling thread wrote before it called
/// `requestCancellation()`.
class COEXEC_EXPORT CancellationToken {
 public:
  /// A token that is never cancelled. Never blocks, never throws.
  CancellationToken() noexcept = default;
  CancellationToken(const CancellationToken& other) noexcept;
  CancellationToken(CancellationToken&& other) noexcept;
  CancellationToken& operator=(CancellationToken other) noexcept;
  ~CancellationToken();

  /// True once cancellation was requested. Never blocks.
  [[nodiscard]] bool isCancellationRequested() const noexcept;

  /// False for a default-constructed token (nothing can cancel it). Never blocks.
  [[nodiscard]] bool canBeCancelled() const noexcept { return state_ != nullptr; }

  /// Never blocks. \throws OperationCancelled if cancellation was requested.
  void throwIfCancellationRequested() const;

 private:
  friend class CancellationSource;
  friend class CancellationRegistration;
  friend std::size_t detail::registrationCount(const CancellationToken& token) noexcept;
  explicit CancellationToken(detail::CancellationState* state) noexcept;  // adopts a reference
  detail::CancellationState* state_ = nullptr;
};

/// The owner's side of a cancellation request: hand out `token()`s, then call
/// `requestCancellation()` once the work is no longer wanted. Copies share the
/// request. A moved-from source has no state: its token() can never be
/// cancelled, and requestCancellation() does nothing and returns false.
///
/// Thread safety: every member may be called from any thread.
class COEXEC_EXPORT CancellationSource {
 public:
  /// Allocates the shared state. \throws std::bad_alloc.
  CancellationSource();
  CancellationSource(const CancellationSource& other) noexcept;
  CancellationSource(CancellationSource&& other) noexcept;
  CancellationSource& operator=(CancellationSource other) noexcept;
  ~CancellationSource();

  /// A token observing this source. Never blocks.
  [[nodiscard]] CancellationToken token() const noexcept;

  /// Requests cancellation. The first call runs every registered callback on
  /// the calling thread, in registration order, before it returns; later calls
  /// do nothing. Returns true for the call that made the request. Blocks only
  /// for as long as the callbacks run. A callback that throws terminates the
  /// program (as a destructor would): callbacks must not throw.
  bool requestCancellation() noexcept;

  /// True once cancellation was requested. Never blocks.
  [[nodiscard]] bool isCancellationRequested() const noexcept;

 private:
  friend class ThreadPoolExecutor;
  explicit CancellationSource(detail::CancellationState* state) noexcept;  // adopts a reference
  detail::CancellationState* state_ = nullptr;
};

/// Runs a callback when a token is cancelled, for as long as the registration
/// lives.
///
/// If the token is already cancelled, the constructor runs the callback at once
/// on the constructing thread. Otherwise the callback runs on the thread that
/// calls `requestCancellation()`. The destructor deregisters: after it returns
/// the callback is not running and will never run. If the callback is running
/// on another thread at that moment, the destructor blocks until it returns;
/// if it runs on this thread (the callback destroys its own registration), the
/// destructor does not wait.
///
/// Thread safety: construction and destruction race safely with a concurrent
/// `requestCancellation()`. Not movable (the callback's address is registered).
class COEXEC_EXPORT CancellationRegistration {
 public:
  /// Never blocks except to run the callback inline on an already-cancelled
  /// token. \throws std::invalid_argument if `callback` is empty;
  /// std::bad_alloc.
  CancellationRegistration(const CancellationToken& token, std::function<void()> callback);
  CancellationRegistration(const CancellationRegistration&) = delete;
  CancellationRegistration& operator=(const CancellationRegistration&) = delete;
  /// Blocks while the callback runs on another thread (see the class doc).
  ~CancellationRegistration();

 private:
  friend class detail::CancellationState;
  detail::CancellationState* state_ = nullptr;
  std::function<void()> callback_;
  CancellationRegistration* prev_ = nullptr;
  CancellationRegistration* next_ = nullptr;
};

}  // namespace coexec
