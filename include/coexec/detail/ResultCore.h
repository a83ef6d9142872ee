// SPDX-License-Identifier: BSL-1.0
#pragma once

// The typed side of a task: its value's storage (ValueSlot), a TaskCore with a
// typed result (ResultCore<R>), and a submitted callable and its result in
// one allocation (CallableTask<R, F>). The stage word, the result's
// publication and the cancellation links are TaskCore's (TaskCore.h).

#include <exception>
#include <optional>
#include <type_traits>

#include "coexec/detail/StandardLibrary.h"
#include "coexec/detail/TaskCore.h"
#include "coexec/detail/TokenArgument.h"

namespace coexec::detail {

/// Storage for a task's value: an object, a reference, or nothing.
/// emplaceFrom() calls `f` directly (a callable object or a function
/// pointer), not through std::invoke: one function per callable type.
template <class R>
struct ValueSlot {
  template <class F, class... A>
  void emplaceFrom(F& f, A&&... args) {
    value.emplace(f(static_cast<A&&>(args)...));
  }
  R take() { return std::move(*value); }
  void reset() noexcept { value.reset(); }
  std::optional<R> value;
};

template <class R>
struct ValueSlot<R&> {
  template <class F, class... A>
  void emplaceFrom(F& f, A&&... args) {
    value = &f(static_cast<A&&>(args)...);
  }
  R& take() { return *value; }
  void reset() noexcept { value = nullptr; }
  R* value = nullptr;
};

template <>
struct ValueSlot<void> {
  template <class F, class... A>
  void emplaceFrom(F& f, A&&... args) {
    f(static_cast<A&&>(args)...);
  }
  void take() {}
  void reset() noexcept {}
};

/// A TaskCore with a typed result.
template <class R>
class ResultCore : public TaskCore {
 public:
  using TaskCore::TaskCore;
  /// Precondition: done. Returns the value or rethrows the task's exception.
  /// \throws std::logic_error on a second consumption.
  R takeResult() {
    if (std::exception_ptr error = consume()) std::rethrow_exception(error);
    return slot_.take();
  }

 protected:
  void discardValue() noexcept override { slot_.reset(); }
  [[no_unique_address]] ValueSlot<R> slot_;
};

template <class T>
struct IsStdFunction : std::false_type {};
template <class S>
struct IsStdFunction<std::function<S>> : std::true_type {};

/// Whether a callable of type F can be empty (then `!f` says whether it is):
/// a function or member pointer, or a std::function. Other callables cannot
/// be, and a check of one instantiates nothing.
template <class F>
inline constexpr bool kMayBeEmpty = std::is_pointer_v<F> || std::is_member_pointer_v<F> || IsStdFunction<F>::value;

/// A callable and its result in one allocation. The callable (and so its
/// captures) is destroyed as soon as it has run, or with the task if it
/// never runs. One submitted callable type instantiates this class's five
/// functions and nothing else: the callable lives in a union member, not in
/// a std::optional.
template <class R, class F>
class CallableTask final : public ResultCore<R> {
 public:
  CallableTask(F&& fn, bool hasFuture, int priority)
      : ResultCore<R>(hasFuture, kTakesToken<F>, priority), fn_(static_cast<F&&>(fn)) {}
  ~CallableTask() override {
    if (live_) fn_.~F();
  }

 private:
  void invoke() override {
    try {
      if constexpr (kTakesToken<F>) {
        this->slot_.emplaceFrom(fn_, tokenArgument<F>(this->token()));  // a CancellationToken or a std::stop_token
      } else {
        this->slot_.emplaceFrom(fn_);
      }
    } catch (...) {
      live_ = false;
      fn_.~F();
      throw;
    }
    live_ = false;
    fn_.~F();
  }
  union {
    F fn_;
  };
  bool live_ = true;
};

}  // namespace coexec::detail
