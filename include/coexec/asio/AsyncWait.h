// SPDX-License-Identifier: BSL-1.0
#pragma once

// Part of the Asio bridge for standalone Asio (include <coexec/asio.h>):
// coexec::asyncWait, the Asio asynchronous operation that waits for a
// coexec::Future. The body, shared with the Boost.Asio flavour
// (coexec/boost_asio.h), is impl/AsyncWait.ipp.

// A standard header before Asio's, for one Asio configuration in every
// translation unit (coexec/asio.h says why).
#include <cstddef>
#include <system_error>

#include <asio.hpp>

#include "coexec/asio/AsioPoolExecutor.h"

namespace coexec::detail {
/// What a cancelled asyncWait completes with: standalone Asio's error codes
/// are std::error_codes.
using AsioSystemError = std::system_error;
}  // namespace coexec::detail

#define COEXEC_DETAIL_BRIDGE_NS coexec
#include "coexec/asio/impl/AsyncWait.ipp"
#undef COEXEC_DETAIL_BRIDGE_NS
