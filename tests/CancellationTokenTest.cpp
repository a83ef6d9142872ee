// SPDX-License-Identifier: BSL-1.0
#include "coexec/CancellationToken.h"

// CancellationSource / CancellationToken / CancellationRegistration: the
// request, the callbacks (inline when already cancelled, once, in order, on
// the cancelling thread), deregistration, and the races the header promises
// to survive (cancel against deregistration, cancel against registration).

#include <atomic>
#include <chrono>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "Assertions.h"

#include "DeathTestSupport.h"
#include "TestSupport.h"
#include "coexec/Errors.h"

using namespace std::chrono_literals;

using coexec::CancellationRegistration;
using coexec::CancellationSource;
using coexec::CancellationToken;
using coexec::OperationCancelled;
using coexec::test::kLeads;
using coexec::test::Lead;
using coexec::test::race;

static_assert(!std::is_copy_constructible_v<CancellationRegistration>);
static_assert(!std::is_move_constructible_v<CancellationRegistration>);

TEST_CASE("a default token can never be cancelled", "[cancel][token]") {
  const CancellationToken token;
  CHECK_FALSE(token.canBeCancelled());
  CHECK_FALSE(token.isCancellationRequested());
  CHECK_NOTHROW(token.throwIfCancellationRequested());
  int calls = 0;
  {
    CancellationRegistration registration(token, [&] { ++calls; });
  }
  CHECK(calls == 0);
}

TEST_CASE("requestCancellation is seen by every token and copy and reports the first call only", "[cancel][token]") {
  CancellationSource source;
  const CancellationToken token = source.token();
  CancellationToken copy = token;
  CancellationToken moved = std::move(copy);
  CancellationSource sourceCopy = source;
  CHECK(token.canBeCancelled());
  CHECK(moved.canBeCancelled());
  CHECK_FALSE(token.isCancellationRequested());
  CHECK_FALSE(source.isCancellationRequested());
  CHECK_NOTHROW(token.throwIfCancellationRequested());

  CHECK(sourceCopy.requestCancellation());
  CHECK_FALSE(source.requestCancellation());
  CHECK_FALSE(sourceCopy.requestCancellation());
  CHECK(source.isCancellationRequested());
  CHECK(token.isCancellationRequested());
  CHECK(moved.isCancellationRequested());
  CHECK(source.token().isCancellationRequested());
  CHECK_THROWS_AS(token.throwIfCancellationRequested(), OperationCancelled);
}

TEST_CASE("a token outlives its source and keeps its state", "[cancel][token]") {
  CancellationToken cancelled;
  CancellationToken live;
  {
    CancellationSource a;
    CancellationSource b;
    cancelled = a.token();
    live = b.token();
    a.requestCancellation();
  }
  CHECK(cancelled.isCancellationRequested());
  CHECK_FALSE(live.isCancellationRequested());
}

TEST_CASE("callbacks run once on the cancelling thread in registration order", "[cancel][registration]") {
  CancellationSource source;
  std::vector<int> order;  // written by the cancelling thread only, read after join
  std::vector<std::thread::id> threads;
  std::optional<CancellationRegistration> first;
  std::optional<CancellationRegistration> second;
  std::optional<CancellationRegistration> third;
  first.emplace(source.token(), [&] {
    order.push_back(1);
    threads.push_back(std::this_thread::get_id());
  });
  second.emplace(source.token(), [&] {
    order.push_back(2);
    threads.push_back(std::this_thread::get_id());
  });
  third.emplace(source.token(), [&] {
    order.push_back(3);
    threads.push_back(std::this_thread::get_id());
  });
  std::thread::id canceller;
  std::thread thread([&] {
    canceller = std::this_thread::get_id();
    source.requestCancellation();
    source.requestCancellation();  // the second request runs nothing
  });
  thread.join();
  CHECK(order == std::vector<int>{1, 2, 3});
  REQUIRE(threads.size() == 3u);
  for (const auto& id : threads)
    CHECK(id == canceller);
  source.requestCancellation();
  CHECK(order.size() == 3u);
}

