// SPDX-License-Identifier: BSL-1.0
#pragma once

// Helpers shared by the GCC 12 coroutine bug tests (GccCoroutineBugsTest,
// GccCoroutineBugsApiTest; the bugs are described at the top of
// GccCoroutineBugsTest.cpp): whether the compiler is GCC 12, the check that
// a bug is still there, and a capture that counts the releases of a resource
// it owns (a double free, counted instead of done).

#include <atomic>
#include <utility>

#include "Assertions.h"

#include "CoroutineTestSupport.h"

namespace coexec::test {

#if defined(__GNUC__) && __GNUC__ == 12 && !defined(__clang__)
inline constexpr bool kGcc12 = true;
#else
inline constexpr bool kGcc12 = false;
#endif

/// On GCC 12: one destruction more than constructions (the bug is still
/// there; a GCC that fixes it fails here). Elsewhere: balanced.
inline void checkOneDestructionTooManyOnGcc12(const Lifetimes& lifetimes) {
  CAPTURE(lifetimes.constructed.load(), lifetimes.destroyed.load());
  if constexpr (kGcc12) {
    CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load() + 1);  // the bug is still there
  } else {
    CHECK(lifetimes.destroyed.load() == lifetimes.constructed.load());
  }
}

/// Releases of an imaginary resource: a copy acquires one, a move transfers
/// it, a moved-from Owner has none. released > acquired means a resource
/// (say, a std::string's heap buffer) would be freed twice.
struct Resources {
  std::atomic<int> acquired{0};
  std::atomic<int> released{0};
};

class Owner {
 public:
  explicit Owner(Resources& resources) noexcept : resources_(&resources) { resources_->acquired.fetch_add(1); }
  Owner(const Owner& other) noexcept : resources_(other.resources_) { resources_->acquired.fetch_add(1); }
  Owner(Owner&& other) noexcept : resources_(other.resources_), owns_(std::exchange(other.owns_, false)) {}
  Owner& operator=(const Owner&) = delete;
  Owner& operator=(Owner&&) = delete;
  ~Owner() {
    if (owns_) resources_->released.fetch_add(1);
  }

 private:
  Resources* resources_;
  bool owns_ = true;
};

}  // namespace coexec::test
