// SPDX-License-Identifier: BSL-1.0
// Part of the Asio bridge, compiled once per flavour (see
// AsioPoolExecutor.ipp, which is included before it): asyncWait, the Asio
// asynchronous operation that waits for a coexec::Future.

#ifndef COEXEC_DETAIL_BRIDGE_NS
#error "include <coexec/asio.h> (standalone Asio) or <coexec/boost_asio.h> (Boost.Asio), not this file"
#endif

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

#include "coexec/Future.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/AsioBridge.h"
#include "coexec/detail/Diagnostics.h"
#include "coexec/detail/OwningCallableFuture.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/ResultCore.h"

namespace COEXEC_DETAIL_BRIDGE_NS {

namespace detail {
template <class R>
struct AsyncWaitInitiation;
}  // namespace detail

/// The completion signature of asyncWait() on a Future<R>:
/// `void(std::exception_ptr, R)`, or `void(std::exception_ptr)` for R = void.
template <class R>
using AsyncWaitSignature = typename detail::AsyncWaitSignature<R>::type;

/// `asyncWait(future, token)`: an Asio asynchronous operation that completes
/// when the task behind `future` settles, with its result: `(nullptr, value)`,
/// or `(error, R{})` where `error` holds what the task threw (its own
/// exception, OperationCancelled, RejectedExecution, BrokenPromise). Works
/// with every completion token: `asio::use_awaitable`,
/// `asio::experimental::deferred`, `asio::use_future`, a callback (usually
/// bound to an executor with `asio::bind_executor`), and the
/// `asio::experimental::as_tuple`-style adapters.
///
/// Borrows `future`: the operation keeps its own reference to the task's
/// state, so `future` may even be destroyed before it completes. The result
/// is consumed by the operation (a later `future.get()` throws
/// std::logic_error); `isDone()`, `isCancelled()` and `cancel()` stay usable.
/// With a deferred token the state is taken when asyncWait() is called, the
/// wait starts when the deferred operation is launched.
///
/// Never blocks. Where the handler runs: on the handler's associated executor
/// (for `use_awaitable`, the coroutine's own; for a callback without one,
/// `asio::system_executor`), posted there (`blocking.never`) once the task
/// has settled, never on a pool thread and never inside asyncWait() itself,
/// even when the Future has settled already. Until then the operation holds
/// outstanding work on that executor (`outstanding_work.tracked`), so
/// `io_context::run()` does not return while the wait is pending.
///
/// Cancellation: a signal on the handler's associated cancellation slot (of
/// any type: terminal, partial or total; emitted for example by
/// `asio::experimental::awaitable_operators`' `||` when the other operation
/// wins, by `make_parallel_group`, or by hand) that arrives before the task
/// has settled cancels the task, as `future.cancel()` does (a queued task
/// never runs; a running one has its token cancelled; a coroutine task is
/// woken with OperationCancelled at its next cancellable await), and the
/// operation completes, once the task has settled, with
/// `std::system_error(asio::error::operation_aborted)` as its exception_ptr
/// (with Boost.Asio, coexec::basio::asyncWait: a
/// `boost::system::system_error`, as Boost.Asio's own operations throw) and
/// the result, if any, dropped. The wait is structured: the handler
/// never runs while the task still runs, so a task may use what the awaiting
/// coroutine owns; a task that ignores its token delays the completion. A
/// signal that arrives after the task settled changes nothing.
///
/// \throws std::logic_error (from asyncWait() itself, whatever the token, a
/// deferred one included: nothing is started) if `future` is empty.
/// \throws std::bad_alloc. A Future whose result was consumed already
/// completes with the std::logic_error.
///
/// Thread safety: as for consuming a Future (one consumer: neither awaited
/// nor waited on by anyone else while the operation is pending). The
/// cancellation slot follows Asio's rules: emit on the handler's executor.
/// \note `R` must be default-constructible (for the error completion) and
/// move-assignable: for a type that is not, have the task return
/// std::optional<T> (or std::unique_ptr<T>); for a Future<T&> use a
/// Future<T*>.
template <class R, class CompletionToken>
auto asyncWait(Future<R>& future, CompletionToken&& token) {
  static_assert(std::is_void_v<R> || (std::is_default_constructible_v<R> && std::is_move_assignable_v<R>),
                "coexec::asyncWait: the Future's value type must be default-constructible (it is passed, "
                "default-constructed, with the exception_ptr of a failed task) and move-assignable. For a type "
                "that is not, have the task return std::optional<T> (or std::unique_ptr<T>) and wait for that "
                "Future; for a Future<T&>, use a Future<T*>");
  return asio::async_initiate<CompletionToken, AsyncWaitSignature<R>>(detail::AsyncWaitInitiation<R>{}, token,
                                                                      detail::asyncWaitCore(future));
}

/// asyncWait() taking the Future over (`asyncWait(std::move(f), token)`, or a
/// Future returned by a call, such as `asyncWait(pool.submit([&] {...}),
/// use_awaitable)`): `future` is left empty. Otherwise as above.
template <class R, class CompletionToken>
auto asyncWait(Future<R>&& future, CompletionToken&& token) {
  Future<R> owned = std::move(future);
  return asyncWait(owned, std::forward<CompletionToken>(token));
}

/// asyncWait() taking over the Future of a submission that took over a
/// callable temporary with a destructor (`pool.submit([s] {...})`, see
/// detail/OwningCallableFuture.h). On GCC 12 and older it is refused at
/// compile time, whatever the completion token: inside a `co_await`
/// expression GCC 12 destroys that callable's captures twice (a
/// std::string capture is freed twice), and asyncWait cannot tell whether
/// it is inside one. Name the Future first, which builds everywhere:
/// `auto f = pool.submit([s] {...}); co_await asyncWait(f, use_awaitable);`
/// (docs/asio.md). Elsewhere as the form above.
template <class Base, class CompletionToken>
auto asyncWait(detail::OwningCallableFuture<Base>&& future, CompletionToken&& token) {
#if COEXEC_GCC_CO_AWAIT_TEMPORARY_BUG
  static_assert(detail::kAlwaysFalse<Base>,
                "coexec: GCC 12 miscompiles temporaries in a co_await expression; name the Future first: "
                "auto f = pool.submit(...); co_await asyncWait(f, use_awaitable);  (refused because the callable "
                "handed over inside this expression is not trivially destructible: inside a co_await expression GCC "
                "12 destroys its captures twice, and a capture that owns memory, such as a std::string, is freed "
                "twice. Capture-less lambdas and lambdas that capture only references, pointers and integers, such "
                "as [&], are accepted. See docs/asio.md)");
#endif
  Future<typename detail::FutureTraits<Base>::Result> owned = std::move(future);
  return asyncWait(owned, std::forward<CompletionToken>(token));
}

namespace detail {

/// One pending asyncWait: the handler, the work it holds on its executor and
/// the task's state, in one allocation made with the handler's associated
/// allocator (Asio's recycling allocator by default).
///
/// state_ orders the two events that may race: the task settling (kSettled,
/// the core's continuation, on the settling thread) and a cancellation
/// signal (kAborted, on the thread that emits it). Whichever comes first
/// decides: a signal before kSettled cancels the task and makes the
/// completion operation_aborted; one after it does nothing. The completion
/// is posted by the settling side only, so it runs once, after the task has
/// settled.
template <class R, class Handler>
class AsyncWaitOperation {
  using Executor = asio::associated_executor_t<Handler>;
  using WorkExecutor =
      std::decay_t<typename asio::prefer_result<Executor, asio::execution::outstanding_work_t::tracked_t>::type>;
  using Allocator = asio::associated_allocator_t<Handler, asio::recycling_allocator<void>>;
  using OwnAllocator = typename std::allocator_traits<Allocator>::template rebind_alloc<AsyncWaitOperation>;