TEST_CASE("registering on a cancelled token runs the callback at once on the registering thread",
          "[cancel][registration]") {
  CancellationSource source;
  source.requestCancellation();
  int calls = 0;
  std::thread::id ranOn;
  {
    CancellationRegistration registration(source.token(), [&] {
      ++calls;
      ranOn = std::this_thread::get_id();
    });
    CHECK(calls == 1);
    CHECK(ranOn == std::this_thread::get_id());
    source.requestCancellation();
    CHECK(calls == 1);
  }
  CHECK(calls == 1);
}

TEST_CASE("a destroyed registration never runs its callback", "[cancel][registration]") {
  CancellationSource source;
  int kept = 0;
  int dropped = 0;
  CancellationRegistration keep(source.token(), [&] { ++kept; });
  {
    CancellationRegistration drop(source.token(), [&] { ++dropped; });
  }
  source.requestCancellation();
  CHECK(kept == 1);
  CHECK(dropped == 0);
}

TEST_CASE("an empty callback is refused with std::invalid_argument", "[cancel][registration]") {
  CancellationSource source;
  CHECK_THROWS_AS(CancellationRegistration(source.token(), std::function<void()>{}), std::invalid_argument);
  source.requestCancellation();
  CHECK_THROWS_AS(CancellationRegistration(source.token(), std::function<void()>{}), std::invalid_argument);
  CHECK_THROWS_WITH(CancellationRegistration(source.token(), std::function<void()>{}),
                    "coexec::CancellationRegistration: the callback is empty");
  // Even on a token that can never be cancelled.
  CHECK_THROWS_AS(CancellationRegistration(CancellationToken(), std::function<void()>{}), std::invalid_argument);
}

TEST_CASE("a callback may destroy its own registration", "[cancel][registration]") {
  CancellationSource source;
  int calls = 0;
  auto registration = std::make_unique<std::optional<CancellationRegistration>>();
  auto* slot = registration.get();
  slot->emplace(source.token(), [&calls, slot] {
    ++calls;
    slot->reset();  // the destructor must not wait for the callback running on this thread
  });
  source.requestCancellation();
  CHECK(calls == 1);
  CHECK_FALSE(slot->has_value());
}

