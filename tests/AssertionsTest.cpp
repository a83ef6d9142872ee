// SPDX-License-Identifier: BSL-1.0
// tests/Assertions.h: its CHECK, CHECK_FALSE, REQUIRE and REQUIRE_FALSE pass,
// fail, count and report as Catch2's own. The cases tagged
// [.assertion-failures] fail on purpose; the test assertions.failuresAreReported
// (tests/cmake/CheckAssertionFailures.cmake) runs them and checks what Catch2
// printed.
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>

#include "Assertions.h"

namespace {

// Counts its conversions to bool: an assertion evaluates its operand once.
struct CountedFlag {
  int* conversions;
  explicit operator bool() const {
    ++*conversions;
    return true;
  }
};

}  // namespace

TEST_CASE("Assertions: every comparison form passes, evaluating its operands once", "[assertions]") {
  int const three = 3;
  unsigned const four = 4;
  std::string const name = "abc";
  int const* const none = nullptr;
  std::optional<int> const one = 1;
  bool const yes = true;

  CHECK(three == 3);
  CHECK(three != 4);
  CHECK(three < 4);
  CHECK(three <= 3);
  CHECK(three > 2);
  CHECK(three >= 3);
  CHECK(four == 4u);
  CHECK(three | 4);
  CHECK(three & 1);
  CHECK(three ^ 2);
  CHECK(name == "abc");
  CHECK(none == nullptr);
  CHECK(one);
  CHECK(yes);
  CHECK(yes == true);
  CHECK(yes != false);
  CHECK((three == 3 && yes));
  CHECK_FALSE(three == 4);
  CHECK_FALSE(!yes);
  REQUIRE(three == 3);
  REQUIRE_FALSE(name.empty());

  int calls = 0;
  auto next = [&calls] { return ++calls; };
  CHECK(next() == 1);
  REQUIRE(calls == 1);
  CHECK_FALSE(next() == 7);
  REQUIRE(calls == 2);

  int conversions = 0;
  CHECK(CountedFlag{&conversions});
  REQUIRE(conversions == 1);
}

TEST_CASE("Assertions: a failed CHECK is reported with its expansion, and the case goes on", "[.assertion-failures]") {
  int const three = 3;
  CHECK(three == 4);
  CHECK_FALSE(three == 3);
  std::optional<int> const empty;
  CHECK(empty);
  CHECK(three == 3);
  std::cout << "after the failed CHECKs" << std::endl;
}

TEST_CASE("Assertions: a failed REQUIRE is reported with its expansion, and ends the case", "[.assertion-failures]") {
  std::string const name = "abc";
  REQUIRE(name == "abd");
  std::cout << "not reached after REQUIRE" << std::endl;
}

TEST_CASE("Assertions: a failed REQUIRE_FALSE is reported, and ends the case", "[.assertion-failures]") {
  bool const yes = true;
  REQUIRE_FALSE(yes);
  std::cout << "not reached after REQUIRE_FALSE" << std::endl;
}

TEST_CASE("Assertions: an exception from an assertion's expression fails the case", "[.assertion-failures]") {
  auto throwing = []() -> int { throw std::runtime_error("thrown while evaluating"); };
  CHECK(throwing() == 1);
  std::cout << "not reached after the exception" << std::endl;
}
