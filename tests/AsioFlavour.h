// SPDX-License-Identifier: BSL-1.0
#pragma once

// Which Asio the bridge tests run against. The same test sources are built
// twice: as the standalone-Asio tests (coexec/asio.h, the bridge in namespace
// coexec), and, with COEXEC_TEST_BOOST_ASIO=1, as BoostAsioTest (Boost.Asio,
// coexec/boost_asio.h, the bridge in namespace coexec::basio). In both, the
// tests name the flavour's Asio `asio::` and the bridge's functions
// unqualified (through `using namespace coexec::test`) or as `bridge::`.

#if COEXEC_TEST_BOOST_ASIO

#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include "coexec/boost_asio.h"

namespace asio = ::boost::asio;

namespace coexec::test {
namespace bridge = ::coexec::basio;
using namespace ::coexec::basio;  // NOLINT(google-build-using-namespace)
/// The flavour's error_code and what its operations throw.
using AsioErrorCode = ::boost::system::error_code;
using AsioSystemError = ::boost::system::system_error;
/// The flavour's Asio version: 102600 for Boost 1.81's Asio 1.26.
inline constexpr int kAsioVersion = BOOST_ASIO_VERSION;
}  // namespace coexec::test

#else

#include <system_error>

#include <asio.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/experimental/parallel_group.hpp>

#include "coexec/asio.h"

namespace coexec::test {
namespace bridge = ::coexec;
/// The flavour's error_code and what its operations throw.
using AsioErrorCode = std::error_code;
using AsioSystemError = std::system_error;
/// The flavour's Asio version: 102200 for Debian's Asio 1.22.
inline constexpr int kAsioVersion = ASIO_VERSION;
}  // namespace coexec::test

#endif
