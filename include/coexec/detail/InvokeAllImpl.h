// SPDX-License-Identifier: BSL-1.0
#pragma once

// The awaitable behind ThreadPoolExecutor::invokeAll and invokeAny (declared
// in ThreadPoolExecutor.h; coexec/InvokeAll.h includes this file).
//
// Each task becomes a pool task whose Future only this awaitable holds; the
// task's one continuation (TaskCore::setContinuation) is this awaitable's,
// and it stores the result in the task's slot and calls
// FanIn::childSettled(). The slots are one array (SlotArray); the awaitable
// itself lives in the awaiting coroutine's frame.

#include <algorithm>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <ranges>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/CombinatorAccess.h"
#include "coexec/detail/CoroutineTask.h"
#include "coexec/detail/FanIn.h"
#include "coexec/detail/ResultCore.h"
#include "coexec/detail/SlotArray.h"
#include "coexec/detail/Time.h"

namespace coexec::detail {

/// The element type of a range of tasks.
template <class Range>
using TaskRangeElement = std::remove_cvref_t<std::ranges::range_reference_t<Range>>;

/// `co_await pool.invokeAll(tasks)` (Any = false) and `co_await
/// pool.invokeAny(tasks)` (Any = true). Does nothing until awaited; awaited
/// once. Neither copyable nor movable (the tasks refer to it): name it with
/// `auto all = pool.invokeAll(tasks);` or await the temporary.
template <class Range, bool Any>
class [[nodiscard]] InvokeAwaitable final : private FanIn {
  static_assert(std::ranges::forward_range<Range>,
                "coexec: invokeAll/invokeAny take a forward range (std::vector, std::array, std::list, a view...) of "
                "callables or of Task<T>");
  using Element = TaskRangeElement<Range>;
  static constexpr bool kTasks = IsTask<Element>::value;
  static constexpr bool kOwnsRange = !std::is_lvalue_reference_v<Range>;
  static_assert(kTasks || std::is_invocable_v<Element&> || kTakesToken<Element>,
                "coexec: the elements of the range must be callable as f(), f(CancellationToken) or "
                "f(std::stop_token), or be Task<T>");
  static_assert(kOwnsRange || kTasks || std::is_copy_constructible_v<Element>,
                "coexec: invokeAll/invokeAny copy the callables of a range passed as an lvalue (the range stays as it "
                "was); pass a range of move-only callables as an rvalue: pool.invokeAll(std::move(tasks))");
  static_assert(!kTasks || !std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<Range>>>,
                "coexec: invokeAll/invokeAny take the Tasks of the range over, so the range must not be const");
  using R = SubmitResult<Element>;
  static_assert(!std::is_reference_v<R>,
                "coexec: invokeAll/invokeAny of tasks returning a reference is not supported: return a value or a "
                "pointer");
  using Stored = std::conditional_t<kOwnsRange, std::remove_cvref_t<Range>, std::remove_reference_t<Range>*>;

 public:
  /// What `co_await` returns: std::vector<R> (void for void tasks) for
  /// invokeAll, R for invokeAny.
  using Result = std::conditional_t<Any, R, std::conditional_t<std::is_void_v<R>, void, std::vector<R>>>;

  InvokeAwaitable(ThreadPoolExecutor& pool, Range&& tasks, std::optional<Clock::duration> timeout)
      : FanIn(Any ? StopRule::onSuccess : StopRule::onFailure),
        pool_(&pool),
        tasks_(store(std::forward<Range>(tasks))),
        timeout_(timeout) {}
  ~InvokeAwaitable() = default;

  /// What `co_await` uses (see FanInAwaiter).
  using Awaiter = FanInAwaiter<InvokeAwaitable>;

  /// Awaiting a named awaitable.
  Awaiter operator co_await() & noexcept { return Awaiter(*this); }
  /// Awaiting the temporary, on every compiler: it lives to the end of the
  /// full expression. An rvalue range moved in (`co_await
  /// pool.invokeAll(std::move(tasks))`) is destroyed once on GCC 12 too
  /// (tests/GccCoroutineBugsTest.cpp); GCC 12 rejects a braced list in a
  /// co_await expression itself ("array used as initializer").
  Awaiter operator co_await() && noexcept { return Awaiter(*this); }

