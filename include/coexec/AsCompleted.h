// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <ranges>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "coexec/CancellationToken.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/CombinatorAccess.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/ResultCore.h"
#include "coexec/detail/ResumePoint.h"
#include "coexec/detail/RunSegments.h"
#include "coexec/detail/SlotArray.h"

namespace coexec {

namespace detail {
template <class R>
class CompletionQueue;
template <class R>
class NextAwaiter;
}  // namespace detail

/// The Futures given to asCompleted(), handed back in the order they settle
/// (Python's `as_completed`, Java's `ExecutorCompletionService`):
///
/// ```
/// auto completions = coexec::asCompleted(std::move(futures));
/// while (std::optional<coexec::Future<int>> done = co_await completions.next()) {
///   int value = done->get();  // settled: get() returns or throws at once
/// }
/// ```
///
/// Each input is yielded exactly once, settled, whatever it ended with (a
/// value, an exception, OperationCancelled); inputs that had settled before
/// asCompleted() come first, in input order. Destroying an AsCompleted never
/// blocks and cancels nothing (like dropping the Futures; see
/// cancelRemaining()).
///
/// Thread safety: one consumer at a time calls next(); remaining(),
/// size() and cancelRemaining() may be called from any thread, also while
/// the consumer waits (a timer may cancel the stragglers); the inputs may
/// settle on any thread meanwhile.
template <class R>
class [[nodiscard]] AsCompleted {
 public:
  /// Takes over `other`'s inputs. Never blocks.
  AsCompleted(AsCompleted&&) noexcept = default;
  /// Drops the Futures not yet yielded, as the destructor does (their tasks go
  /// on), then takes over `other`'s inputs. Never blocks.
  AsCompleted& operator=(AsCompleted&&) noexcept = default;
  AsCompleted(const AsCompleted&) = delete;
  AsCompleted& operator=(const AsCompleted&) = delete;
  /// Never blocks. The Futures not yet yielded are dropped: their tasks go
  /// on (cancelRemaining() first to stop them).
  ~AsCompleted() = default;

  /// `co_await completions.next()`: the next input to settle, as a settled
  /// Future (read it with get()), or std::nullopt once every input has been
  /// yielded. Suspends the awaiting coroutine while none is ready (never
  /// blocks a thread); it resumes where it was running (inline on the thread
  /// that settles the input if that thread belongs to its executor, else
  /// posted there). If the awaiting coroutine's task is cancelled while it
  /// waits, every input not yet settled is cancelled, and once all have
  /// settled the `co_await` throws OperationCancelled; they are then yielded
  /// by the next calls like any other. The AsCompleted must outlive the
  /// await. \throws OperationCancelled as above; std::logic_error if this
  /// AsCompleted was moved from.
  [[nodiscard]] detail::NextAwaiter<R> next();

  /// How many inputs have not been yielded yet. Never blocks (a brief lock).
  [[nodiscard]] std::size_t remaining() const;
  /// How many inputs there are in all.
  [[nodiscard]] std::size_t size() const noexcept { return queue_ ? queue_->size() : 0; }

  /// Cancels every input that has not settled yet (Future::cancel(): a
  /// queued task never starts, a running one has its token cancelled); each
  /// is still yielded once it has settled. Returns how many were cancelled
  /// (cancel() returned true). Never blocks (cancellation callbacks run on
  /// this thread); a next() waiting meanwhile resumes on its own executor,
  /// never inside this call. Cost: O(n).
  std::size_t cancelRemaining();

 private:
  template <class Range>
  friend auto asCompleted(Range&& futures);
  explicit AsCompleted(detail::Ref<detail::CompletionQueue<R>> queue) noexcept : queue_(std::move(queue)) {}

  detail::Ref<detail::CompletionQueue<R>> queue_;
};

/// Takes the Futures of `futures` (a range of `Future<R>`, as an rvalue or an
/// lvalue: either way its Futures are moved out and left empty) and returns
/// the AsCompleted that hands them back in completion order. Never blocks;
/// starts nothing (the Futures' tasks run already).
/// \throws std::invalid_argument if a Future is empty, before any is taken;
/// std::bad_alloc. Cost: O(n); two allocations (the shared state and one
/// array for the n inputs).
template <class Range>
[[nodiscard]] auto asCompleted(Range&& futures);

namespace detail {

template <class T>
struct FutureValue {
  static_assert(kAlwaysFalse<T>, "coexec: asCompleted takes a range of coexec::Future<R>");
};
template <class R>
struct FutureValue<Future<R>> {
  using type = R;
};

/// The state an AsCompleted shares with its inputs' continuations (each
/// unsettled input holds a reference) and with a parked next().
///
/// Locking: mutex_ guards settled_, yielded_, waiter_, cancelling_, and the
/// `order` fields of the slots. The slots' cores are written once, before
/// the queue is shared, and only read afterwards (from any thread).
template <class R>
class CompletionQueue final : public RefCounted, public Recycled {
 public:
  struct Slot {
    Ref<ResultCore<R>> core;  // set before the queue is shared; a yielded Future holds another reference
    CompletionQueue* owner = nullptr;
    std::size_t order = 0;  // slot k: the index of the k-th input to settle
  };