 public:
  /// The initiation: takes the handler over. \throws std::bad_alloc (then
  /// nothing is started and the handler is destroyed).
  static void start(Handler&& handler, Ref<ResultCore<R>> core) {
    OwnAllocator allocator(asio::get_associated_allocator(handler, asio::recycling_allocator<void>()));
    AsyncWaitOperation* const op = std::allocator_traits<OwnAllocator>::allocate(allocator, 1);
    try {
      ::new (static_cast<void*>(op)) AsyncWaitOperation(std::move(handler), std::move(core));
    } catch (...) {
      std::allocator_traits<OwnAllocator>::deallocate(allocator, op, 1);
      throw;
    }
    auto slot = asio::get_associated_cancellation_slot(op->handler_);
    if (slot.is_connected()) {
      try {
        slot.template emplace<CancelHandler>(op);
      } catch (...) {
        destroy(op, allocator);
        throw;
      }
    }
    // Already settled: onSettled() posts the completion (never inline here).
    if (!op->core_->setContinuation(&AsyncWaitOperation::onSettled, op)) onSettled(op);
  }

 private:
  static constexpr std::uint8_t kSettled = 1;
  static constexpr std::uint8_t kAborted = 2;

  AsyncWaitOperation(Handler&& handler, Ref<ResultCore<R>> core)
      : handler_(std::move(handler)),
        work_(asio::prefer(asio::get_associated_executor(handler_), asio::execution::outstanding_work.tracked)),
        core_(std::move(core)) {}

  /// The cancellation slot's handler, on the emitting thread.
  struct CancelHandler {
    explicit CancelHandler(AsyncWaitOperation* op) noexcept : op_(op) {}
    void operator()(asio::cancellation_type_t type) const noexcept {
      if (type == asio::cancellation_type::none) return;
      // acq_rel: against onSettled's fetch_or; the first one decides.
      const std::uint8_t before = op_->state_.fetch_or(kAborted, std::memory_order_acq_rel);
      // Before the settlement the operation is alive (it is freed only after
      // the completion, which clears this slot first, on this executor).
      if ((before & kSettled) == 0) (void)op_->core_->requestCancel();  // may settle (and post) here
    }
    AsyncWaitOperation* op_;
  };

