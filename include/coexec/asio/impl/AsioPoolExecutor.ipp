// SPDX-License-Identifier: BSL-1.0
// Part of the Asio bridge: the Asio executor that runs function objects on a
// ThreadPoolExecutor through its admission.
//
// The bridge's bodies (this file, AsioScheduler.ipp, AsyncWait.ipp) are
// written once and compiled once per Asio flavour: each is included, outside
// any namespace, by the standalone headers (coexec/asio/*.h: `#include
// <asio.hpp>`, COEXEC_DETAIL_BRIDGE_NS = coexec) and by coexec/boost_asio.h
// (`#include <boost/asio.hpp>`, COEXEC_DETAIL_BRIDGE_NS = coexec::basio),
// in this order. Inside the bodies `asio::` names the flavour's Asio (for
// Boost, through the alias coexec::basio::asio), `detail::` the flavour's
// detail namespace, which sees coexec::detail, and detail::AsioSystemError
// the flavour's system_error. What does not depend on Asio is shared, once:
// coexec/detail/AsioBridge.h.

#ifndef COEXEC_DETAIL_BRIDGE_NS
#error "include <coexec/asio.h> (standalone Asio) or <coexec/boost_asio.h> (Boost.Asio), not this file"
#endif

#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/AsioBridge.h"
#include "coexec/detail/CombinatorAccess.h"
#include "coexec/detail/Scheduler.h"

namespace COEXEC_DETAIL_BRIDGE_NS {

class AsioPoolExecutor;

/// The Asio executor of `pool`: `asio::post(asioExecutor(pool), f)`,
/// `asio::dispatch`, `asio::defer` and `asio::co_spawn(asioExecutor(pool),
/// awaitable, token)` run on `pool`'s threads, each function object as a new
/// task through the pool's admission (ThreadPoolExecutor::execute()). Never
/// blocks; never throws. The pool must outlive the executor and every copy
/// of it (and the work handed to it).
[[nodiscard]] AsioPoolExecutor asioExecutor(ThreadPoolExecutor& pool) noexcept;

/// A light, copyable handle (one pointer and a few property bits) that meets
/// Asio 1.22's standard executor requirements (`asio::execution::executor`):
/// `execute`, equality, and query/require/prefer of
/// `execution::blocking` (`possibly` by default, or `never`; `always` is not
/// supported), `execution::relationship` (`fork` or `continuation`, recorded
/// and reported, with no effect on scheduling), `execution::outstanding_work`
/// (always `untracked`: a pool needs no work count to stay alive, and
/// preferring `tracked` leaves the executor as it is) and `execution::context`.
/// It converts to `asio::any_io_executor`, so it is accepted wherever Asio
/// takes an executor for completion handlers and `co_spawn`.
///
/// Where functions run, and rejections, per Asio operation:
/// - `asio::post` and `asio::defer` (`blocking.never`), and `asio::dispatch`
///   called outside the pool: `pool.execute(f)`, the pool's full admission
///   (core thread -> queue -> extra thread -> rejection policy).
/// - `asio::dispatch` (`blocking.possibly`, the default) called on one of
///   the pool's own threads: `f` runs at once, inside the call.
/// - `asio::co_spawn(asioExecutor(pool), awaitable, token)`: Asio starts the
///   coroutine with a dispatch, brings it back after each asynchronous
///   operation it awaits with a dispatch, and hands the result to the
///   handler with a dispatch or a post (Asio 1.26, Boost 1.81's, first posts
///   the finished coroutine once more): each is admitted as above.
///
/// Rejections: the pool's policy decides what a refused function becomes,
/// except that the executor never throws RejectedExecution: Asio 1.22 calls
/// executors from places that cannot take an exception (an Asio coroutine's
/// await_suspend is noexcept: co_spawn's first hop, its completion post, and
/// a `co_await asio::post(...)` would terminate the program; an
/// awaitable's stack posts its own destruction from a destructor). Where the
/// policy throws RejectedExecution (`abort()`; `block()` after its timeout;
/// after shutdown, every built-in policy), the refused function runs at
/// once in the calling thread instead, as under `callerRuns()`, and the
/// refusal counts in `rejectedCount`: a
/// refused `asio::post` or `dispatch` runs the function inside the call; a
/// refused co_spawn runs the coroutine in the caller of co_spawn, and a
/// refused hop back runs it on in the thread that completed the awaited
/// operation (an io_context thread), until its next hop. Under
/// `discard()`/`discardOldest()` a refused function (or the oldest queued
/// task) is dropped: for an Asio coroutine, its stack is destroyed without
/// running and its completion handler is never called, as when an
/// io_context is destroyed. What a user policy throws is thrown. To be told
/// of a refusal instead, submit with `pool.submit()` and wait with
/// asyncWait().
/// A function the pool drops unrun (discarded, refused, returned by
/// shutdownNow() and dropped, cancelled with the task that submitted it) is
/// destroyed on the thread that drops it; if its destructor hands clean-up
/// work to an AsioPoolExecutor (Asio's coroutine stacks do), that work runs
/// right there.
/// Called from inside a running task of any pool, the new task is that
/// task's child (see ThreadPoolExecutor::execute()): cancelling the running
/// task cancels it while it is queued.
/// An exception that escapes a function on the pool goes to the pool's
/// uncaught-exception handler (Asio handlers that throw out of
/// `io_context::run()` have no such place here).
///
/// `execution::context` is a process-wide `asio::execution_context` that
/// stands for every coexec pool (a pool is not an Asio execution context, and
/// `any_io_executor` needs one); `pool()` gives the pool itself.
///
/// Thread safety: a value type; every member may be called from any thread,
/// concurrently. Two executors compare equal if they refer to the same pool
/// with the same properties.
class AsioPoolExecutor {
 public:
  /// An executor on `pool`, with blocking.possibly and relationship.fork
  /// (asioExecutor(pool) makes the same). The pool must outlive it and its
  /// copies. Never blocks.
  constexpr explicit AsioPoolExecutor(ThreadPoolExecutor& pool) noexcept : pool_(&pool) {}

