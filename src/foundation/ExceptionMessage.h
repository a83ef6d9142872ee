// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <exception>
#include <string>

namespace coexec::detail {

/// The message of the exception `error` holds (its what(), or a phrase for
/// one not derived from std::exception, or "(no exception)" for null), for
/// another message. Defined in Errors.cpp. \throws std::bad_alloc.
std::string messageOf(const std::exception_ptr& error);

}  // namespace coexec::detail
