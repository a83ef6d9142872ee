// SPDX-License-Identifier: BSL-1.0
#pragma once

// The awaitable behind whenAll() and whenAny(): a fixed set of children,
// each a Future (borrowed from the caller, or owned) or a Task run inline
// under a token of the combinator's own. Each child stores its result in
// itself and calls FanIn::childSettled(): a Future through its one
// continuation, a Task through its completion (it is a root task: nobody
// else awaits it).

#include <array>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/CombinatorAccess.h"
#include "coexec/detail/FanIn.h"
#include "coexec/detail/OwningCallableFuture.h"
#include "coexec/detail/ResultCore.h"

namespace coexec {
template <class... Ts>
struct WhenAnyResult;
}

namespace coexec::detail {

/// A Future argument: borrowed (an lvalue: the caller's Future, which
/// outlives the awaitable; its result is consumed) or owned (an rvalue,
/// moved in). Its one continuation is the combinator's. `Refused`: an
/// rvalue OwningCallableFuture, which the awaitable must not be awaited as a
/// temporary with on GCC 12.
template <class R, bool Owned, bool Refused>
class FutureChild {
 public:
  using Value = R;
  static constexpr bool kIsTask = false;
  static constexpr bool kRefusedTemporary = Refused;

  explicit FutureChild(Future<R>& future) noexcept requires(!Owned) : core_(CombinatorAccess::core(future)) {}
  explicit FutureChild(Future<R>&& future) noexcept requires(Owned)
      : future_(std::move(future)), core_(CombinatorAccess::core(future_)) {}
  FutureChild(const FutureChild&) = delete;
  FutureChild& operator=(const FutureChild&) = delete;

  /// \throws std::logic_error if the Future is empty.
  void validate(const char* operation) const {
    if (core_ == nullptr) {
      throw std::logic_error(std::string("coexec::") + operation +
                             ": a Future argument is empty (default-constructed or moved from)");
    }
    if (core_->hasContinuation()) TaskCore::throwSecondAwait(operation);
  }
  /// The task this child watches, to refuse one Future given twice.
  [[nodiscard]] const TaskCore* watched() const noexcept { return core_; }
  /// Watches the Future: childSettled() when it settles, at once if it has.
  void attach(FanIn& fanIn, std::size_t index) noexcept {
    fanIn_ = &fanIn;
    index_ = index;
    if (!core_->setContinuation(&FutureChild::onSettled, this)) onSettled(this);
  }
  void cancel() noexcept { core_->requestCancel(); }
  ChildResult<R>& result() noexcept { return result_; }

 private:
  // On the thread that settled the task.
  static void onSettled(void* self) noexcept {
    auto& child = *static_cast<FutureChild*>(self);
    const bool failed = child.result_.store([&]() -> decltype(auto) { return child.core_->takeResult(); });
    child.fanIn_->childSettled(failed, child.index_);
  }

  [[no_unique_address]] std::conditional_t<Owned, Future<R>, std::monostate> future_{};
  ResultCore<R>* core_;
  FanIn* fanIn_ = nullptr;
  std::size_t index_ = 0;
  ChildResult<R> result_;
};

/// A Task argument, run inline by the combinator as a root task under the
/// combinator's TaskContext (its token). Its frame is destroyed as soon as
/// it finishes.
template <class R>
class TaskChild {
  static_assert(!std::is_reference_v<R>, "coexec: whenAll/whenAny of a Task<T&> is not supported");

 public:
  using Value = R;
  static constexpr bool kIsTask = true;
  static constexpr bool kRefusedTemporary = false;

  explicit TaskChild(Task<R>&& task) noexcept : task_(std::move(task)) {}
  TaskChild(const TaskChild&) = delete;
  TaskChild& operator=(const TaskChild&) = delete;

  /// \throws std::invalid_argument if the Task is empty, std::logic_error if
  /// it was started.
  void validate(const char* operation) const { (void)startableHandle(task_, "", operation); }
  /// Runs the Task on this thread until it first suspends or finishes.
  void start(FanIn& fanIn, std::size_t index, TaskContext* context) noexcept {
    fanIn_ = &fanIn;
    index_ = index;
    const auto handle = task_.handle();
    handle.promise().setContext(context);
    handle.promise().setCompletion(&TaskChild::onFinished, this);
    resume(handle);  // `this` may have settled (and the awaiter resumed elsewhere) once this returns
  }
  void cancel() noexcept {}  // through the combinator's token
  ChildResult<R>& result() noexcept { return result_; }