  /// The pool. Never blocks; never throws.
  [[nodiscard]] ThreadPoolExecutor& pool() const noexcept { return *pool_; }

  /// Runs `f()` on the pool, as the class comment says for the executor's
  /// blocking property: what asio::post / dispatch / defer call. Blocks only
  /// as ThreadPoolExecutor::execute() does (under block()), or for as long as
  /// `f` runs when it runs inline (on a pool thread with blocking.possibly,
  /// or refused: see "Rejections").
  /// \throws what a user rejection policy throws; std::bad_alloc; never
  /// RejectedExecution (see "Rejections"). When `f` runs inline, what it
  /// throws comes out of this call.
  template <class F>
  void execute(F&& f) const {
    using Fn = std::decay_t<F>;
    if (!never_ && detail::currentPoolIdentity() == detail::CombinatorAccess::identity(*pool_)) {
      std::forward<F>(f)();
      return;
    }
    if (detail::tlsDestroyingUnrun) {
      // The destructor of a function the pool refused (or dropped) is
      // handing its own clean-up to an AsioPoolExecutor (an Asio coroutine
      // stack does, through post): run it here. A throw out of that
      // destructor would terminate the program.
      std::forward<F>(f)();
      return;
    }
    std::optional<Fn> refused;
    detail::Rescue rescue{&refused, ++detail::tlsRescueCalls};
    struct Scope {
      detail::Rescue* outer;
      ~Scope() { detail::tlsRescue = outer; }
    } scope{std::exchange(detail::tlsRescue, &rescue)};
    // Drops a function the pool did not take as the pool would have.
    auto drop = [&refused]() noexcept {
      const bool outer = std::exchange(detail::tlsDestroyingUnrun, true);
      refused.reset();
      detail::tlsDestroyingUnrun = outer;
    };
    bool runHere = false;
    try {
      pool_->execute(detail::PoolFunction<Fn>(Fn(std::forward<F>(f)), &rescue));
    } catch (const RejectedExecution&) {
      detail::tlsRescue = scope.outer;
      // Asio calls executors from places that cannot take an exception
      // (see the class comment): the refused function runs in the caller.
      if (!refused) throw;
      runHere = true;
    } catch (...) {
      detail::tlsRescue = scope.outer;
      drop();
      throw;
    }
    detail::tlsRescue = scope.outer;
    if (runHere) {
      Fn fn(std::move(*refused));
      refused.reset();
      std::move(fn)();
    } else if (refused) {
      drop();  // discarded by the policy, or the running task was cancelled already
    }
  }

