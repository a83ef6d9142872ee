// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cstdint>
#include <string_view>

#include "coexec/Export.h"

namespace coexec::detail {

/// The process-wide table of task names (TaskOptions::name): each distinct
/// name is copied once and never freed, and a task keeps its index.

/// The index of `name`, adding it if it is new: 0 for an empty name; the
/// index of "(too many task names)" once TaskOptions::kMaxTaskNames names are
/// kept. Takes a mutex unless the calling thread named its previous task
/// the same. \throws std::bad_alloc.
COEXEC_EXPORT std::uint32_t internTaskName(std::string_view name);

/// The name at `index` (empty for 0). Lock-free; never throws. The view is
/// valid until the process exits.
COEXEC_EXPORT std::string_view taskNameAt(std::uint32_t index) noexcept;

}  // namespace coexec::detail
