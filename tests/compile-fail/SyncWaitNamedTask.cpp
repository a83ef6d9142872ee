// SPDX-License-Identifier: BSL-1.0
// Built by the CTest test compileFail.syncWaitNamedTask, never linked. On
// every compiler the line marked `expect-error` must fail with coexec's
// static_assert that names the fix, and nothing else may fail.
//
// expect-message: coexec: syncWait takes the Task over; a named Task must be moved in: syncWait(std::move(task))

#include "coexec/SyncWait.h"

#include <utility>

#include "coexec/Task.h"

coexec::Task<int> one() { co_return 1; }

int runNamedTask() {
  coexec::Task<int> task = one();
  return coexec::syncWait(task);  // expect-error
}

// The accepted forms: a temporary, or a named Task moved in.
int runTemporaryTask() { return coexec::syncWait(one()); }

int runMovedTask() {
  coexec::Task<int> task = one();
  return coexec::syncWait(std::move(task));
}