  // ---- properties (Asio's query / require / prefer customisation points) ----

  /// The process-wide execution context that stands for every coexec pool
  /// (see above).
  [[nodiscard]] asio::execution_context& query(asio::execution::context_t) const noexcept;
  /// blocking.never once required, else blocking.possibly (the default).
  [[nodiscard]] constexpr asio::execution::blocking_t query(asio::execution::blocking_t) const noexcept {
    return never_ ? asio::execution::blocking_t(asio::execution::blocking.never)
                  : asio::execution::blocking_t(asio::execution::blocking.possibly);
  }
  /// relationship.continuation once required, else relationship.fork (the
  /// default).
  [[nodiscard]] constexpr asio::execution::relationship_t query(asio::execution::relationship_t) const noexcept {
    return continuation_ ? asio::execution::relationship_t(asio::execution::relationship.continuation)
                         : asio::execution::relationship_t(asio::execution::relationship.fork);
  }
  /// Always outstanding_work.untracked: the executor counts no work.
  [[nodiscard]] static constexpr asio::execution::outstanding_work_t query(
      asio::execution::outstanding_work_t) noexcept {
    return asio::execution::outstanding_work.untracked;
  }
  /// Always mapping.thread: functions run on threads.
  [[nodiscard]] static constexpr asio::execution::mapping_t query(asio::execution::mapping_t) noexcept {
    return asio::execution::mapping.thread;
  }

  /// A copy with blocking.possibly: asio::dispatch on a pool thread runs the
  /// function at once.
  [[nodiscard]] constexpr AsioPoolExecutor require(asio::execution::blocking_t::possibly_t) const noexcept {
    return with(false, continuation_);
  }
  /// A copy with blocking.never: every function goes through the pool's
  /// admission.
  [[nodiscard]] constexpr AsioPoolExecutor require(asio::execution::blocking_t::never_t) const noexcept {
    return with(true, continuation_);
  }
  /// A copy with relationship.fork.
  [[nodiscard]] constexpr AsioPoolExecutor require(asio::execution::relationship_t::fork_t) const noexcept {
    return with(never_, false);
  }
  /// A copy with relationship.continuation.
  [[nodiscard]] constexpr AsioPoolExecutor require(asio::execution::relationship_t::continuation_t) const noexcept {
    return with(never_, true);
  }
  /// This executor: it is always untracked.
  [[nodiscard]] constexpr AsioPoolExecutor require(asio::execution::outstanding_work_t::untracked_t) const noexcept {
    return *this;
  }

  /// True if both run on the same pool with the same properties.
  friend constexpr bool operator==(const AsioPoolExecutor& a, const AsioPoolExecutor& b) noexcept {
    return a.pool_ == b.pool_ && a.never_ == b.never_ && a.continuation_ == b.continuation_;
  }
  /// `!(a == b)`.
  friend constexpr bool operator!=(const AsioPoolExecutor& a, const AsioPoolExecutor& b) noexcept { return !(a == b); }

 private:
  constexpr AsioPoolExecutor with(bool never, bool continuation) const noexcept {
    AsioPoolExecutor copy = *this;
    copy.never_ = never;
    copy.continuation_ = continuation;
    return copy;
  }

  ThreadPoolExecutor* pool_;
  bool never_ = false;         // blocking.never (else possibly)
  bool continuation_ = false;  // relationship.continuation (else fork)
};

namespace detail {
/// The one execution_context every AsioPoolExecutor reports (see the class).
inline asio::execution_context& poolExecutionContext() noexcept {
  static asio::execution_context context;
  return context;
}
}  // namespace detail

inline asio::execution_context& AsioPoolExecutor::query(asio::execution::context_t) const noexcept {
  return detail::poolExecutionContext();
}

inline AsioPoolExecutor asioExecutor(ThreadPoolExecutor& pool) noexcept { return AsioPoolExecutor(pool); }

static_assert(asio::execution::is_executor<AsioPoolExecutor>::value);
static_assert(std::is_convertible_v<AsioPoolExecutor, asio::any_io_executor>);

}  // namespace COEXEC_DETAIL_BRIDGE_NS
