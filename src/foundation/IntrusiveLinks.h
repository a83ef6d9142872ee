// SPDX-License-Identifier: BSL-1.0
#pragma once

// The links of an intrusive doubly linked list whose nodes carry their own
// `prev` and `next` pointers, named by the member pointers Prev and Next,
// and whose owner keeps a pointer to the first node. The owner guards the
// list (its lock) and keeps whatever it counts beside it.
//
// Invariants: a node is linked at most once; a linked node's neighbours
// point back at it, the first node's Prev is null and the owner's head
// points at it; an unlinked node's Prev and Next are null.

namespace coexec::detail {

template <class T, T* T::*Prev, T* T::*Next>
struct IntrusiveLinks {
  /// Links `node` (not linked) first.
  static void pushFront(T*& head, T& node) noexcept {
    node.*Prev = nullptr;
    node.*Next = head;
    if (head != nullptr) head->*Prev = &node;
    head = &node;
  }
  /// Unlinks `node` (linked in the list `head` starts).
  static void unlink(T*& head, T& node) noexcept {
    if (node.*Prev != nullptr) {
      node.*Prev->*Next = node.*Next;
    } else {
      head = node.*Next;
    }
    if (node.*Next != nullptr) node.*Next->*Prev = node.*Prev;
    node.*Prev = nullptr;
    node.*Next = nullptr;
  }
};

}  // namespace coexec::detail
