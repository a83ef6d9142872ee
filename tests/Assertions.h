// SPDX-License-Identifier: BSL-1.0
#pragma once
// Catch2's CHECK, CHECK_FALSE, REQUIRE and REQUIRE_FALSE, expanded into less
// code at each assertion. Every test file includes this header instead of
// <catch2/catch.hpp>.
//
// Contract: an assertion passes, fails, counts and reports exactly as
// Catch2's own does (the same AssertionHandler records it, with the same
// macro name, source line, expression text and expansion: "with expansion:
// 3 == 4"; REQUIRE ends the test case, CHECK goes on). One thing differs: an
// exception thrown while the expression is evaluated leaves the assertion
// unrecorded and propagates; Catch2 then fails the test case with "unexpected
// exception", where its own macros would have recorded a failed assertion
// (and, for CHECK, gone on). A passing test is a passing test with either.
//
// How: Catch2's own expansion puts an AssertionHandler object, a try/catch
// and the destruction of a polymorphic expression object at every
// assertion. Here the expression is decomposed into a trivially
// destructible value and handed to one out-of-line function per
// operand-type pair, which builds Catch2's own objects and records the
// result (CONTRIBUTING.md says what that saves).
//
// The other assertion macros (CHECK_THROWS_AS, CHECK_THAT, CHECK_NOTHROW...)
// are Catch2's.

#include <catch2/catch.hpp>

// As catch.hpp is: the comparisons below are written as the test wrote them,
// and warn (sign comparison, for one) no more than Catch2's own do.
#pragma GCC system_header

namespace coexec::test::assertion {

template <typename L, typename R>
struct Binary {
  bool result;
  L lhs;
  char const* op;
  R rhs;

  // As Catch2's BinaryExpr: `a == b == c` does not compile.
  template <typename T>
  void operator==(T const&) const = delete;
  template <typename T>
  void operator!=(T const&) const = delete;
  template <typename T>
  void operator<(T const&) const = delete;
  template <typename T>
  void operator>(T const&) const = delete;
  template <typename T>
  void operator<=(T const&) const = delete;
  template <typename T>
  void operator>=(T const&) const = delete;
  template <typename T>
  void operator&&(T const&) const = delete;
  template <typename T>
  void operator||(T const&) const = delete;
};

// The left operand, as Catch2's ExprLhs: each comparison evaluates as it does.
template <typename L>
struct Lhs {
  L lhs;

