# SPDX-License-Identifier: BSL-1.0
# Included by tests/CMakeLists.txt (its scope: CMAKE_CURRENT_SOURCE_DIR is tests/).

# The packaging checks below build coexec again (installed, and twice as a
# subproject) with this build's flags. They check CMake's packaging, which
# the sanitizers do not see, and under ASan/UBSan they took 187 s of CPU of
# the asan test run: the dev build runs them, the sanitizer builds do not, and
# the clang preset turns them off (the subproject check alone took 96 s of the
# dev test run). COEXEC_TEST_PACKAGING=ON forces them.
option(COEXEC_TEST_PACKAGING "Run the install and subproject checks" ${_plain})
if(COEXEC_TEST_PACKAGING)
  # The installed package must be usable: install into a temporary prefix and
  # build a consumer against it with find_package(coexec).
  add_test(NAME install.consumerBuildsAgainstInstalledPackage
    COMMAND ${CMAKE_COMMAND}
      -DBUILD_DIR=${PROJECT_BINARY_DIR}
      -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
      -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/install-check
      -DCXX=${CMAKE_CXX_COMPILER}
      -DGENERATOR=${CMAKE_GENERATOR}
      "-DCXX_FLAGS=${CMAKE_CXX_FLAGS}"
      "-DLINKER_FLAGS=${CMAKE_EXE_LINKER_FLAGS}"
      -P ${CMAKE_CURRENT_SOURCE_DIR}/install/CheckInstall.cmake)
  set_tests_properties(install.consumerBuildsAgainstInstalledPackage PROPERTIES TIMEOUT 300 LABELS install COST 500)
  # What `make package` makes (cmake/Packaging.cmake), from this build: the
  # .deb, extracted with `dpkg -x` into a scratch root and consumed there
  # through find_package and pkg-config, and the source tarball. Where CPack
  # is set up (coexec at the top level) and dpkg is there (Debian).
  find_program(COEXEC_DPKG dpkg)
  mark_as_advanced(COEXEC_DPKG)
  if(COEXEC_TOP_LEVEL AND COEXEC_DPKG)
    add_test(NAME install.debianPackageBuildsAndIsConsumed
      COMMAND ${CMAKE_COMMAND}
        -DBUILD_DIR=${PROJECT_BINARY_DIR}
        -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
        -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/package-check
        -DCPACK=${CMAKE_CPACK_COMMAND}
        -DCXX=${CMAKE_CXX_COMPILER}
        -DGENERATOR=${CMAKE_GENERATOR}
        "-DCXX_FLAGS=${CMAKE_CXX_FLAGS}"
        "-DLINKER_FLAGS=${CMAKE_EXE_LINKER_FLAGS}"
        -P ${CMAKE_CURRENT_SOURCE_DIR}/install/CheckPackage.cmake)
    set_tests_properties(install.debianPackageBuildsAndIsConsumed PROPERTIES TIMEOUT 300 LABELS install COST 500)
  else()
    message(STATUS "coexec: no dpkg (or not the top-level project): no install.debianPackageBuildsAndIsConsumed")
  endif()
endif()

if(COEXEC_TEST_PACKAGING)
  # The source tree must be usable as a subproject: FetchContent (SOURCE_DIR,
  # no download) and add_subdirectory, each building and running hello.cpp.
  add_test(NAME install.consumerBuildsCoexecAsSubproject
    COMMAND ${CMAKE_COMMAND}
      -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
      -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/subproject-check
      -DCXX=${CMAKE_CXX_COMPILER}
      -DGENERATOR=${CMAKE_GENERATOR}
      "-DCXX_FLAGS=${CMAKE_CXX_FLAGS}"
      "-DLINKER_FLAGS=${CMAKE_EXE_LINKER_FLAGS}"
      -P ${CMAKE_CURRENT_SOURCE_DIR}/install/CheckSubproject.cmake)
  set_tests_properties(install.consumerBuildsCoexecAsSubproject PROPERTIES TIMEOUT 600 LABELS install COST 500)
endif()
