// SPDX-License-Identifier: BSL-1.0
// Built against an installed package: the umbrella header brings
// coexec/Version.h, whose macros and coexec::version() must be the project's
// version, EXPECTED_MAJOR.EXPECTED_MINOR.EXPECTED_PATCH (EXPECTED_STRING),
// which the consumer's CMakeLists.txt defines from the caller's reading of
// the root CMakeLists.txt.
#include <coexec/coexec.h>

#include <cstdio>
#include <string_view>

static_assert(COEXEC_VERSION_MAJOR == EXPECTED_MAJOR, "COEXEC_VERSION_MAJOR is not the project's");
static_assert(COEXEC_VERSION_MINOR == EXPECTED_MINOR, "COEXEC_VERSION_MINOR is not the project's");
static_assert(COEXEC_VERSION_PATCH == EXPECTED_PATCH, "COEXEC_VERSION_PATCH is not the project's");
static_assert(COEXEC_VERSION == EXPECTED_MAJOR * 10000 + EXPECTED_MINOR * 100 + EXPECTED_PATCH,
              "COEXEC_VERSION is not major * 10000 + minor * 100 + patch");
static_assert(coexec::version() == std::string_view(EXPECTED_STRING), "coexec::version() is not the project's");

int main() {
  const std::string_view version = coexec::version();
  std::printf("version consumer: coexec %.*s (COEXEC_VERSION %d)\n", static_cast<int>(version.size()),
              version.data(), COEXEC_VERSION);
  return version == EXPECTED_STRING ? 0 : 1;
}
