// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <thread>

#include "coexec/Export.h"

namespace coexec {

/// The calling thread's id, as std::this_thread::get_id(), read through a
/// call the optimizer cannot merge with another: use it in a coroutine body
/// that compares thread identity across a co_await.
///
/// Why: glibc declares pthread_self() (which std::this_thread::get_id()
/// calls) as a pure function, so clang (14, from -O1 on) may read it once
/// before a suspension point and reuse the value after the coroutine has
/// resumed on another thread: `auto before = std::this_thread::get_id();
/// co_await resumeOn(pool); auto after = std::this_thread::get_id();` can
/// give `after == before` although the coroutine now runs on a thread of
/// `pool`. GCC 12 calls it again, and so does clang at -O0, which is why
/// such code passes in a debug build and fails in the release build users
/// ship. docs/coroutines.md, "Thread identity inside a coroutine".
///
/// Never blocks; never throws. Thread safety: any thread.
COEXEC_EXPORT std::thread::id thisThreadId() noexcept;

}  // namespace coexec
