// SPDX-License-Identifier: BSL-1.0
#pragma once

// What coexec needs to refuse, on GCC 12, exactly the `co_await` forms that
// GCC 12 miscompiles (docs/coroutines.md, "GCC 12 and temporaries in a
// co_await expression"), and nothing else.
//
// GCC 12 destroys the members of an aggregate-initialized temporary (a
// lambda closure is one) twice when that temporary is created inside a
// co_await expression: `co_await pool.submit([s] { ... })` frees `s`'s copy
// twice. A temporary whose type is trivially destructible (a capture-less
// lambda, or one capturing references, pointers and integers: the common
// `[&]`) has nothing to destroy, so the second destruction is harmless; so is
// a temporary built by a constructor (a Task, a std::function built from a
// named callable), which GCC 12 destroys once (tests/GccCoroutineBugsTest.cpp
// records each finding).
//
// A submission cannot see whether it is called inside a co_await expression,
// but it can see what it was handed. So every submission that returns a
// Future (ThreadPoolExecutor::submit and schedule, TaskGroup::spawn,
// SerialExecutor and KeyedExecutor::submit) returns an
// OwningCallableFuture<F> when it took over a callable rvalue that is not
// trivially destructible: a Future in every way, but on GCC 12 its rvalue
// `co_await`, and withTimeout, whenAll, whenAny and asyncWait of it as an
// rvalue, fail a static_assert that names the fix (name the Future first).
// A named one (`auto f = pool.submit([s] {...}); co_await f;`) is accepted
// everywhere. The type is the same on every compiler, so that code which
// builds with clang builds with GCC 12 but for the refused forms.

#include <type_traits>
#include <utility>

#include "coexec/Future.h"
#include "coexec/detail/CoroutineTask.h"
#include "coexec/detail/Diagnostics.h"

namespace coexec::detail {

/// True when a submission takes over `f` of the forwarding type `F` (as in
/// `submit(F&& f)`) and `f` may be a temporary that GCC 12 destroys twice in
/// a co_await expression: an rvalue (a temporary, or std::move of a named
/// callable: the two cannot be told apart) whose type is not trivially
/// destructible. Not for a Task, which GCC 12 destroys once (and whose
/// parameters its frame owns); not for an lvalue (the callable is copied
/// from a named object, which is no temporary).
template <class F>
inline constexpr bool kOwningTemporary =
    !std::is_lvalue_reference_v<F> && !std::is_trivially_destructible_v<std::remove_cvref_t<F>> &&
    !IsTask<std::remove_cvref_t<F>>::value;

/// A Future (`Base`: Future<R> or ScheduledFuture<R>) returned by a
/// submission that took over a callable for which kOwningTemporary holds.
/// It is a `Base` in every way (it binds to `Future<R>&` and `Future<R>&&`,
/// and converts to `Future<R>` and `Base` by a move), except that on GCC 12
/// awaiting it as an rvalue does not compile. Adds no state.
///
/// Thread safety: as Base.
template <class Base>
class [[nodiscard]] OwningCallableFuture final : public Base {
 public:
  /// An empty Future.
  OwningCallableFuture() noexcept = default;
  /// Takes `future` over (it is left empty).
  explicit OwningCallableFuture(Base&& future) noexcept : Base(std::move(future)) {}

  /// As Base's `co_await`: awaiting a named one is allowed everywhere.
  auto operator co_await() & { return static_cast<Base&>(*this).operator co_await(); }
#if COEXEC_GCC_CO_AWAIT_TEMPORARY_BUG
  /// Refused at compile time on GCC 12 and older: the callable this Future
  /// came from was a temporary with a destructor inside this co_await
  /// expression, which GCC 12 destroys twice (a std::string capture is freed
  /// twice: heap corruption). Name the Future first: `auto f =
  /// pool.submit([s] {...}); co_await f;`. The overload is a template so that
  /// the one error is this static_assert, reported from the user's
  /// `co_await`.
  template <class Self = OwningCallableFuture>
  auto operator co_await() && {
    static_assert(kAlwaysFalse<Self>,
                  "coexec: GCC 12 miscompiles temporaries in a co_await expression; name the Future first: "
                  "auto f = pool.submit(...); co_await f;  (refused because the callable handed over inside this "
                  "co_await expression is not trivially destructible: GCC 12 destroys its captures twice, and a "
                  "capture that owns memory, such as a std::string, is freed twice. Capture-less lambdas and "
                  "lambdas that capture only references, pointers and integers, such as [&], are accepted. See "
                  "docs/coroutines.md, \"GCC 12 bugs and the safe forms\")");
    return static_cast<Base&>(*this).operator co_await();
  }
#else
  /// As the lvalue overload: the temporary lives to the end of the full
  /// expression, which outlasts the awaiter.
  auto operator co_await() && { return static_cast<Base&>(*this).operator co_await(); }
#endif
};

/// True for an OwningCallableFuture (of any Base).
template <class T>
inline constexpr bool kIsOwningCallableFuture = false;
template <class Base>
inline constexpr bool kIsOwningCallableFuture<OwningCallableFuture<Base>> = true;

/// What a submission that took over `F` returns for its Future `Fut`.
template <class F, class Fut>
using SubmittedFuture = std::conditional_t<kOwningTemporary<F>, OwningCallableFuture<Fut>, Fut>;

/// `future` as SubmittedFuture<F, Fut> (taken over).
template <class F, class Fut>
SubmittedFuture<F, Fut> submittedFuture(Fut&& future) noexcept {
  static_assert(!std::is_reference_v<Fut>, "coexec: submittedFuture takes the Future over");
  return SubmittedFuture<F, Fut>(std::move(future));
}

/// The R of a Future<R> or of a type derived from it (ScheduledFuture<R>,
/// OwningCallableFuture<...>); `kIsFuture` false for anything else.
template <class R>
std::type_identity<R> futureResultOf(const Future<R>*);
template <class T>
struct FutureTraits {
  static constexpr bool kIsFuture = false;
};
template <class T>
requires requires(const T* future) { futureResultOf(future); }
struct FutureTraits<T> {
  static constexpr bool kIsFuture = true;
  using Result = typename decltype(futureResultOf(static_cast<const T*>(nullptr)))::type;
};

}  // namespace coexec::detail
