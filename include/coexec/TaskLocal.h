// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <cassert>
#include <utility>

#include "coexec/detail/Bindings.h"

namespace coexec {

/// A value bound for the extent of a scope inside a task, and seen by the
/// task's code and by the work it starts: Java's ScopedValue, for coexec
/// tasks and coroutines. Typical uses: a request id for logs, a tenant, a
/// deadline budget, a tracing span.
///
/// ```
/// inline const coexec::TaskLocal<std::string> requestId;
/// ...
/// coexec::TaskLocal<std::string>::Scope scope(requestId, "req-42");
/// const std::string* id = requestId.get();  // "req-42" here, in children, after co_await
/// ```
///
/// What sees a binding (docs/task-local.md):
/// - the code of the task (or thread) that made the Scope, until the Scope
///   ends; for a coroutine task, after every co_await of a coexec awaitable
///   (a Future, sleepFor, resumeOn, a Task, the combinators), whatever
///   thread resumes it;
/// - a Task it awaits (it runs as part of the same task) and a Task given to
///   withTimeout();
/// - the tasks it submits while the Scope is alive: submit() / execute() on
///   any pool, SerialExecutor / KeyedExecutor, invokeAll / invokeAny,
///   TaskGroup::spawn: each keeps the bindings it was submitted with (a
///   snapshot: later Scopes of the submitter are not seen by it, and its own
///   Scopes are not seen by the submitter), even after the Scope has ended;
/// - outside any task (main(), a plain std::thread, a coroutine run by a bare
///   syncWait() while it runs on the calling thread): a Scope binds for that
///   thread's code, and the tasks it submits inherit it.
/// Never seen: by the next task that runs on the same thread (a task sees
/// only its own bindings), by tasks of schedule() / scheduleAtFixedRate()
/// (not children of the code that schedules them), by the pool's hooks.
/// Not supported: the Task children of whenAll / whenAny see the bindings
/// only until their first suspension (they run for no pool task).
///
/// Cost: nothing when nothing is bound (no allocation; one load and a branch
/// per submission). A Scope allocates one node; get() walks the list of
/// bindings in force, newest first (O(nesting depth)); each child submitted
/// while something is bound takes one reference.
///
/// Thread safety: get() may be called from any thread; it reads the calling
/// code's bindings. A TaskLocal is an identity: declare it once (a global or
/// a static), and keep it alive as long as any Scope of it or any task that
/// may read it.
template <class T>
class TaskLocal {
 public:
  class Scope;

  constexpr TaskLocal() noexcept = default;
  TaskLocal(const TaskLocal&) = delete;
  TaskLocal& operator=(const TaskLocal&) = delete;

  /// The value of the innermost Scope of this TaskLocal that the calling
  /// code sees, or null if none. Never blocks; never allocates. The pointer
  /// stays valid as long as the binding is in force for the calling code
  /// (its Scope, or the task that inherited it).
  [[nodiscard]] const T* get() const noexcept {
    const detail::BindingNode* node = detail::findBinding(this);
    return node != nullptr ? &static_cast<const detail::BindingOf<T>*>(node)->value : nullptr;
  }
  /// True if get() would return a value.
  [[nodiscard]] bool isBound() const noexcept { return detail::findBinding(this) != nullptr; }
};

/// Binds a TaskLocal to a value for the lifetime of the Scope, for the code
/// that creates it (its task's code, or its thread's outside any task) and
/// the work that code starts meanwhile. Nested Scopes (of the same TaskLocal
/// or others) shadow the outer ones and restore them when they end.
///
/// A Scope is a local variable: it must end in the task (or on the thread)
/// where it began, in reverse order of creation, which is what a block
/// scope does, also across co_await in a coroutine.
///
/// Thread safety: not shared; made and destroyed by the code that owns it.
template <class T>
class TaskLocal<T>::Scope {
 public:
  /// Binds `local` to `value`. Never blocks.
  /// \throws std::bad_alloc, or what moving `value` throws (nothing is
  /// bound then).
  Scope(const TaskLocal& local, T value)
      : slot_(&detail::bindingsSlot()),
        node_(new detail::BindingOf<T>(&local, *slot_, std::move(value))) {  // the node takes the slot's reference
    *slot_ = node_;
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  /// Restores the bindings in force before the Scope. Never blocks; never
  /// throws. Work that captured the binding keeps it alive.
  ~Scope() {
    assert(*slot_ == node_ && "TaskLocal::Scope: scopes must end in reverse order, where they began");
    detail::BindingNode* const outer = node_->parent();
    if (outer != nullptr) outer->addRef();
    *slot_ = outer;
    node_->release();
  }

 private:
  detail::BindingNode** const slot_;
  detail::BindingNode* const node_;
};

}  // namespace coexec
