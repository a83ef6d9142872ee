// SPDX-License-Identifier: BSL-1.0
// The presets of Executors.h: each builds a ThreadPoolOptions with a bounded
// thread count, named threads and abort(); only the *Unbounded ones have an
// unbounded queue. No state, no locks.

#include "coexec/Executors.h"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace coexec {
namespace {

void requirePositive(const char* preset, const char* argument, std::size_t value, const char* hint = "") {
  if (value == 0) {
    throw std::invalid_argument(
        fmt::format("coexec::Executors::{}: {} must be at least 1, got 0{}", preset, argument, hint));
  }
}

void requireName(const char* preset, const std::string& name) {
  if (name.empty()) throw std::invalid_argument(fmt::format("coexec::Executors::{}: name must not be empty", preset));
}

ThreadPoolOptions preset(std::string name, std::size_t core, std::size_t max, WorkQueue queue) {
  ThreadPoolOptions options;
  options.name = std::move(name);
  options.corePoolSize = core;
  options.maximumPoolSize = max;
  options.workQueue = queue;
  options.rejectionPolicy = RejectionPolicy::abort();
  return options;
}

}  // namespace

ThreadPoolOptions Executors::fixed(std::size_t n, std::size_t capacity, std::string name) {
  requirePositive("fixed", "n", n);
  requirePositive("fixed", "capacity", capacity, " (for a hand-off without a queue use Executors::cached(n, 0))");
  requireName("fixed", name);
  return preset(std::move(name), n, n, WorkQueue::bounded(capacity));
}

ThreadPoolOptions Executors::fixedUnbounded(std::size_t n, std::string name) {
  requirePositive("fixedUnbounded", "n", n);
  requireName("fixedUnbounded", name);
  return preset(std::move(name), n, n, WorkQueue::unbounded());
}

ThreadPoolOptions Executors::cached(std::size_t maxThreads, std::size_t capacity, std::string name) {
  requirePositive("cached", "maxThreads", maxThreads);
  requireName("cached", name);
  // Every thread is a core thread that times out: the pool grows to
  // maxThreads before it queues anything (a core of 0 would run one thread
  // until the queue is full), and shrinks to nothing when idle.
  ThreadPoolOptions options = preset(std::move(name), maxThreads, maxThreads,
                                     capacity == 0 ? WorkQueue::synchronous() : WorkQueue::bounded(capacity));
  options.keepAliveTime = kCachedKeepAlive;
  options.allowCoreThreadTimeOut = true;
  return options;
}

ThreadPoolOptions Executors::single(std::size_t capacity, std::string name) {
  requirePositive("single", "capacity", capacity);
  requireName("single", name);
  return preset(std::move(name), 1, 1, WorkQueue::bounded(capacity));
}

ThreadPoolOptions Executors::singleUnbounded(std::string name) {
  requireName("singleUnbounded", name);
  return preset(std::move(name), 1, 1, WorkQueue::unbounded());
}

ThreadPoolOptions Executors::scheduled(std::size_t n, std::size_t capacity, std::string name) {
  requirePositive("scheduled", "n", n);
  requirePositive("scheduled", "capacity", capacity);
  requireName("scheduled", name);
  return preset(std::move(name), n, n, WorkQueue::bounded(capacity));
}

}  // namespace coexec