 private:
  // Inside the Task's final suspension, on the thread that finished it.
  static void onFinished(void* self) noexcept {
    auto& child = *static_cast<TaskChild*>(self);
    const bool failed =
        child.result_.store([&]() -> decltype(auto) { return child.task_.handle().promise().result(); });
    child.task_ = Task<R>();  // the frame goes now: nothing runs in it any more
    child.fanIn_->childSettled(failed, child.index_);
  }

  Task<R> task_;
  FanIn* fanIn_ = nullptr;
  std::size_t index_ = 0;
  ChildResult<R> result_;
};

/// The child type for an argument of whenAll()/whenAny().
template <class Arg>
struct ChildFor {
  static_assert(kAlwaysFalse<Arg>,
                "coexec: whenAll/whenAny take Futures (named: whenAll(a, b)) and Tasks (temporaries, or "
                "std::move(task))");
};
/// A Future<R>, or a type derived from it (ScheduledFuture<R>, what a
/// submission of a callable temporary returns): borrowed as an lvalue, owned
/// as an rvalue.
template <class Arg>
  requires(FutureTraits<std::remove_cvref_t<Arg>>::kIsFuture && !std::is_const_v<std::remove_reference_t<Arg>>)
struct ChildFor<Arg> {
  using type = FutureChild<typename FutureTraits<std::remove_cvref_t<Arg>>::Result, !std::is_lvalue_reference_v<Arg>,
                           !std::is_lvalue_reference_v<Arg> && kIsOwningCallableFuture<std::remove_cvref_t<Arg>>>;
};
template <class R>
struct ChildFor<Task<R>> {
  using type = TaskChild<R>;
};
template <class R>
struct ChildFor<Task<R>&> {
  static_assert(kAlwaysFalse<R>,
                "coexec: whenAll/whenAny take a named Task over: pass it as std::move(task) (a Task runs once)");
};
template <class Arg>
using ChildOf = typename ChildFor<Arg>::type;

/// `co_await whenAll(...)` (Any = false) and `co_await whenAny(...)` (Any =
/// true). Does nothing until awaited; awaited once. Neither copyable nor
/// movable (the children refer to it).
template <bool Any, class... Children>
class [[nodiscard]] WhenAwaitable final : private FanIn {
  static_assert(sizeof...(Children) > 0, "coexec: whenAll/whenAny need at least one Future or Task");
  static constexpr std::size_t kCount = sizeof...(Children);
  static constexpr bool kRefusedTemporary = (Children::kRefusedTemporary || ...);
  static constexpr bool kHasTask = (Children::kIsTask || ...);
  static constexpr bool kHasFuture = (!Children::kIsTask || ...);
  using Indices = std::make_index_sequence<kCount>;

 public:
  /// What `co_await` returns.
  using Result = std::conditional_t<Any, WhenAnyResult<typename Children::Value...>,
                                    std::tuple<StoredValue<typename Children::Value>...>>;

  template <class... Args>
  explicit WhenAwaitable(Args&&... args)
      : FanIn(Any ? StopRule::onCompletion : StopRule::onFailure), children_(std::forward<Args>(args)...) {}
  ~WhenAwaitable() = default;

  /// What `co_await` uses (see FanInAwaiter).
  using Awaiter = FanInAwaiter<WhenAwaitable>;

  /// Awaiting a named awaitable: always allowed.
  Awaiter operator co_await() & noexcept { return Awaiter(*this); }
#if COEXEC_GCC_CO_AWAIT_TEMPORARY_BUG
  /// Awaiting the temporary: on GCC 12, refused when a Future passed as an
  /// rvalue came from a submission of a callable temporary with a destructor
  /// (`pool.submit([s] {...})` inside the co_await expression, whose
  /// captures GCC 12 destroys twice; see detail/OwningCallableFuture.h and
  /// docs/coroutines.md). Future temporaries of other callables (`[&]`,
  /// capture-less) and of Tasks, and `std::move(f)` of a named Future<R>, are
  /// accepted.
  Awaiter operator co_await() && noexcept {
    static_assert(!kRefusedTemporary,
                  "coexec: GCC 12 miscompiles temporaries in a co_await expression; name the inputs or the awaitable "
                  "first: the Futures (auto a = pool.submit(...); co_await whenAll(a, b);) or the awaitable (auto "
                  "both = whenAll(std::move(a), std::move(b)); co_await both;) (see docs/combinators.md)");
    return Awaiter(*this);
  }
#else
  /// Awaiting the temporary: it lives to the end of the full expression.
  Awaiter operator co_await() && noexcept { return Awaiter(*this); }
#endif

