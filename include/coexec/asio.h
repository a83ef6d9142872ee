// SPDX-License-Identifier: BSL-1.0
#pragma once

/// The Asio bridge (standalone Asio 1.22, `#include <asio.hpp>`): with
/// coexec/boost_asio.h, the only coexec headers that bring in Asio. coexec.h
/// and the core library never include Asio; this header is header-only and
/// needs nothing but Asio's headers and coexec::coexec.
///
/// - asioExecutor(pool): an Asio executor that runs on a ThreadPoolExecutor,
///   through its admission (AsioPoolExecutor.h);
/// - asyncWait(future, token): an Asio asynchronous operation that waits for a
///   coexec::Future and completes on the handler's executor (AsyncWait.h);
/// - spawn(executor, task) and resumeOn(executor): coexec Tasks that run on an
///   Asio executor (an io_context), with their sleeps on its timers
///   (AsioScheduler.h).
///
/// The same bridge for Boost.Asio (and Boost.Beast), from the same
/// implementation (coexec/asio/impl/*.ipp), is <coexec/boost_asio.h>, in
/// namespace coexec::basio. See docs/asio.md.

// A standard header before Asio's: Asio's configuration chooses how it
// allocates (std::aligned_alloc or operator new) from a libstdc++ macro that
// only a standard header defines, so a translation unit that reached Asio first
// would disagree with one that did not, and one program would free memory the
// other way than it allocated it. Every coexec header that includes Asio
// includes <cstddef> first.
#include <cstddef>
#include <asio.hpp>

#include "coexec/asio/AsioPoolExecutor.h"
#include "coexec/asio/AsioScheduler.h"
#include "coexec/asio/AsyncWait.h"
