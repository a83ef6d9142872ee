// SPDX-License-Identifier: BSL-1.0
#pragma once

// Part of the Asio bridge for standalone Asio (include <coexec/asio.h>):
// coexec Tasks on an Asio executor (an io_context's): coexec::spawn(executor,
// task), coexec::resumeOn(executor), and sleeps on the executor's timers. The
// body, shared with the Boost.Asio flavour (coexec/boost_asio.h), is
// impl/AsioScheduler.ipp.

// A standard header before Asio's, for one Asio configuration in every
// translation unit (coexec/asio.h says why).
#include <cstddef>
#include <asio.hpp>

#include "coexec/asio/AsioPoolExecutor.h"

#define COEXEC_DETAIL_BRIDGE_NS coexec
#include "coexec/asio/impl/AsioScheduler.ipp"
#undef COEXEC_DETAIL_BRIDGE_NS