  /// Owns the operation until it runs (an executor destroyed with the
  /// function unrun, like a stopped io_context's, destroys the operation and
  /// its handler, as Asio does with its own operations).
  class Completion {
   public:
    explicit Completion(AsyncWaitOperation* op) noexcept : op_(op) {}
    Completion(Completion&& other) noexcept : op_(std::exchange(other.op_, nullptr)) {}
    Completion& operator=(Completion&&) = delete;
    ~Completion() {
      if (op_ == nullptr) return;
      if (tlsPosting != nullptr && tlsPosting->op == op_) {
        tlsPosting->dropped = true;  // dropped inside onSettled's execute: it decides
        return;
      }
      destroy(op_, op_->allocator());
    }
    void operator()() { std::exchange(op_, nullptr)->complete(); }

   private:
    AsyncWaitOperation* op_;
  };

  /// The task's continuation: on the thread that settled it (a pool thread,
  /// or the canceller's), or in start() if it had settled already.
  static void onSettled(void* self) noexcept {
    auto* op = static_cast<AsyncWaitOperation*>(self);
    const std::uint8_t before = op->state_.fetch_or(kSettled, std::memory_order_acq_rel);
    op->aborted_ = (before & kAborted) != 0;  // read by complete(), after the post
    // Posted (blocking.never): not inside start(), nor inside a cancellation
    // signal's emit(), whose slot complete() clears.
    Posting posting{op, false};
    Posting* const outer = std::exchange(tlsPosting, &posting);
    try {
      asio::execution::execute(
          asio::prefer(op->work_, asio::execution::blocking.never, asio::execution::relationship.continuation,
                       asio::execution::allocator(op->allocator())),
          Completion(op));
    } catch (...) {
      // An executor that refuses work (an AsioPoolExecutor on a saturated
      // pool under abort()): dispatch, which such an executor never refuses
      // (it runs the completion here instead).
      if (posting.dropped) {
        posting.dropped = false;
        try {
          asio::execution::execute(
              asio::prefer(op->work_, asio::execution::blocking.possibly, asio::execution::allocator(op->allocator())),
              Completion(op));
        } catch (...) {
          posting.dropped = true;  // nowhere to run it
        }
      }
    }
    tlsPosting = outer;
    // Dropped unrun by the executor: destroyed with its handler, uncalled,
    // as Asio does with the work an executor drops. (Otherwise the
    // operation may be gone already: it completed inline.)
    if (posting.dropped) destroy(op, op->allocator());
  }

  /// On the handler's executor: takes the result, frees the operation, then
  /// calls the handler (Asio's rule: memory is released before the upcall).
  void complete() {
    auto slot = asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.clear();
    OwnAllocator allocator = this->allocator();
    Handler handler(std::move(handler_));
    [[maybe_unused]] WorkExecutor work(std::move(work_));  // released after the handler has run
    Ref<ResultCore<R>> core = std::move(core_);
    const bool aborted = aborted_;
    destroy(this, allocator);

    std::exception_ptr error;
    if constexpr (std::is_void_v<R>) {
      try {
        core->takeResult();
      } catch (...) {
        error = std::current_exception();
      }
      if (aborted) error = abortedError();
      std::move(handler)(std::move(error));
    } else {
      R value{};  // (not an optional: GCC 12 -O2 then warns of a maybe-uninitialized read inside Asio)
      try {
        value = core->takeResult();
      } catch (...) {
        error = std::current_exception();
      }
      if (aborted) error = abortedError();
      if (error) {
        std::move(handler)(std::move(error), R{});
      } else {
        std::move(handler)(std::exception_ptr(), std::move(value));
      }
    }
  }

  static std::exception_ptr abortedError() {
    return std::make_exception_ptr(AsioSystemError(asio::error::operation_aborted));
  }

  OwnAllocator allocator() const noexcept {
    return OwnAllocator(asio::get_associated_allocator(handler_, asio::recycling_allocator<void>()));
  }

  static void destroy(AsyncWaitOperation* op, OwnAllocator allocator) noexcept {
    op->~AsyncWaitOperation();
    std::allocator_traits<OwnAllocator>::deallocate(allocator, op, 1);
  }

  /// The operation onSettled() is handing to its executor on this thread,
  /// and whether the executor dropped it unrun.
  struct Posting {
    AsyncWaitOperation* op;
    bool dropped;
  };
  static inline thread_local Posting* tlsPosting = nullptr;

  Handler handler_;
  WorkExecutor work_;
  Ref<ResultCore<R>> core_;
  std::atomic<std::uint8_t> state_{0};  // kSettled | kAborted
  bool aborted_ = false;                // written by onSettled before the post
};

template <class R>
struct AsyncWaitInitiation {
  template <class Handler>
  void operator()(Handler&& handler, Ref<ResultCore<R>> core) const {
    AsyncWaitOperation<R, std::decay_t<Handler>>::start(std::decay_t<Handler>(std::forward<Handler>(handler)),
                                                        std::move(core));
  }
};

}  // namespace detail
}  // namespace COEXEC_DETAIL_BRIDGE_NS
