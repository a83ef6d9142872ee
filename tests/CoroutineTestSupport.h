// SPDX-License-Identifier: BSL-1.0
#pragma once

// Helpers shared by the coroutine tests: an object that counts its
// constructions and destructions (to see frames and captures die exactly
// once), pools whose threads carry a tag (to see where a coroutine resumed),
// and the guards that keep a failing assertion from hanging a pool.

#include <atomic>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "TestSupport.h"
#include "coexec/Errors.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

namespace coexec::test {

/// Constructions and destructions of Trackers. Atomic: copies may die on pool
/// threads.
struct Lifetimes {
  std::atomic<int> constructed{0};
  std::atomic<int> destroyed{0};
  [[nodiscard]] int alive() const { return constructed.load() - destroyed.load(); }
};

/// Counts every construction (default, copy, move) and destruction in its
/// Lifetimes. Holds no resource, so a double destruction (the GCC 12 bugs)
/// shows in the counts and nowhere else.
class Tracker {
 public:
  explicit Tracker(Lifetimes& lifetimes) noexcept : lifetimes_(&lifetimes) { lifetimes_->constructed.fetch_add(1); }
  Tracker(const Tracker& other) noexcept : lifetimes_(other.lifetimes_) { lifetimes_->constructed.fetch_add(1); }
  Tracker(Tracker&& other) noexcept : lifetimes_(other.lifetimes_) { lifetimes_->constructed.fetch_add(1); }
  Tracker& operator=(const Tracker&) = delete;
  Tracker& operator=(Tracker&&) = delete;
  ~Tracker() { lifetimes_->destroyed.fetch_add(1); }

 private:
  Lifetimes* lifetimes_;
};

/// The tag of the pool whose thread this is (empty on other threads); set by
/// taggingFactory().
inline thread_local std::string_view currentTag;

/// A thread factory whose threads set `currentTag = tag` before they run.
/// `tag` must outlive the pool (use a string literal).
inline ThreadFactory taggingFactory(std::string_view tag) {
  return [tag](std::string /*threadName*/, std::function<void()> body) {
    return std::thread([tag, body = std::move(body)] {
      currentTag = tag;
      body();
    });
  };
}

/// Options for a pool named `name` whose threads are tagged with `name`.
/// `name` must outlive the pool (use a string literal).
inline ThreadPoolOptions taggedPool(std::string_view name, std::size_t core, std::size_t max, WorkQueue queue,
                                    RejectionPolicy policy = RejectionPolicy::abort()) {
  ThreadPoolOptions options;
  options.name = std::string(name);
  options.corePoolSize = core;
  options.maximumPoolSize = max;
  options.workQueue = queue;
  options.rejectionPolicy = std::move(policy);
  options.threadFactory = taggingFactory(name);
  return options;
}

/// True if `f()` throws an `E` (or a type derived from it).
template <class E, class F>
bool throwsA(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
  return false;
}

/// True if `error` holds an `E` (or a type derived from it).
template <class E>
bool holdsA(const std::exception_ptr& error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

/// Awaits `awaitable` (a withTimeout result, or invokeAll / invokeAny with a
/// timeout, named by the caller) and tells whether it threw TimeoutError; its
/// value is dropped and any other exception propagates.
template <class Awaitable>
Task<bool> timedOut(Awaitable& awaitable) {
  try {
    (void)co_await awaitable;
  } catch (const TimeoutError&) {
    co_return true;
  }
  co_return false;
}

}  // namespace coexec::test