  template <typename R>
  Binary<L, R const&> operator==(R const& rhs) const {
    return {Catch::compareEqual(lhs, rhs), lhs, "==", rhs};
  }
  Binary<L, bool> operator==(bool rhs) const { return {lhs == rhs, lhs, "==", rhs}; }
  template <typename R>
  Binary<L, R const&> operator!=(R const& rhs) const {
    return {Catch::compareNotEqual(lhs, rhs), lhs, "!=", rhs};
  }
  Binary<L, bool> operator!=(bool rhs) const { return {lhs != rhs, lhs, "!=", rhs}; }
  template <typename R>
  Binary<L, R const&> operator<(R const& rhs) const {
    return {static_cast<bool>(lhs < rhs), lhs, "<", rhs};
  }
  template <typename R>
  Binary<L, R const&> operator>(R const& rhs) const {
    return {static_cast<bool>(lhs > rhs), lhs, ">", rhs};
  }
  template <typename R>
  Binary<L, R const&> operator<=(R const& rhs) const {
    return {static_cast<bool>(lhs <= rhs), lhs, "<=", rhs};
  }
  template <typename R>
  Binary<L, R const&> operator>=(R const& rhs) const {
    return {static_cast<bool>(lhs >= rhs), lhs, ">=", rhs};
  }
  template <typename R>
  Binary<L, R const&> operator|(R const& rhs) const {
    return {static_cast<bool>(lhs | rhs), lhs, "|", rhs};
  }
  template <typename R>
  Binary<L, R const&> operator&(R const& rhs) const {
    return {static_cast<bool>(lhs & rhs), lhs, "&", rhs};
  }
  template <typename R>
  Binary<L, R const&> operator^(R const& rhs) const {
    return {static_cast<bool>(lhs ^ rhs), lhs, "^", rhs};
  }
  // As Catch2: `a && b` and `a || b` must be parenthesized.
  template <typename R>
  void operator&&(R const&) const = delete;
  template <typename R>
  void operator||(R const&) const = delete;
};

struct Decomposer {
  template <typename T>
  Lhs<T const&> operator<=(T const& lhs) const {
    return {lhs};
  }
  Lhs<bool> operator<=(bool lhs) const { return {lhs}; }
};

/// Where an assertion is and what it says: the arguments of Catch2's
/// AssertionHandler.
struct Site {
  char const* macroName;
  char const* file;
  std::size_t line;
  char const* expression;
  Catch::ResultDisposition::Flags disposition;
};

template <typename Expression>
void record(Site const& site, Expression const& expression) {
  Catch::AssertionHandler handler(Catch::StringRef(site.macroName), Catch::SourceLineInfo(site.file, site.line),
                                  Catch::StringRef(site.expression), site.disposition);
  handler.handleExpr(expression);
  handler.complete();
}

/// Records `expression` as Catch2 records a decomposed comparison; throws
/// (Catch2's TestFailureException) where a failed REQUIRE must end the test.
template <typename L, typename R>
[[gnu::noinline]] void settle(Binary<L, R> const& expression, Site const& site) {
  record(site,
         Catch::BinaryExpr<L, R>(expression.result, expression.lhs, Catch::StringRef(expression.op), expression.rhs));
}

/// Records a single value (`CHECK(x)`) as Catch2 does.
template <typename L>
[[gnu::noinline]] void settle(Lhs<L> const& expression, Site const& site) {
  record(site, Catch::UnaryExpr<L>(expression.lhs));
}

}  // namespace coexec::test::assertion

#define COEXEC_TEST_ASSERT(macroName, disposition, ...)                                                               \
  do {                                                                                                                \
    static constexpr ::coexec::test::assertion::Site coexecAssertionSite{macroName, __FILE__, __LINE__, #__VA_ARGS__, \
                                                                         disposition};                                \
    CATCH_INTERNAL_START_WARNINGS_SUPPRESSION                                                                         \
    CATCH_INTERNAL_SUPPRESS_PARENTHESES_WARNINGS                                                                      \
    ::coexec::test::assertion::settle(::coexec::test::assertion::Decomposer() <= __VA_ARGS__, coexecAssertionSite);   \
    CATCH_INTERNAL_STOP_WARNINGS_SUPPRESSION                                                                          \
  } while (false)

// The dispositions as constants (Catch2's operator| on them is not constexpr).
#define COEXEC_TEST_DISPOSITION(flags) static_cast<::Catch::ResultDisposition::Flags>(flags)
#define COEXEC_TEST_NEGATED(flag) \
  COEXEC_TEST_DISPOSITION(static_cast<int>(flag) | static_cast<int>(::Catch::ResultDisposition::FalseTest))

#undef CHECK
#undef CHECK_FALSE
#undef REQUIRE
#undef REQUIRE_FALSE
#define CHECK(...) COEXEC_TEST_ASSERT("CHECK", ::Catch::ResultDisposition::ContinueOnFailure, __VA_ARGS__)
#define CHECK_FALSE(...) \
  COEXEC_TEST_ASSERT("CHECK_FALSE", COEXEC_TEST_NEGATED(::Catch::ResultDisposition::ContinueOnFailure), __VA_ARGS__)
#define REQUIRE(...) COEXEC_TEST_ASSERT("REQUIRE", ::Catch::ResultDisposition::Normal, __VA_ARGS__)
#define REQUIRE_FALSE(...) \
  COEXEC_TEST_ASSERT("REQUIRE_FALSE", COEXEC_TEST_NEGATED(::Catch::ResultDisposition::Normal), __VA_ARGS__)
