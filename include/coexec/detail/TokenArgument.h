// SPDX-License-Identifier: BSL-1.0
#pragma once

// What a task's callable is given: nothing, its CancellationToken, or a
// std::stop_token that follows it (CancellationToken::stopToken()).

#include <type_traits>

#include "coexec/CancellationToken.h"
#include "coexec/detail/StandardLibrary.h"

namespace coexec::detail {

/// The callable takes the task's CancellationToken.
template <class F>
inline constexpr bool kTakesCancellationToken = std::is_invocable_v<F&, CancellationToken>;

/// The callable is called with a std::stop_token, asked without completing
/// the type (see StandardLibrary.h: a callable that takes one was written
/// where std::stop_token is complete).
template <class F>
concept CallableWithStopToken = requires(F& f, std::stop_token&& stop) {
  f(static_cast<std::stop_token&&>(stop));
};

/// The callable takes a std::stop_token and no CancellationToken (a callable
/// that takes either is given the CancellationToken, and one taking a
/// CancellationToken would also accept a std::stop_token, by conversion). A
/// concept, so that the second test is made only when the first holds.
template <class F>
concept TakesStopTokenOnly = !kTakesCancellationToken<F> && CallableWithStopToken<F>;

/// The callable takes a std::stop_token (TakesStopTokenOnly).
template <class F>
inline constexpr bool kTakesStopToken = TakesStopTokenOnly<F>;

/// The callable takes a token of either kind: its task has a token (it is
/// cancellable while it runs, and shutdownNow() reaches it).
template <class F>
inline constexpr bool kTakesToken = kTakesCancellationToken<F> || kTakesStopToken<F>;

/// The argument type for a callable that takes a token.
template <class F>
using TokenArgument = std::conditional_t<kTakesCancellationToken<F>, CancellationToken, std::stop_token>;

/// The argument for a callable that takes a token, from its task's token:
/// the token itself, or its stopToken(). \throws std::bad_alloc (stopToken()).
/// (`Token` is a parameter so that the call of stopToken() is checked where
/// the template is used, where std::stop_token is complete.)
template <class F, class Token = CancellationToken>
TokenArgument<F> tokenArgument(Token token) {
  if constexpr (kTakesCancellationToken<F>) {
    return token;
  } else {
    return token.stopToken();
  }
}

/// What the callable returns when the pool calls it.
template <class F>
using CallableResult = typename std::conditional_t<kTakesToken<F>, std::invoke_result<F&, TokenArgument<F>>,
                                                   std::invoke_result<F&>>::type;

}  // namespace coexec::detail
