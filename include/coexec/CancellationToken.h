// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstddef>
#include <utility>

#include "coexec/Export.h"
#include "coexec/detail/StandardLibrary.h"

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
/// Tokens made from a std::stop_token (CancellationToken(const
/// std::stop_token&)) whose state is still alive, on all threads: each holds
/// a std::stop_callback on its stop_token until its last copy goes. For
/// tests: counted only in builds with the fault points
/// (FaultInjection::available()); 0 otherwise. Never blocks.
COEXEC_EXPORT std::size_t liveStopTokenBridges() noexcept;
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
///
/// std::stop_token: a token converts from one (a stop request cancels it)
/// and gives one (stopToken(): stop is requested when it is cancelled), so
/// every API that takes a CancellationToken takes a std::stop_token (a
/// std::jthread's get_stop_token()) too. See docs/cancellation.md,
/// "std::stop_token, std::jthread and Asio". On libstdc++ this header only
/// declares std::stop_token (detail/StandardLibrary.h): code that makes,
/// passes or receives one includes <stop_token> (or <thread>) itself.
class COEXEC_EXPORT CancellationToken {
 public:
  /// A token that is never cancelled. Never blocks, never throws.
  CancellationToken() noexcept = default;
  /// A token cancelled when stop is requested on `stop` (at once if it has
  /// been already): `stop.request_stop()`'s thread, inside that call, sets
  /// the request and runs the token's registrations. A `stop` with
  /// `stop_possible() == false` (a default std::stop_token, or one whose
  /// sources are all gone unstopped) gives a token that can never be
  /// cancelled, as CancellationToken() does, at no cost. Otherwise it
  /// allocates one state that holds a std::stop_callback on `stop` until the
  /// last copy of this token (and the last registration on it) goes; the
  /// callback holds no reference to the state, so a `stop` that lives for
  /// the whole program keeps nothing of a token that is gone. Implicit, so
  /// that `pool.submit(f, jthread.get_stop_token())` links the task to it.
  /// Never blocks (a new token has no registration to run). Dropping the
  /// last copy (or the last registration) of such a token blocks while a
  /// request_stop() on another thread is running the callback that cancels
  /// it; dropped inside that callback, on the requesting thread, it does not
  /// wait.
  /// \throws std::bad_alloc.
  CancellationToken(const std::stop_token& stop);  // NOLINT(google-explicit-constructor): by design
  /// Another handle on `other`'s state: it sees the same request. Never blocks.
  CancellationToken(const CancellationToken& other) noexcept;
  /// Takes `other`'s state; `other` is left like a default-constructed token.
  /// Never blocks.
  CancellationToken(CancellationToken&& other) noexcept;
  /// Observes `other`'s state from now on and drops the one it had. Never
  /// blocks, except as dropping the last copy of a token converted from a
  /// std::stop_token does (see the constructor from one).
  CancellationToken& operator=(CancellationToken other) noexcept;
  ~CancellationToken();

  /// True once cancellation was requested. Never blocks.
  [[nodiscard]] bool isCancellationRequested() const noexcept;

  /// False for a default-constructed token (nothing can cancel it). Never blocks.
  [[nodiscard]] bool canBeCancelled() const noexcept { return state_ != nullptr; }

  /// Never blocks. \throws OperationCancelled if cancellation was requested.
  void throwIfCancellationRequested() const;

  /// A std::stop_token that is stop-requested when this token is cancelled:
  /// at once if it is already, otherwise by the thread that requests the
  /// cancellation, inside that call, right after it sets the request and
  /// before any CancellationRegistration callback runs (std::stop_callbacks
  /// on it run there, before the registrations; each of them sees
  /// isCancellationRequested() true). Every call returns a token of the same
  /// stop state. For a token that can never be cancelled it returns
  /// `std::stop_token{}` (`stop_possible() == false`), at no cost. Otherwise
  /// the first call on a token's state allocates its std::stop_source (a
  /// token whose stopToken() is never called pays nothing for it); later
  /// calls take the state's lock briefly. The std::stop_token keeps its own
  /// stop state alive: it may outlive every CancellationToken (once they are
  /// all gone without a cancellation, `stop_possible()` turns false).
  /// Never blocks for long. \throws std::bad_alloc.
  [[nodiscard]] std::stop_token stopToken() const;

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
  /// Another handle on `other`'s request: requestCancellation() on either
  /// cancels the tokens of both. Never blocks.
  CancellationSource(const CancellationSource& other) noexcept;
  /// Takes `other`'s request; `other` is left without state (see above).
  /// Never blocks.
  CancellationSource(CancellationSource&& other) noexcept;
  /// Shares `other`'s request from now on; the request this source had is
  /// dropped, not cancelled. Never blocks.
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
