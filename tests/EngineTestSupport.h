// SPDX-License-Identifier: BSL-1.0
// Helpers of the tests that drive the engine's components on their own
// (PoolWorkerTest, WorkerListTest): stand-in coroutine handles.
#pragma once

#include <coroutine>
#include <cstdint>

namespace coexec::test {

/// A distinct handle for each number, never resumed or destroyed (the
/// engine's slots and queues only store and return addresses). Numbers
/// start at 1: address 0 is an empty slot.
inline std::coroutine_handle<> fakeHandle(std::uintptr_t number) {
  return std::coroutine_handle<>::from_address(reinterpret_cast<void*>(number * 16));
}

/// The number fakeHandle() made `handle` from.
inline std::uintptr_t numberOf(std::coroutine_handle<> handle) {
  return reinterpret_cast<std::uintptr_t>(handle.address()) / 16;
}

}  // namespace coexec::test
