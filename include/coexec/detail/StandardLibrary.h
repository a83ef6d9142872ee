// SPDX-License-Identifier: BSL-1.0
#pragma once

// The standard library that the headers `<coexec/ThreadPoolExecutor.h>`
// includes use: std::chrono's durations, time points and clocks,
// std::function, std::mutex, and the names std::thread and std::stop_token.
//
// Invariant: every name means exactly what the standard header that provides
// it says; only which header brings it in differs.
//
// On libstdc++, the C++20 <chrono>, <functional>, <mutex>, <thread> and
// <stop_token> each bring in <sstream> or <ostream> (<bits/unique_ptr.h>
// carries `operator<<`). These headers include instead the internal headers
// that define what they use (<bits/chrono.h>, <bits/std_function.h>,
// <bits/std_mutex.h>), and only declare std::thread and std::stop_token:
// coexec's headers name those two in declarations only (ThreadFactory's
// signature, CancellationToken's conversions), and a program that makes or
// calls one has included <thread> or <stop_token> itself. The declarations
// are written as libstdc++ writes its own (its versioned namespace
// included).
//
// With any other standard library, or with COEXEC_FULL_STD_HEADERS defined,
// this header includes the standard headers themselves.

#include <cstddef>  // the library's configuration (__GLIBCXX__)

#if defined(__GLIBCXX__) && !defined(COEXEC_FULL_STD_HEADERS) && __has_include(<bits/chrono.h>) && \
    __has_include(<bits/std_function.h>) && __has_include(<bits/std_mutex.h>)
#include <bits/chrono.h>
#include <bits/std_function.h>
#include <bits/std_mutex.h>

// clang-format off
namespace std _GLIBCXX_VISIBILITY(default) {
_GLIBCXX_BEGIN_NAMESPACE_VERSION
class thread;
class stop_token;
_GLIBCXX_END_NAMESPACE_VERSION
}  // namespace std
// clang-format on
#else
#include <chrono>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>
#endif
