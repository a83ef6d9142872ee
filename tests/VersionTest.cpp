// SPDX-License-Identifier: BSL-1.0
#include "coexec/Version.h"

// coexec/Version.h: the macros and coexec::version() say one version, and
// COEXEC_VERSION orders as the versions do. That it is the version the
// project declares is checked against an installed package
// (install.consumerBuildsAgainstInstalledPackage).

#include <string>
#include <string_view>

#include "Assertions.h"

TEST_CASE("version() is the three version macros joined by dots", "[version]") {
  const std::string expected = std::to_string(COEXEC_VERSION_MAJOR) + "." + std::to_string(COEXEC_VERSION_MINOR) +
                               "." + std::to_string(COEXEC_VERSION_PATCH);
  CHECK(coexec::version() == expected);
}

TEST_CASE("COEXEC_VERSION is major * 10000 + minor * 100 + patch", "[version]") {
  STATIC_REQUIRE(COEXEC_VERSION == COEXEC_VERSION_MAJOR * 10000 + COEXEC_VERSION_MINOR * 100 + COEXEC_VERSION_PATCH);
  STATIC_REQUIRE(COEXEC_VERSION_MINOR >= 0);
  STATIC_REQUIRE(COEXEC_VERSION_MINOR < 100);
  STATIC_REQUIRE(COEXEC_VERSION_PATCH >= 0);
  STATIC_REQUIRE(COEXEC_VERSION_PATCH < 100);
}

TEST_CASE("version() is a constant expression that never throws", "[version]") {
  constexpr std::string_view version = coexec::version();
  STATIC_REQUIRE(noexcept(coexec::version()));
  STATIC_REQUIRE(!version.empty());
}
