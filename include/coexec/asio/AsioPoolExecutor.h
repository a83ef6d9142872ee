// SPDX-License-Identifier: BSL-1.0
#pragma once

// Part of the Asio bridge for standalone Asio (include <coexec/asio.h>):
// coexec::AsioPoolExecutor and coexec::asioExecutor(), the Asio executor that
// runs function objects on a ThreadPoolExecutor through its admission. The
// body, shared with the Boost.Asio flavour (coexec/boost_asio.h), is
// impl/AsioPoolExecutor.ipp.

#include <asio.hpp>

#define COEXEC_DETAIL_BRIDGE_NS coexec
#include "coexec/asio/impl/AsioPoolExecutor.ipp"
#undef COEXEC_DETAIL_BRIDGE_NS