  explicit CompletionQueue(std::size_t n) { slots_.assign(n); }

  [[nodiscard]] std::size_t size() const noexcept { return slots_.size(); }

  /// Adopts input `i` (before anyone else sees the queue).
  void attach(std::size_t i, Ref<ResultCore<R>> core) noexcept {
    Slot& slot = slots_[i];
    slot.core = std::move(core);
    slot.owner = this;
    addRef();  // the continuation's, released once it has run
    if (!slot.core->setContinuation(&CompletionQueue::onSettled, &slot)) onSettled(&slot);
  }

  [[nodiscard]] std::size_t remaining() const {
    std::lock_guard lock(mutex_);
    return slots_.size() - yielded_;
  }

  /// The next settled input, or nullopt if all were yielded. Consumer only.
  std::optional<Future<R>> take() {
    std::lock_guard lock(mutex_);
    if (yielded_ == slots_.size()) return std::nullopt;
    if (yielded_ == settled_) {
      throw std::logic_error("coexec::AsCompleted: no input has settled yet (await next() instead)");
    }
    const Slot& slot = slots_[slots_[yielded_++].order];
    return CombinatorAccess::future<R>(slot.core);  // a new reference: the slot's stays (see the class comment)
  }

  /// AsCompleted::cancelRemaining(), from any thread: cancels every input,
  /// and resumes a parked next() only afterwards, posted (never inside this
  /// call, which goes on using the queue). Returns how many had not settled.
  std::size_t cancelRemaining() noexcept {
    addRef();  // the resumed consumer may drop its AsCompleted meanwhile
    {
      std::lock_guard lock(mutex_);
      ++cancelling_;
    }
    const std::size_t cancelled = cancelUnsettled();
    ResumePoint resumed;
    {
      std::lock_guard lock(mutex_);
      --cancelling_;
      resumed = takeWaiterLocked();
    }
    {
      const NoInlineResumption posted;
      resumed.resume();
    }
    release();  // may destroy the queue
    return cancelled;
  }

  /// Requests cancellation of every input; true for those that had not
  /// settled. Inline settles come back through onSettled(), which resumes a
  /// parked next() unless a cancellation is at work (cancelling_).
  std::size_t cancelUnsettled() noexcept {
    std::size_t cancelled = 0;
    for (Slot& slot : slots_) {
      if (slot.core->requestCancel()) ++cancelled;
    }
    return cancelled;
  }

  /// For NextAwaiter::await_ready: true if next() can answer now.
  [[nodiscard]] bool ready() const {
    std::lock_guard lock(mutex_);
    return yielded_ < settled_ || yielded_ == slots_.size();
  }

  enum class Park : std::uint8_t { parked, ready, cancelled };

  /// Parks `waiter` unless next() can answer now. `all`: wait until every
  /// input has settled (the awaiting task was cancelled). Returns cancelled
  /// (nothing parked) if the awaiting task was cancelled before it could
  /// park: the caller cancels the inputs and parks again with `all`.
  Park park(NextAwaiter<R>& waiter, bool all) {
    std::lock_guard lock(mutex_);
    if (!all && waiter.cancelledEarly_) return Park::cancelled;
    if (all ? settled_ == slots_.size() : (yielded_ < settled_ || yielded_ == slots_.size())) return Park::ready;
    waiter_ = &waiter;
    waitAll_ = all;
    return Park::parked;
  }

  /// The awaiting task of `waiter` was cancelled (its registration's
  /// callback, on the cancelling thread). If `waiter` is parked: cancel the
  /// inputs, and resume it once all have settled (it then throws
  /// OperationCancelled). If not parked yet, only notes it for park().
  void cancelFor(NextAwaiter<R>& waiter) noexcept {
    {
      std::lock_guard lock(mutex_);
      if (waiter_ != &waiter) {
        waiter.cancelledEarly_ = true;  // not parked yet (or resumed already: then unused)
        return;
      }
      waiter.cancelled_ = true;
      waitAll_ = true;
      ++cancelling_;  // no resumption while we cancel: the slots are ours to read
    }
    cancelUnsettled();
    ResumePoint resumed;
    {
      std::lock_guard lock(mutex_);
      --cancelling_;
      resumed = takeWaiterLocked();
    }
    {
      const NoInlineResumption posted;  // never inside the canceller's requestCancellation()
      resumed.resume();
    }
  }

 private:
  // The input's continuation, on the thread that settled it.
  static void onSettled(void* context) noexcept {
    Slot& settledSlot = *static_cast<Slot*>(context);
    CompletionQueue& queue = *settledSlot.owner;
    ResumePoint resumed;
    {
      std::lock_guard lock(queue.mutex_);
      queue.slots_[queue.settled_++].order = static_cast<std::size_t>(&settledSlot - queue.slots_.data());
      resumed = queue.takeWaiterLocked();
    }
    resumed.resume();
    queue.release();  // may destroy the queue
  }

  // Requires: mutex_ held.
  ResumePoint takeWaiterLocked() noexcept;

