// SPDX-License-Identifier: BSL-1.0
// Built by the CTest test compileFail.withTimeoutNamedTask, never linked. On
// every compiler the line marked `expect-error` must fail with coexec's
// static_assert that names the fix, and nothing else may fail.
//
// expect-message: coexec: withTimeout takes the Task over; a named Task must be moved in: withTimeout(std::move(task), d)

#include "coexec/WithTimeout.h"

#include <chrono>
#include <utility>

#include "coexec/Task.h"

using namespace std::chrono_literals;

coexec::Task<int> one() { co_return 1; }

coexec::Task<int> timedNamedTask() {
  coexec::Task<int> task = one();
  auto timed = coexec::withTimeout(task, 1s);  // expect-error
  co_return co_await timed;
}

// The accepted forms: a temporary, or a named Task moved in.
coexec::Task<int> timedTemporaryTask() {
  auto timed = coexec::withTimeout(one(), 1s);
  co_return co_await timed;
}

coexec::Task<int> timedMovedTask() {
  coexec::Task<int> task = one();
  auto timed = coexec::withTimeout(std::move(task), 1s);
  co_return co_await timed;
}
