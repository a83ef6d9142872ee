// SPDX-License-Identifier: BSL-1.0
#pragma once

#include "coexec/CancellationToken.h"
#include "coexec/detail/FrameAllocator.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/TaskCore.h"

namespace coexec::detail {

/// A task's registration on an outside token (TaskCore::linkToken). From the
/// frame allocator: linking allocates nothing global in steady state (the
/// callback, one pointer, fits in std::function's own storage).
class TokenLink final : public Recycled {
 public:
  TokenLink(const CancellationToken& token, TaskCore& task)
      : registration_(token, [target = &task] {
          // Alive: the settler releases this link (and waits for a callback
          // running on another thread) before it drops its own reference.
          target->addRef();
          const Ref<TaskCore> keep = Ref<TaskCore>::adopt(target);
          keep->cancelFromLink();  // may destroy this link (and so this lambda): `keep` is on the stack
        }) {}

 private:
  CancellationRegistration registration_;
};

}  // namespace coexec::detail