 private:
  friend class FanInAwaiter<InvokeAwaitable>;
  struct Slot {
    Ref<ResultCore<R>> core;  // the task; null if it never started
    InvokeAwaitable* owner = nullptr;
    std::optional<StoredValue<R>> value;  // written by the task's continuation
    std::exception_ptr error;             // ditto
  };

  enum class Outcome : std::uint8_t { pending, invalid, timedOutAtOnce };

  static constexpr const char* operation() noexcept {
    return Any ? "ThreadPoolExecutor::invokeAny" : "ThreadPoolExecutor::invokeAll";
  }
  static constexpr const char* shortName() noexcept { return Any ? "invokeAny" : "invokeAll"; }

  static Stored store(Range&& tasks) {
    if constexpr (kOwnsRange) {
      return Stored(std::move(tasks));
    } else {
      return &tasks;
    }
  }
  auto& range() noexcept {
    if constexpr (kOwnsRange) {
      return tasks_;
    } else {
      return *tasks_;
    }
  }

  // True (go on at once) for an empty range. \throws std::logic_error if
  // this awaitable was awaited before.
  bool ready() {
    if (awaited_) {
      throw std::logic_error(std::string("coexec::") + operation() +
                             ": this awaitable was already awaited (it runs its tasks once)");
    }
    awaited_ = true;
    return std::ranges::empty(range());
  }

  // The outcome, on the awaiting coroutine's thread once every task settled.
  Result result() {
    endWait();
    if (outcome_ == Outcome::invalid) std::rethrow_exception(invalid_);
    if (outcome_ == Outcome::timedOutAtOnce) throwCombinatorTimeout(operation(), *timeout_);
    if (slots_.size() == 0 && stopReason() == StopReason::none) {  // an empty range
      if constexpr (Any) {
        throw std::invalid_argument(
            "coexec::ThreadPoolExecutor::invokeAny: the range of tasks is empty, so there is no result to return");
      } else {
        return Result();
      }
    }
    if (refusal()) std::rethrow_exception(refusal());
    switch (stopReason()) {
      case StopReason::parentCancelled: throw OperationCancelled();
      case StopReason::childFailed: std::rethrow_exception(slots_[stopIndex()].error);
      case StopReason::timedOut:
        if (Any || !allSucceeded()) throwCombinatorTimeout(operation(), *timeout_);
        break;
      default: break;
    }
    if constexpr (Any) {
      if (stopReason() != StopReason::childSucceeded) throw AllFailed(errors());
      if constexpr (!std::is_void_v<R>) return std::move(*slots_[stopIndex()].value);
    } else if constexpr (!std::is_void_v<R>) {
      std::vector<R> results;
      results.reserve(slots_.size());
      for (Slot& slot : slots_)
        results.push_back(std::move(*slot.value));
      return results;
    }
  }

  template <class E>
  static void validate(E& element) {
    if constexpr (kTasks) {
      (void)startableHandle(element, "ThreadPoolExecutor::", shortName());
    } else if constexpr (kMayBeEmpty<std::remove_cvref_t<E>>) {
      if (!element) CombinatorAccess::throwEmptyCallable(shortName());
    }
  }
  template <class E>
  static PendingTask makeChild(E& element) {
    if constexpr (kOwnsRange || kTasks) {
      return CombinatorAccess::makeTask(std::move(element), shortName());
    } else {
      return CombinatorAccess::makeTask(element, shortName());  // a copy: the caller's range stays as it was
    }
  }

