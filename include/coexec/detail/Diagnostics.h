// SPDX-License-Identifier: BSL-1.0
#pragma once

namespace coexec::detail {

/// False, but only once `T` is known: a `static_assert(kAlwaysFalse<T>, "...")`
/// in a template fires when that template is instantiated (by the user's call,
/// which the compiler then shows), not when it is defined.
template <class T>
inline constexpr bool kAlwaysFalse = false;

}  // namespace coexec::detail
