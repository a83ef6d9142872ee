// SPDX-License-Identifier: BSL-1.0
#include "coexec/Errors.h"

// The error hierarchy: everything derives from coexec::Error and
// std::exception, and every what() is a sentence with the context to act on.

#include <algorithm>
#include <cctype>
#include <exception>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "Assertions.h"

using coexec::BrokenPromise;
using coexec::Error;
using coexec::OperationCancelled;
using coexec::PoolState;
using coexec::PoolStats;
using coexec::RejectedExecution;
using coexec::TimeoutError;

static_assert(std::is_base_of_v<std::exception, Error>);
static_assert(std::is_base_of_v<std::runtime_error, Error>);
static_assert(std::is_base_of_v<Error, RejectedExecution>);
static_assert(std::is_base_of_v<Error, OperationCancelled>);
static_assert(std::is_base_of_v<Error, TimeoutError>);
static_assert(std::is_base_of_v<Error, BrokenPromise>);
// Distinct kinds: catching one never catches another.
static_assert(!std::is_base_of_v<OperationCancelled, TimeoutError>);
static_assert(!std::is_base_of_v<OperationCancelled, BrokenPromise>);
static_assert(!std::is_base_of_v<OperationCancelled, RejectedExecution>);

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

PoolStats snapshot() {
  PoolStats s;
  s.name = "orders";
  s.state = PoolState::shutdown;
  s.corePoolSize = 2;
  s.maximumPoolSize = 4;
  s.poolSize = 3;
  s.activeCount = 1;
  s.queueSize = 5;
  s.queueCapacity = 8;
  s.completedTaskCount = 17;
  return s;
}

}  // namespace

TEST_CASE("every coexec error can be caught as coexec::Error and as std::exception", "[errors]") {
  CHECK_THROWS_AS(throw OperationCancelled(), Error);
  CHECK_THROWS_AS(throw BrokenPromise(), Error);
  CHECK_THROWS_AS(throw TimeoutError("timed out."), Error);
  CHECK_THROWS_AS(throw RejectedExecution("the pool is shut down", snapshot()), Error);
  CHECK_THROWS_AS(throw OperationCancelled(), std::exception);
  CHECK_THROWS_AS(throw RejectedExecution("the pool is shut down", snapshot()), std::exception);
}

TEST_CASE("OperationCancelled and BrokenPromise have a sentence for a default message", "[errors]") {
  const std::string cancelled = OperationCancelled().what();
  INFO(cancelled);
  CHECK(cancelled.size() > 10u);
  CHECK(contains(lower(cancelled), "cancel"));

  const std::string broken = BrokenPromise().what();
  INFO(broken);
  CHECK(broken.size() > 10u);
  CHECK(broken != cancelled);
}

TEST_CASE("errors built with a message report exactly that message", "[errors]") {
  CHECK(std::string(OperationCancelled("the import was cancelled by the user.").what()) ==
        "the import was cancelled by the user.");
  CHECK(std::string(BrokenPromise("the task was dropped unrun.").what()) == "the task was dropped unrun.");
  CHECK(std::string(TimeoutError("waited 5 ms for the result.").what()) == "waited 5 ms for the result.");
}

TEST_CASE("RejectedExecution carries the reason and a snapshot of the pool", "[errors][rejection]") {
  const RejectedExecution error("the pool is shut down", snapshot());
  const std::string what = error.what();
  INFO(what);
  CHECK(contains(what, "the pool is shut down"));
  CHECK(contains(what, "orders"));
  CHECK(contains(what, "SHUTDOWN"));
  // The sizes are labelled (the exact layout is the implementation's choice).
  CHECK(contains(lower(what), "core"));
  CHECK(contains(lower(what), "max"));
  CHECK(contains(lower(what), "active"));
  CHECK(contains(what, "17"));

  const PoolStats& s = error.snapshot();
  CHECK(s.name == "orders");
  CHECK(s.state == PoolState::shutdown);
  CHECK(s.corePoolSize == 2u);
  CHECK(s.maximumPoolSize == 4u);
  CHECK(s.poolSize == 3u);
  CHECK(s.activeCount == 1u);
  CHECK(s.queueSize == 5u);
  CHECK(s.completedTaskCount == 17u);

  const RejectedExecution copy = error;  // exceptions are copied when thrown
  CHECK(std::string(copy.what()) == what);
  CHECK(copy.snapshot().name == "orders");
}

// ---- bad input and misuse (docs/reliability.md) -------------------------------

TEST_CASE("an AllFailed built from no errors holds none, and its message says no task failed with an error",
          "[errors][bad-input]") {
  // invokeAny never throws it so (its range is never empty there); a user
  // may build one, and gets a consistent, empty error list.
  const coexec::AllFailed none{std::vector<std::exception_ptr>{}};
  CHECK(none.errors().empty());
  CHECK(std::string(none.what()) ==
        "coexec: invokeAny: every one of the 0 tasks failed (errors() holds each one's exception); the first task's "
        "error: (none)");
  const coexec::AllFailed withNull{std::vector<std::exception_ptr>{nullptr}};
  CHECK(withNull.errors().size() == 1);
  CHECK_THAT(withNull.what(), Catch::Matchers::EndsWith("the first task's error: (no exception)"));
}
