// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstddef>
#include <utility>
#include <variant>

#include "coexec/Future.h"
#include "coexec/Task.h"
#include "coexec/detail/WhenAwaitable.h"

namespace coexec {

/// What `co_await whenAny(...)` returns: which child settled first (its
/// argument position) and its value, as the variant's alternative of that
/// same position (`std::monostate` for a void child). Read it with
/// `std::get<I>(result.value)` once `result.index == I`.
///
/// Thread safety: a plain value.
template <class... Ts>
struct WhenAnyResult {
  std::size_t index = 0;                           ///< the argument position of the child that settled first
  std::variant<detail::StoredValue<Ts>...> value;  ///< its value, as the alternative at position `index`
};

/// `co_await whenAny(a, b, ...)`: waits for the first of a fixed set of
/// heterogeneous children to settle, cancels the others, waits for them to
/// settle, and returns the first one's WhenAnyResult; if the first one
/// failed, rethrows its exception instead. The arguments, where they run and
/// when, as for whenAll(): Futures (watched; an already settled one wins at
/// once, the first in argument order) and Tasks (run inline, one after
/// another until each first suspends; none is started once a child has
/// settled).
///
/// Structured: it never returns or throws while a child still runs (a child
/// that ignores cancellation delays it). If the awaiting coroutine's task is
/// cancelled while it waits, the children are cancelled and
/// OperationCancelled is thrown once they have settled; if it is cancelled
/// already when whenAny is awaited, no Task starts, and the Futures are
/// cancelled and waited for the same way (OperationCancelled, even if one had
/// settled). Never blocks a thread; resumes as whenAll() does.
/// \throws the first child's exception; OperationCancelled as above;
/// std::logic_error / std::invalid_argument for empty or started arguments,
/// before anything is touched.
/// \note The losers' results are dropped (their Futures are consumed). On
/// GCC 12 the Future temporary of an owning callable in the co_await
/// expression does not compile: see whenAll().
template <class... Args>
[[nodiscard]] detail::WhenAwaitable<true, detail::ChildOf<Args>...> whenAny(Args&&... args) {
  return detail::WhenAwaitable<true, detail::ChildOf<Args>...>(std::forward<Args>(args)...);
}

}  // namespace coexec
