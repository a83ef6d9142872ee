// SPDX-License-Identifier: BSL-1.0
#pragma once

#include "coexec/Export.h"

namespace coexec::detail {

/// While one is alive on a thread, resumeFor() (detail/Scheduler.h) posts
/// every continuation it is given to its scheduler instead of running it
/// inline. Entry points that user code calls to cancel or drop a task
/// (Future::cancel(), a task's cancellation through a link, dropping an unrun
/// PendingTask) hold one, so that a coroutine awaiting that task never runs
/// on the caller's stack (which may hold a lock the coroutine then takes).
/// Nests. Never throws. Thread identity is read out of line only.
class COEXEC_EXPORT NoInlineResumption {
 public:
  NoInlineResumption() noexcept;
  ~NoInlineResumption();
  NoInlineResumption(const NoInlineResumption&) = delete;
  NoInlineResumption& operator=(const NoInlineResumption&) = delete;

  /// True while a NoInlineResumption is alive on the calling thread.
  [[nodiscard]] static bool active() noexcept;
};

}  // namespace coexec::detail
