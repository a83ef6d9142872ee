// SPDX-License-Identifier: BSL-1.0
// Built by the CTest test compileFail.groupAndLaneTemporary, never linked
// there. On GCC 12 and older each line marked `expect-error` must fail with
// coexec's static_assert that names the fix, and nothing else may fail; on
// other compilers the whole file must compile, and compileForms.* runs
// every form (COEXEC_RUN_FORMS) and checks its result.
//
// Refused on GCC 12, as for the pool's submit(): `co_await` of the Future of
// TaskGroup::spawn, SerialExecutor::submit or KeyedExecutor::submit of a
// lambda temporary whose capture owns memory.
//
// clang-format off
// expect-message: coexec: GCC 12 miscompiles temporaries in a co_await expression; name the Future first: auto f = pool.submit(...); co_await f;
// clang-format on
//
// Each refused form awaits a Future of a different result type: a refusal
// is one instantiation per type, reported once per translation unit.

#include "coexec/TaskGroup.h"

#include <string>
#include <utility>

#include "coexec/KeyedExecutor.h"
#include "coexec/SerialExecutor.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"

namespace laneForms {

coexec::Task<std::string> awaitSpawnOfOwningLambda(coexec::ThreadPoolExecutor& pool, std::string s) {
  coexec::TaskGroup group(pool);
  std::string r = co_await group.spawn([s] { return s; });  // expect-error
  co_await group.join();
  co_return r;
}

coexec::Task<std::size_t> awaitLaneSubmitOfOwningLambda(coexec::SerialExecutor& lane, std::string s) {
  co_return co_await lane.submit([s] { return s.size(); });  // expect-error
}

coexec::Task<long> awaitKeyedSubmitOfOwningLambda(coexec::KeyedExecutor& lanes, std::string s) {
  co_return co_await lanes.submit(s, [s] { return static_cast<long>(s.size()); });  // expect-error
}

// The safe forms compile everywhere: the Future named first.
coexec::Task<std::size_t> namedForms(coexec::ThreadPoolExecutor& pool, coexec::SerialExecutor& lane,
                                     coexec::KeyedExecutor& lanes, std::string s) {
  coexec::TaskGroup group(pool);
  auto spawned = group.spawn([s] { return s.size(); });
  const std::size_t a = co_await spawned;
  co_await group.join();
  auto serial = lane.submit([s] { return s.size(); });
  const std::size_t b = co_await serial;
  auto keyed = lanes.submit(s, [s] { return s.size(); });
  const std::size_t c = co_await keyed;
  co_return a + b + c;
}

}  // namespace laneForms

#ifdef COEXEC_RUN_FORMS
#include <catch2/catch.hpp>

#include "CoroutineTestSupport.h"
#include "coexec/SyncWait.h"

TEST_CASE("where GCC 12 refuses co_await of a group's or lane's Future of an owning lambda, the forms run correctly",
          "[gcc-bug][forms]") {
  coexec::ThreadPoolExecutor pool(coexec::test::taggedPool("forms", 2, 2, coexec::WorkQueue::bounded(16)));
  {
    coexec::SerialExecutor lane(pool);
    coexec::KeyedExecutor lanes(pool, 4);
    const std::string text(300, 'g');
    CHECK(coexec::syncWait(laneForms::awaitSpawnOfOwningLambda(pool, text)) == text);
    CHECK(coexec::syncWait(laneForms::awaitLaneSubmitOfOwningLambda(lane, text)) == 300);
    CHECK(coexec::syncWait(laneForms::awaitKeyedSubmitOfOwningLambda(lanes, text)) == 300L);
    CHECK(coexec::syncWait(laneForms::namedForms(pool, lane, lanes, text)) == 900);
  }
  pool.close();
  CHECK(pool.stats().completedTaskCount == 6);
}
#endif
