// SPDX-License-Identifier: BSL-1.0
#pragma once

// The storage behind coexec::TaskLocal: an immutable, reference-counted list
// of bindings (newest first). The code of a pool task sees its task's list
// (TaskCore::bindings), which it inherits at admission from the code that
// submitted it; code outside any task sees its thread's (tlsBindings). A
// Scope pushes a node on the list it found and pops it when it ends; a child
// that captured the list keeps its nodes alive.

#include <utility>

#include "coexec/Export.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/Scheduler.h"
#include "coexec/detail/TaskCore.h"

namespace coexec::detail {

/// One binding: the TaskLocal it binds (`key`) and the rest of the list,
/// whose reference it owns. Immutable once built, so any thread may read it.
class COEXEC_EXPORT BindingNode : public RefCounted {
 public:
  /// Adopts the caller's reference to `parent` (may be null).
  BindingNode(const void* key, BindingNode* parent) noexcept : key_(key), parent_(parent) {}
  [[nodiscard]] const void* key() const noexcept { return key_; }
  [[nodiscard]] BindingNode* parent() const noexcept { return parent_; }

 protected:
  ~BindingNode() override;  // releases parent_

 private:
  const void* const key_;
  BindingNode* const parent_;
};

template <class T>
class BindingOf final : public BindingNode {
 public:
  template <class U>
  BindingOf(const void* key, BindingNode* parent, U&& v) : BindingNode(key, parent), value(std::forward<U>(v)) {}
  const T value;
};

/// The bindings of the code a thread runs outside any task (one counted
/// reference, or null). constinit: no initialisation guard on access.
extern COEXEC_EXPORT constinit thread_local BindingNode* tlsBindings;

/// Where the calling code's bindings live: its task's list while the thread
/// runs a task's code (currentTask()), else the thread's.
inline BindingNode*& bindingsSlot() noexcept {
  TaskCore* const task = currentTask();
  return task != nullptr ? task->bindings : tlsBindings;
}

/// The newest binding of `key` the calling code sees, or null. O(depth).
inline const BindingNode* findBinding(const void* key) noexcept {
  for (const BindingNode* node = bindingsSlot(); node != nullptr; node = node->parent()) {
    if (node->key() == key) return node;
  }
  return nullptr;
}

/// At admission, on the submitting thread: `child` (new, not yet published)
/// shares the bindings of the code that submits it: those of `parent`, the
/// submitter's current task, or the thread's outside any task. Costs one
/// load and a branch when nothing is bound.
inline void inheritBindings(TaskCore& child, const TaskCore* parent) noexcept {
  BindingNode* const bindings = parent != nullptr ? parent->bindings : tlsBindings;
  if (bindings == nullptr || child.bindings != nullptr) return;
  bindings->addRef();
  child.bindings = bindings;
}

}  // namespace coexec::detail