  bool start(std::coroutine_handle<> awaiting, ::coexec::detail::TaskContext* parent) {
    // Before anything starts: the input is checked, the slots allocated.
    try {
      for (auto&& element : range())
        validate(element);
      slots_.assign(static_cast<std::size_t>(std::ranges::distance(range())));
    } catch (...) {
      invalid_ = std::current_exception();
      outcome_ = Outcome::invalid;
      return false;
    }
    Clock::time_point deadline{};
    if (timeout_) {
      if (*timeout_ <= Clock::duration::zero()) {
        outcome_ = Outcome::timedOutAtOnce;
        return false;
      }
      deadline = saturatedAdd(pool_->clock().now(), *timeout_);
    }
    try {
      CombinatorAccess::throwIfShutdown(*pool_, operation(), slots_.size());  // whatever the policy: nothing starts
    } catch (...) {
      invalid_ = std::current_exception();
      outcome_ = Outcome::invalid;
      return false;
    }
    // The awaiting task is cancelled already: no task of ours has started.
    if (!beginArming(awaiting, parent, timeout_.has_value(), IfParentCancelled::startNothing)) return false;
    reserveChildren(slots_.size());
    std::size_t started = 0;
    for (auto&& element : range()) {
      if (stopping()) break;  // a task failed (or, for invokeAny, succeeded) already: start no more
      Slot& slot = slots_[started];
      slot.owner = this;
      try {
        PendingTask task = makeChild(element);
        slot.core = CombinatorAccess::resultCore<R>(task);
        ++started;  // from here on it settles, one way or another
        // Queued, so it cannot have settled: the continuation is ours for sure.
        (void)slot.core->setContinuation(&InvokeAwaitable::onSettled, &slot);
        // Refused: the task is abandoned with the error (its continuation
        // counts it as settled) and the error is rethrown here.
        CombinatorAccess::admit(*pool_, std::move(task));
      } catch (...) {
        refuse(std::current_exception());
        break;
      }
    }
    if (timeout_) {
      try {
        armTimeout(*pool_, deadline);
      } catch (...) {
        refuse(std::current_exception());
      }
    }
    return finishArming(slots_.size() - started);
  }

  // The task's continuation, on the thread that settled it.
  static void onSettled(void* context) noexcept {
    Slot& slot = *static_cast<Slot*>(context);
    InvokeAwaitable& self = *slot.owner;
    bool failed = false;
    try {
      if constexpr (std::is_void_v<R>) {
        slot.core->takeResult();
        slot.value.emplace();
      } else {
        slot.value.emplace(slot.core->takeResult());
      }
    } catch (...) {
      slot.error = std::current_exception();
      failed = true;
    }
    self.childSettled(failed, static_cast<std::size_t>(&slot - self.slots_.data()));  // may resume the awaiter
  }

  // Last to first: the tasks were admitted in input order, so the later ones
  // are the likelier to be queued. Cancelling them first means that a thread
  // freed by a running task's cancellation finds them cancelled, instead of
  // starting one before its turn to be cancelled comes.
  void cancelChildren() noexcept override {
    for (std::size_t i = slots_.size(); i > 0; --i) {
      if (slots_[i - 1].core) slots_[i - 1].core->requestCancel();  // false for one that settled: harmless
    }
  }

  [[nodiscard]] bool allSucceeded() const noexcept {
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (!slots_[i].value) return false;
    return true;
  }
  [[nodiscard]] std::vector<std::exception_ptr> errors() const {
    std::vector<std::exception_ptr> all;
    all.reserve(slots_.size());
    for (std::size_t i = 0; i < slots_.size(); ++i)
      all.push_back(slots_[i].error);
    return all;
  }

  ThreadPoolExecutor* pool_;
  Stored tasks_;
  std::optional<Clock::duration> timeout_;
  SlotArray<Slot> slots_;
  std::exception_ptr invalid_;
  Outcome outcome_ = Outcome::pending;
  bool awaited_ = false;
};

}  // namespace coexec::detail

namespace coexec {

template <class Range>
detail::InvokeAwaitable<Range, false> ThreadPoolExecutor::invokeAll(Range&& tasks) {
  return detail::InvokeAwaitable<Range, false>(*this, std::forward<Range>(tasks), std::nullopt);
}

template <class Range, class Rep, class Period>
detail::InvokeAwaitable<Range, false> ThreadPoolExecutor::invokeAll(Range&& tasks,
                                                                    std::chrono::duration<Rep, Period> timeout) {
  return detail::InvokeAwaitable<Range, false>(*this, std::forward<Range>(tasks), detail::saturatedDuration(timeout));
}

template <class Range>
detail::InvokeAwaitable<Range, true> ThreadPoolExecutor::invokeAny(Range&& tasks) {
  return detail::InvokeAwaitable<Range, true>(*this, std::forward<Range>(tasks), std::nullopt);
}

template <class Range, class Rep, class Period>
detail::InvokeAwaitable<Range, true> ThreadPoolExecutor::invokeAny(Range&& tasks,
                                                                   std::chrono::duration<Rep, Period> timeout) {
  return detail::InvokeAwaitable<Range, true>(*this, std::forward<Range>(tasks), detail::saturatedDuration(timeout));
}

}  // namespace coexec