 private:
  friend class FanInAwaiter<WhenAwaitable>;
  static constexpr const char* operation() noexcept { return Any ? "whenAny" : "whenAll"; }

  template <class F>
  void forEach(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(std::get<I>(children_), std::integral_constant<std::size_t, I>{}), ...);
    }
    (Indices{});
  }
  /// One Future given twice (whenAll(f, f)) would have two awaiters.
  /// \throws std::logic_error.
  void refuseRepeatedFutures() {
    if constexpr (kCount > 1 && kHasFuture) {
      std::array<const TaskCore*, kCount> watched{};
      forEach([&](auto& child, auto i) {
        if constexpr (!std::remove_reference_t<decltype(child)>::kIsTask) watched[i] = child.watched();
      });
      for (std::size_t i = 0; i < kCount; ++i)
        for (std::size_t j = i + 1; j < kCount; ++j)
          if (watched[i] != nullptr && watched[i] == watched[j]) TaskCore::throwSecondAwait(operation());
    }
  }
  /// Calls `f(child, index)` for the child at run-time `index`.
  template <class F>
  void visit(std::size_t index, F&& f) {
    forEach([&](auto& child, auto i) {
      if (i == index) f(child, i);
    });
  }

  bool ready() {
    if (awaited_) {
      throw std::logic_error(std::string("coexec::") + operation() +
                             ": this awaitable was already awaited (it watches its Futures and runs its Tasks once)");
    }
    awaited_ = true;
    return false;
  }

  bool start(std::coroutine_handle<> awaiting, ::coexec::detail::TaskContext* parent) {
    try {
      forEach([](auto& child, auto) { child.validate(operation()); });
      refuseRepeatedFutures();
      if constexpr (kHasTask) prepareTaskChildren();
    } catch (...) {
      invalid_ = std::current_exception();
      return false;
    }
    // The awaiting task is cancelled already: the Futures run anyway, so they
    // are cancelled and waited for (structured); no Task starts.
    if (!beginArming(awaiting, parent, /*timed=*/false,
                     kHasFuture ? IfParentCancelled::stopChildren : IfParentCancelled::startNothing)) {
      return false;
    }
    FanIn& self = *this;
    reserveChildren(kCount);
    std::size_t unstarted = 0;
    // The Futures run already: watch them all, in order (for whenAny, the
    // first one already settled wins).
    forEach([&](auto& child, auto i) {
      if constexpr (!std::decay_t<decltype(child)>::kIsTask) child.attach(self, i);
    });
    // The Tasks, in order, each until it first suspends; none once another
    // child has stopped the rest.
    forEach([&](auto& child, auto i) {
      if constexpr (std::decay_t<decltype(child)>::kIsTask) {
        if (stopping()) {
          ++unstarted;
        } else {
          child.start(self, i, taskChildContext());
        }
      }
    });
    return finishArming(unstarted);
  }

  void cancelChildren() noexcept override {
    forEach([](auto& child, auto) { child.cancel(); });
    cancelTaskChildren();
  }

  Result result() {
    endWait();
    if (invalid_) std::rethrow_exception(invalid_);
    if (refusal()) std::rethrow_exception(refusal());
    const StopReason reason = stopReason();
    if (reason == StopReason::parentCancelled) throw OperationCancelled();
    if constexpr (Any) {
      std::optional<Result> won;
      visit(stopIndex(), [&](auto& child, auto i) {
        auto& result = child.result();
        if (result.error) std::rethrow_exception(result.error);
        won.emplace(Result{i, decltype(Result::value)(std::in_place_index<i>, std::move(*result.value))});
      });
      return std::move(*won);
    } else {
      if (reason == StopReason::childFailed) {
        visit(stopIndex(), [](auto& child, auto) { std::rethrow_exception(child.result().error); });
      }
      return [&]<std::size_t... I>(std::index_sequence<I...>) {
        return Result(std::move(*std::get<I>(children_).result().value)...);
      }
      (Indices{});
    }
  }

  std::tuple<Children...> children_;
  std::exception_ptr invalid_;
  bool awaited_ = false;
};

}  // namespace coexec::detail
