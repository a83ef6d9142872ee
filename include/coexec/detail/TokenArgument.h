// SPDX-License-Identifier: BSL-1.0
#pragma once

// What a task's callable is given: nothing, its CancellationToken, or a
// std::stop_token that follows it (CancellationToken::stopToken()).

#include <stop_token>
#include <type_traits>

#include "coexec/CancellationToken.h"

namespace coexec::detail {

/// The callable takes the task's CancellationToken.
template <class F>
inline constexpr bool kTakesCancellationToken = std::is_invocable_v<F&, CancellationToken>;

/// The callable takes a std::stop_token (and no CancellationToken: a callable
/// that takes either is given the CancellationToken; and one taking a
/// CancellationToken would also accept a std::stop_token, by conversion).
template <class F>
inline constexpr bool kTakesStopToken = !kTakesCancellationToken<F> && std::is_invocable_v<F&, std::stop_token>;

/// The callable takes a token of either kind: its task has a token (it is
/// cancellable while it runs, and shutdownNow() reaches it).
template <class F>
inline constexpr bool kTakesToken = kTakesCancellationToken<F> || kTakesStopToken<F>;

/// The argument type for a callable that takes a token.
template <class F>
using TokenArgument = std::conditional_t<kTakesCancellationToken<F>, CancellationToken, std::stop_token>;

/// The argument for a callable that takes a token, from its task's token:
/// the token itself, or its stopToken(). \throws std::bad_alloc (stopToken()).
template <class F>
TokenArgument<F> tokenArgument(CancellationToken token) {
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
