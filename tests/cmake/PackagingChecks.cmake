# SPDX-License-Identifier: BSL-1.0
# Included by tests/CMakeLists.txt (its scope: CMAKE_CURRENT_SOURCE_DIR is tests/).

# The packaging checks below build coexec again (installed, and twice as a
# subproject) with this build's flags. They check CMake's packaging, which
# the sanitizers do not see, and under ASan/UBSan they took 187 s of CPU of
# the asan test run: the dev build runs them, the sanitizer builds do not, and
# the clang preset turns them off (the subproject check alone took 96 s of the
# dev test run). COEXEC_TEST_PACKAGING=ON forces them.
option(COEXEC_TEST_PACKAGING "Run the install and subproject checks" ${_plain})

# coexec_packaging_check(NAME SCRIPT WORK TIMEOUT [-DVAR=VALUE...]): the CTest
# test install.NAME runs tests/install/SCRIPT with this build's compiler,
# generator and flags, the source and build trees, a scratch folder WORK
# under this build's tests/, and the definitions given after TIMEOUT.
function(coexec_packaging_check name script work timeout)
  add_test(NAME install.${name}
    COMMAND ${CMAKE_COMMAND}
      -DBUILD_DIR=${PROJECT_BINARY_DIR}
      -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
      -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/${work}
      ${ARGN}
      -DCXX=${CMAKE_CXX_COMPILER}
      -DGENERATOR=${CMAKE_GENERATOR}
      "-DCXX_FLAGS=${CMAKE_CXX_FLAGS}"
      "-DLINKER_FLAGS=${CMAKE_EXE_LINKER_FLAGS}"
      -P ${CMAKE_CURRENT_SOURCE_DIR}/install/${script})
  set_tests_properties(install.${name} PROPERTIES TIMEOUT ${timeout} LABELS install COST 500)
endfunction()

if(COEXEC_TEST_PACKAGING)
  # The installed package must be usable: install into a temporary prefix and
  # build a consumer against it with find_package(coexec).
  coexec_packaging_check(consumerBuildsAgainstInstalledPackage CheckInstall.cmake install-check 300)
  # What `make package` makes (cmake/Packaging.cmake), from this build: the
  # .deb, extracted with `dpkg -x` into a scratch root and consumed there
  # through find_package and pkg-config, and the source tarball. Where CPack
  # is set up (coexec at the top level) and dpkg is there (Debian).
  find_program(COEXEC_DPKG dpkg)
  mark_as_advanced(COEXEC_DPKG)
  if(COEXEC_TOP_LEVEL AND COEXEC_DPKG)
    coexec_packaging_check(debianPackageBuildsAndIsConsumed CheckPackage.cmake package-check 300
      -DCPACK=${CMAKE_CPACK_COMMAND})
  else()
    message(STATUS "coexec: no dpkg (or not the top-level project): no install.debianPackageBuildsAndIsConsumed")
  endif()
  # The source tree must be usable as a subproject: FetchContent (SOURCE_DIR,
  # no download) and add_subdirectory, each building and running hello.cpp.
  coexec_packaging_check(consumerBuildsCoexecAsSubproject CheckSubproject.cmake subproject-check 600)
endif()
