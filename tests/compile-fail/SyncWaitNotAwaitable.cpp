// SPDX-License-Identifier: BSL-1.0
// Built by the CTest test compileFail.syncWaitNotAwaitable, never linked. On
// every compiler the line marked `expect-error` must fail with coexec's
// static_assert that says what syncWait takes, and nothing else may fail.
//
// expect-message: coexec: syncWait takes a Task or an awaitable

#include "coexec/SyncWait.h"

#include <coroutine>

struct NotAwaitable {
  int value = 0;
};

void runNotAwaitable() {
  coexec::syncWait(NotAwaitable{});  // expect-error
}

// Accepted: an awaiter (here one that never suspends).
struct Ready {
  bool await_ready() const noexcept { return true; }
  void await_suspend(std::coroutine_handle<>) const noexcept {}
  int await_resume() const noexcept { return 1; }
};

int runReady() { return coexec::syncWait(Ready{}); }
