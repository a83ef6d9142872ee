// SPDX-License-Identifier: BSL-1.0
#pragma once

/// The Boost.Asio bridge (Boost 1.81, `#include <boost/asio.hpp>`): the same
/// bridge as <coexec/asio.h> gives for standalone Asio, for Boost.Asio and
/// what is built on it (Boost.Beast), under namespace coexec::basio with the
/// same names and the same contracts:
///
/// - coexec::basio::asioExecutor(pool): a Boost.Asio executor that runs on a
///   ThreadPoolExecutor, through its admission (coexec::basio::AsioPoolExecutor);
/// - coexec::basio::asyncWait(future, token): a Boost.Asio asynchronous
///   operation that waits for a coexec::Future and completes on the
///   handler's executor, with every completion token and cancellation slot;
/// - coexec::basio::spawn(executor, task) and coexec::basio::resumeOn(executor):
///   coexec Tasks that run on a Boost.Asio executor (an io_context), with
///   their sleeps on its timers.
///
/// Each function's contract is the one documented for the standalone
/// flavour (coexec::asyncWait, coexec::AsioPoolExecutor, coexec::spawn,
/// coexec::resumeOn): both flavours are compiled from one implementation
/// (coexec/asio/impl/*.ipp). The one difference: a cancelled asyncWait
/// completes with a `boost::system::system_error` holding
/// `boost::asio::error::operation_aborted`, as Boost.Asio's own operations
/// do. Both bridges may be included in one program, even in one file.
/// Link the CMake target coexec::boost_asio. See docs/asio.md.

// A standard header before Asio's, for one Asio configuration in every
// translation unit (coexec/asio.h says why).
#include <cstddef>
#include <boost/asio.hpp>
#include <boost/system/system_error.hpp>

#include "coexec/detail/AsioBridge.h"

namespace coexec::basio {
/// Boost.Asio, under the name the bridge's shared bodies use for Asio
/// (coexec/asio/impl/AsioPoolExecutor.ipp): `coexec::basio::asio` is
/// `boost::asio`.
namespace asio = ::boost::asio;

namespace detail {
// The bridge's bodies name coexec's internals as detail::X.
using namespace ::coexec::detail;  // NOLINT(google-build-using-namespace)
/// What a cancelled asyncWait completes with: Boost.Asio's exception type.
using AsioSystemError = ::boost::system::system_error;
}  // namespace detail
}  // namespace coexec::basio

#define COEXEC_DETAIL_BRIDGE_NS coexec::basio
#include "coexec/asio/impl/AsioPoolExecutor.ipp"
#include "coexec/asio/impl/AsioScheduler.ipp"
#include "coexec/asio/impl/AsyncWait.ipp"
#undef COEXEC_DETAIL_BRIDGE_NS
