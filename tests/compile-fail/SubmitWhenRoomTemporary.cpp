// SPDX-License-Identifier: BSL-1.0
// Built by the CTest test compileFail.submitWhenRoomTemporary, never linked
// there. On GCC 12 and older each line marked `expect-error` must fail with
// coexec's static_assert that names the fix, and nothing else may fail; on
// other compilers the whole file must compile, and compileForms.* runs
// every form (COEXEC_RUN_FORMS) and checks its result.
//
// Refused on GCC 12: `co_await pool.submitWhenRoom(f)` of a lambda
// temporary whose capture owns memory (GCC 12 would destroy the capture
// twice), in every overload.
//
// clang-format off
// expect-message: coexec: GCC 12 miscompiles temporaries in a co_await expression; name the awaitable first: auto room = pool.submitWhenRoom(...); auto future = co_await room;
// clang-format on
//
// Each refused form awaits an awaitable of a different result type: a
// refusal is one instantiation per type, reported once per translation unit.

#include <chrono>
#include <string>

#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

namespace roomForms {

coexec::Task<std::size_t> awaitRoomOfOwningLambda(coexec::ThreadPoolExecutor& pool, std::string s) {
  coexec::Future<std::size_t> f = co_await pool.submitWhenRoom([s] { return s.size(); });  // expect-error
  co_return co_await f;
}

coexec::Task<std::string> awaitRoomWithTimeoutOfOwningLambda(coexec::ThreadPoolExecutor& pool, std::string s) {
  coexec::Future<std::string> f =
      co_await pool.submitWhenRoom([s] { return s; }, std::chrono::seconds(10));  // expect-error
  co_return co_await f;
}

// The safe form compiles everywhere: the awaitable named first.
coexec::Task<std::size_t> namedForm(coexec::ThreadPoolExecutor& pool, std::string s) {
  auto room = pool.submitWhenRoom([s] { return s.size(); });
  coexec::Future<std::size_t> f = co_await room;
  co_return co_await f;
}

}  // namespace roomForms

#ifdef COEXEC_RUN_FORMS
#include <catch2/catch.hpp>

#include "CoroutineTestSupport.h"
#include "coexec/SyncWait.h"

TEST_CASE("where GCC 12 refuses co_await of submitWhenRoom of an owning lambda, the forms run correctly",
          "[gcc-bug][forms]") {
  coexec::ThreadPoolExecutor pool(coexec::test::taggedPool("forms", 1, 1, coexec::WorkQueue::bounded(1)));
  const std::string text(300, 'r');
  CHECK(coexec::syncWait(roomForms::awaitRoomOfOwningLambda(pool, text)) == 300);
  CHECK(coexec::syncWait(roomForms::awaitRoomWithTimeoutOfOwningLambda(pool, text)) == text);
  CHECK(coexec::syncWait(roomForms::namedForm(pool, text)) == 300);
  pool.close();
  CHECK(pool.stats().completedTaskCount == 3);
}
#endif
