// SPDX-License-Identifier: BSL-1.0
// NoDestructor<T>: a T built in place, in the storage of the object that holds
// it, and never destroyed.
//
// For process-wide tables that a thread outliving main()'s static destructors
// may still use (Asio's system_executor threads, a detached thread, a pool the
// program never closes): a function-local `static NoDestructor<T>` is built on
// first use, thread-safely, like any local static, and nothing runs at exit.
// Unlike `static T* t = new T`, it takes nothing from the global allocator:
// the first blocking wait of a process is not an allocation that a test of
// steady-state allocation-free paths could count (FrameAllocatorTest did,
// when a pool thread's counted loop met main's first Future::get()).
// Its storage stays reachable, so LeakSanitizer sees no leak.

#pragma once

#include <new>
#include <utility>

namespace coexec::detail {

template <typename T>
class NoDestructor {
 public:
  template <typename... Args>
  explicit NoDestructor(Args&&... args) {
    ::new (static_cast<void*>(storage_)) T(std::forward<Args>(args)...);
  }
  NoDestructor(const NoDestructor&) = delete;
  NoDestructor& operator=(const NoDestructor&) = delete;
  ~NoDestructor() = default;  // trivial: T's destructor never runs

  T& get() noexcept { return *std::launder(reinterpret_cast<T*>(storage_)); }
  const T& get() const noexcept { return *std::launder(reinterpret_cast<const T*>(storage_)); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace coexec::detail
