// SPDX-License-Identifier: BSL-1.0
#pragma once

// Part of the Asio bridge for standalone Asio (include <coexec/asio.h>):
// coexec::AsioPoolExecutor and coexec::asioExecutor(), the Asio executor that
// runs function objects on a ThreadPoolExecutor through its admission. The
// body, shared with the Boost.Asio flavour (coexec/boost_asio.h), is
// impl/AsioPoolExecutor.ipp.

// A standard header before Asio's, for one Asio configuration in every
// translation unit (coexec/asio.h says why).
#include <cstddef>
#include <asio.hpp>

#define COEXEC_DETAIL_BRIDGE_NS coexec
#include "coexec/asio/impl/AsioPoolExecutor.ipp"
#undef COEXEC_DETAIL_BRIDGE_NS
