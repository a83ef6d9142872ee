// SPDX-License-Identifier: BSL-1.0
#pragma once

// ThreadPoolExecutor::invokeAll() and invokeAny(): declared, with their
// contracts, in ThreadPoolExecutor.h; defined here. Include this header (or
// <coexec/coexec.h>) in a file that calls them: without it, a call does not
// compile (the awaitable it returns is an incomplete type there).

#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/CombinatorAccess.h"
#include "coexec/detail/InvokeAllImpl.h"
