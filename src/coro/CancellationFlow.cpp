// SPDX-License-Identifier: BSL-1.0
// Cancellation that flows into what a coroutine awaits: the link a Future's
// awaiter makes between the awaiting task's token and the awaited task
// (FutureAwaiter, withTimeout on a Future). The links between tasks
// themselves (a parent and the work it submits, a task and an outside
// token) live in TaskCore.
//
// A link's callback cancels the awaited task and nothing else: the awaiting
// coroutine is resumed by the awaited task's settlement, never by the
// callback, so "resumed once what it awaits has settled" needs no protocol
// of its own. The awaited task is kept alive by the Future the coroutine
// awaits, which outlives the link (the link is released when the coroutine
// goes on, and its destructor waits for a callback running on another
// thread); the callback takes a reference of its own all the same, since
// cancelling may settle the task and resume the coroutine inline, which may
// then drop the Future before the callback returns.

#include "coexec/Future.h"

#include <cassert>

namespace coexec::detail {

class AwaitLink final : public Recycled {
 public:
  AwaitLink(const CancellationToken& token, TaskCore& awaited)
      : registration_(token, [target = &awaited] {
          target->addRef();
          const Ref<TaskCore> keep = Ref<TaskCore>::adopt(target);
          keep->cancelFromLink();  // may resume the coroutine here, which destroys this link: `keep` is on the stack
        }) {}

 private:
  CancellationRegistration registration_;
};

void linkAwaitToCancellation(TaskContext& context, TaskCore& awaited) {
  assert(context.awaitLink() == nullptr && "a chain awaits one Future at a time");
  const CancellationToken token = context.cancellationToken();  // may throw std::bad_alloc
  if (token.isCancellationRequested()) {
    // Cancelled already: the awaited work goes too, and the coroutine waits
    // for it to settle (structured: it does not leave it running).
    awaited.cancelFromLink();
    return;
  }
  context.setAwaitLink(new AwaitLink(token, awaited));  // runs the callback here if the token was cancelled meanwhile
}

void releaseAwaitLink(TaskContext& context) noexcept {
  delete context.awaitLink();
  context.setAwaitLink(nullptr);
}

}  // namespace coexec::detail