TEST_CASE("a token cancelled on one thread publishes the writes made before the request", "[cancel][token][race]") {
  int mismatches = 0;
  for (int round = 0; round < 200; ++round) {
    CancellationSource source;
    int payload = 0;  // deliberately not atomic: the token's ordering must cover it (TSan checks)
    int seen = -1;    // written by the reader, read after join
    std::thread reader([&, token = source.token()] {
      while (!token.isCancellationRequested())
        std::this_thread::yield();
      seen = payload;
    });
    payload = round + 1;
    source.requestCancellation();
    reader.join();
    if (seen != round + 1) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("cancel racing deregistration never runs a callback after its registration is gone",
          "[cancel][registration][race]") {
  constexpr int kRounds = 2000;
  int ranCount = 0;
  int lateRuns = 0;
  for (int round = 0; round < kRounds; ++round) {
    const Lead lead = kLeads[round % std::size(kLeads)];
    CancellationSource source;
    // The callback writes into memory the deregistering thread frees right after
    // the registration's destructor: a late or concurrent run is a use after
    // free (ASan) or a data race (TSan), and is counted below.
    auto target = std::make_unique<std::atomic<int>>(0);
    std::atomic<bool> deregistered{false};
    std::atomic<int> late{0};
    auto registration = std::make_unique<CancellationRegistration>(source.token(), [&, raw = target.get()] {
      if (deregistered.load()) late.fetch_add(1);
      raw->fetch_add(1);
    });
    int runs = 0;
    race(
        lead,
        [&] {
          registration.reset();
          deregistered = true;
          runs = target->load();
          target.reset();
        },
        [&] { source.requestCancellation(); });
    CHECK(runs <= 1);
    ranCount += runs;
    lateRuns += late.load();
  }
  CHECK(lateRuns == 0);
  // Both outcomes occurred: the callback ran (cancel came first) and did not
  // (the registration was gone first).
  INFO("the callback ran in " << ranCount << " of " << kRounds << " rounds");
  CHECK(ranCount > 0);
  CHECK(ranCount < kRounds);
}

TEST_CASE("cancel racing registration runs every callback exactly once", "[cancel][registration][race]") {
  constexpr int kRounds = 300;
  constexpr int kRegistrations = 16;
  std::size_t ranInline = 0;    // registered after the request: ran in the constructor
  std::size_t ranByCancel = 0;  // registered before: ran on the cancelling thread
  for (int round = 0; round < kRounds; ++round) {
    const Lead lead = kLeads[round % std::size(kLeads)];
    CancellationSource source;
    std::atomic<int> calls{0};
    std::atomic<int> inlineCalls{0};
    std::vector<std::unique_ptr<CancellationRegistration>> registrations;
    race(
        lead,
        [&] {
          const auto registering = std::this_thread::get_id();
          for (int i = 0; i < kRegistrations; ++i) {
            registrations.push_back(std::make_unique<CancellationRegistration>(source.token(), [&, registering] {
              ++calls;
              if (std::this_thread::get_id() == registering) ++inlineCalls;
            }));
          }
        },
        [&] { source.requestCancellation(); });
    REQUIRE(calls == kRegistrations);
    registrations.clear();
    REQUIRE(calls == kRegistrations);
    ranInline += static_cast<std::size_t>(inlineCalls.load());
    ranByCancel += static_cast<std::size_t>(kRegistrations - inlineCalls.load());
  }
  // Both outcomes occurred: callbacks registered before the request and after it.
  INFO(ranInline << " callbacks ran inline, " << ranByCancel << " on the cancelling thread");
  CHECK(ranInline > 0);
  CHECK(ranByCancel > 0);
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("a moved-from CancellationSource has no state: its tokens can never be cancelled and a request does nothing",
          "[cancel][token][bad-input]") {
  CancellationSource source;
  const CancellationToken before = source.token();
  CancellationSource moved = std::move(source);
  // NOLINTBEGIN(bugprone-use-after-move): the misuse under test
  const CancellationToken after = source.token();
  CHECK_FALSE(after.canBeCancelled());
  CHECK_FALSE(source.requestCancellation());
  CHECK_FALSE(source.isCancellationRequested());
  // NOLINTEND(bugprone-use-after-move)
  CHECK_NOTHROW(after.throwIfCancellationRequested());
  CHECK(moved.requestCancellation());  // the state went with the move
  CHECK(before.isCancellationRequested());
  CHECK_THROWS_AS(before.throwIfCancellationRequested(), OperationCancelled);
  CHECK_THROWS_WITH(before.throwIfCancellationRequested(),
                    "coexec: the operation was cancelled before it produced a result");
}

TEST_CASE("a callback that throws while registering on a cancelled token throws out of the registration",
          "[cancel][registration][bad-input]") {
  CancellationSource source;
  source.requestCancellation();
  CHECK_THROWS_WITH(CancellationRegistration(source.token(), [] { throw std::runtime_error("callback failed"); }),
                    "callback failed");
}

TEST_CASE("death child: a cancellation callback that throws", "[.][cancel][death]") {
  if (!coexec::test::isDeathChild()) return;
  coexec::test::prepareDeathChild();
  CancellationSource source;
  CancellationRegistration registration(source.token(), [] { throw std::runtime_error("callback failed"); });
  (void)source.requestCancellation();  // noexcept: the exception terminates the program
}

TEST_CASE("a cancellation callback that throws inside requestCancellation terminates the program",
          "[cancel][registration][bad-input][death]") {
  const std::string output =
      coexec::test::requireAbortsWith("death child: a cancellation callback that throws", "terminate called");
  CHECK_THAT(output, Catch::Matchers::Contains("callback failed"));
}
