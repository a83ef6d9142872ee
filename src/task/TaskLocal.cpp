// SPDX-License-Identifier: BSL-1.0
// The compiled part of TaskLocal: the thread's own bindings (for code that
// runs outside any task) and the release of a binding list.
//
// Invariants: a list is immutable once its nodes are built; a node owns one
// reference to the rest of the list. A slot (a task's `bindings`, or a
// thread's tlsBindings) owns one reference to its head and is written only
// by the code that owns it (the task's code, the thread).

#include "coexec/detail/Bindings.h"

namespace coexec::detail {

constinit thread_local BindingNode* tlsBindings = nullptr;

BindingNode::~BindingNode() {
  if (parent_ != nullptr) parent_->release();
}

void releaseBindings(BindingNode* bindings) noexcept { bindings->release(); }

}  // namespace coexec::detail