  mutable std::mutex mutex_;
  SlotArray<Slot> slots_;
  std::size_t settled_ = 0;           // guarded by mutex_
  std::size_t yielded_ = 0;           // guarded by mutex_
  NextAwaiter<R>* waiter_ = nullptr;  // guarded by mutex_
  bool waitAll_ = false;              // guarded by mutex_
  std::size_t cancelling_ = 0;        // guarded by mutex_
};

/// What `co_await completions.next()` evaluates to. Awaited once; neither
/// copyable nor movable (the parked state refers to it).
template <class R>
class NextAwaiter {
 public:
  explicit NextAwaiter(CompletionQueue<R>& queue) noexcept : queue_(&queue) {}
  NextAwaiter(const NextAwaiter&) = delete;
  NextAwaiter& operator=(const NextAwaiter&) = delete;

  bool await_ready() const { return queue_->ready(); }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> awaiting) {
    TaskContext* const context = taskContextOf(awaiting);
    task_ = taskOf(context);
    suspendCalled_ = true;
    return suspendingSegment(task_, [&] { return suspend(awaiting, context); });
  }
  std::optional<Future<R>> await_resume() {
    // The coroutine goes on: its task's code again (see currentTask()), in a
    // new run segment.
    if (suspendCalled_) setCurrentTask(task_);
    segmentGoesOn(task_);
    registration_.reset();
    if (cancelled_) throw OperationCancelled();
    return queue_->take();
  }

 private:
  friend class CompletionQueue<R>;

  bool suspend(std::coroutine_handle<> awaiting, TaskContext* context) {
    CancellationToken token;
    if (context != nullptr) token = context->cancellationToken();  // may throw: not suspended
    parked_.record(awaiting, taskOf(context));
    bool all = token.isCancellationRequested();
    if (!all && token.canBeCancelled()) {
      try {
        registration_.emplace(token, [this] { queue_->cancelFor(*this); });
      } catch (...) {
        parked_.forget();
        throw;
      }
    }
    while (true) {
      if (all) {
        // Cancelled before we parked: cancel the inputs here, then wait for
        // them all (or go on at once if they have settled).
        cancelled_ = true;
        queue_->cancelUnsettled();
      }
      switch (queue_->park(*this, all)) {
        case CompletionQueue<R>::Park::parked: return true;  // an input's continuation resumes us
        case CompletionQueue<R>::Park::ready: parked_.forget(); return false;
        case CompletionQueue<R>::Park::cancelled: all = true; break;
      }
    }
  }

  CompletionQueue<R>* queue_;
  ResumePoint parked_;
  bool cancelled_ = false;       // written before the resumption (under the queue's mutex, or while arming)
  bool cancelledEarly_ = false;  // guarded by the queue's mutex
  bool suspendCalled_ = false;    // await_suspend ran: task_ is the coroutine's task
  TaskCore* task_ = nullptr;
  // Last, so destroyed first: its destructor waits for cancelFor() running
  // on another thread.
  std::optional<CancellationRegistration> registration_;
};

template <class R>
ResumePoint CompletionQueue<R>::takeWaiterLocked() noexcept {
  ResumePoint taken;
  if (waiter_ == nullptr || cancelling_ != 0) return taken;
  if (waitAll_ ? settled_ != slots_.size() : yielded_ == settled_ && yielded_ != slots_.size()) return taken;
  taken = waiter_->parked_;
  waiter_ = nullptr;
  return taken;
}

}  // namespace detail

template <class R>
detail::NextAwaiter<R> AsCompleted<R>::next() {
  if (!queue_) throw std::logic_error("coexec::AsCompleted::next: this AsCompleted was moved from");
  return detail::NextAwaiter<R>(*queue_);
}

template <class R>
std::size_t AsCompleted<R>::remaining() const {
  return queue_ ? queue_->remaining() : 0;
}

template <class R>
std::size_t AsCompleted<R>::cancelRemaining() {
  return queue_ ? queue_->cancelRemaining() : 0;
}

template <class Range>
auto asCompleted(Range&& futures) {
  static_assert(std::ranges::forward_range<Range>, "coexec: asCompleted takes a forward range of Futures");
  using Element = std::remove_cvref_t<std::ranges::range_reference_t<Range>>;
  using R = typename detail::FutureValue<Element>::type;
  static_assert(!std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<Range>>>,
                "coexec: asCompleted takes the Futures over, so the range must not be const");
  std::size_t n = 0;
  for (auto&& future : futures) {
    if (!future.valid()) {
      throw std::invalid_argument("coexec::asCompleted: a Future is empty (default-constructed or moved from)");
    }
    ++n;
  }
  auto queue = detail::Ref<detail::CompletionQueue<R>>::adopt(new detail::CompletionQueue<R>(n));
  std::size_t i = 0;
  for (auto&& future : futures) {
    Future<R> taken = std::move(future);  // the caller's Future is left empty
    detail::ResultCore<R>* core = detail::CombinatorAccess::core(taken);
    core->addRef();
    queue->attach(i++, detail::Ref<detail::ResultCore<R>>::adopt(core));
  }
  return AsCompleted<R>(std::move(queue));
}

}  // namespace coexec
