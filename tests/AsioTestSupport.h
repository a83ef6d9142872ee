// SPDX-License-Identifier: BSL-1.0
#pragma once

// Helpers shared by the Asio bridge tests: where a function ran (the tag of
// its thread), a saturated pool, and what an exception_ptr holds.

#include <exception>
#include <future>
#include <string>

#include "Assertions.h"

#include "AsioFlavour.h"
#include "CoroutineTestSupport.h"
#include "TestSupport.h"
#include "coexec/ThreadPoolExecutor.h"

namespace coexec::test {

/// What a function run through an executor saw: the tag of its thread.
struct Seen {
  std::promise<std::string> tag;
  void record() { tag.set_value(std::string(currentTag)); }
};

inline std::string tagOf(Seen& seen) {
  auto future = seen.tag.get_future();
  REQUIRE(future.wait_for(kLong) == std::future_status::ready);
  return future.get();
}

/// Fills a 1-thread pool with a bounded(1) queue: the thread blocked on
/// `gate`, the queue holding one task. The next task is rejected.
inline void saturate(ThreadPoolExecutor& pool, Gate& gate, Counter& started) {
  pool.execute([&] {
    started.arrive();
    gate.wait();
  });
  REQUIRE(started.waitFor(1));
  pool.execute([] {});
}

/// True if `error` holds an E (holdsA, under the name these tests use).
template <class E>
bool holds(const std::exception_ptr& error) {
  return holdsA<E>(error);
}

inline bool isOperationAborted(const std::exception_ptr& error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const AsioSystemError& e) {
    return e.code() == asio::error::operation_aborted;
  } catch (...) {
    return false;
  }
}

}  // namespace coexec::test
