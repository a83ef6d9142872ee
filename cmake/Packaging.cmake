# CPack: `make package` (the Makefile target), or the `package` and
# `package_source` targets of any top-level build tree, make
#  - libcoexec-dev_<version>_<arch>.deb: what `cmake --install` installs (the
#    library, the headers with Export.h and Version.h, the CMake package, the
#    .pc files, the license under share/doc/coexec) below /usr. Depends on
#    libfmt-dev (fmt is a public dependency), recommends libasio-dev (the
#    Asio bridge's headers), suggests libboost1.81-dev when the build has the
#    Boost.Asio bridge; architecture from `dpkg --print-architecture`.
#  - coexec-<version>.tar.gz: the source tree, the files git tracks only (no
#    build/, nothing untracked); where there is no git checkout, the whole
#    tree but build/ and VCS folders (cmake/CPackProjectConfig.cmake).
# Included from the root CMakeLists.txt when coexec is the top-level project.

set(COEXEC_PACKAGE_MAINTAINER "coexec maintainers <maintainers@users.noreply.a-seed-d5a78ff5.example>"
  CACHE STRING "The Maintainer field of the Debian package")

set(CPACK_PACKAGE_NAME coexec)
set(CPACK_PACKAGE_VENDOR "coexec")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "${COEXEC_PACKAGE_MAINTAINER}")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE_1_0.txt")
set(CPACK_RESOURCE_FILE_README "${PROJECT_SOURCE_DIR}/README.md")
set(CPACK_VERBATIM_VARIABLES ON)

# The binary package: a Debian package only, installed below /usr (the
# DEB generator's default prefix).
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_PACKAGE_NAME libcoexec-dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${COEXEC_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libfmt-dev")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libasio-dev")
if(COEXEC_HAS_BOOST_ASIO)
  set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libboost1.81-dev")
endif()
# A static library by default (BUILD_SHARED_LIBS=ON: libcoexec.so, which
# needs nothing beyond what libfmt-dev brings).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
find_program(COEXEC_DPKG dpkg)
mark_as_advanced(COEXEC_DPKG)
if(COEXEC_DPKG)
  execute_process(COMMAND "${COEXEC_DPKG}" --print-architecture
    OUTPUT_VARIABLE CPACK_DEBIAN_PACKAGE_ARCHITECTURE OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
if(BUILD_SHARED_LIBS)
  set(_coexec_library_kind "shared")
else()
  set(_coexec_library_kind "static")
endif()
set(_coexec_pc_names "coexec, coexec-asio")
if(COEXEC_HAS_BOOST_ASIO)
  set(_coexec_pc_names "coexec, coexec-asio, coexec-boost-asio")
endif()
# The extended description, below the summary (CPack puts the summary,
# CPACK_PACKAGE_DESCRIPTION_SUMMARY, first and indents these lines).
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "coexec is a C++20 thread pool with the admission rules of Java's
ThreadPoolExecutor (core and maximum size, bounded queues, rejection
policies), built for coroutines: Task<T>, awaitable Futures, resumeOn,
timers and sleeps, combinators, cancellation that flows to children,
backpressure, lanes, task-locals, latency metrics and bridges to
Asio and Boost.Asio.

This package holds the ${_coexec_library_kind} library, the headers, the CMake package
(find_package(coexec)) and the pkg-config files (${_coexec_pc_names}).
Distributed under the Boost Software License 1.0 (BSL-1.0).")

# The source package: a tarball of the tracked files.
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_PACKAGE_FILE_NAME "coexec-${PROJECT_VERSION}")
string(REGEX REPLACE "([][+.*()^$?|\\\\])" "\\\\\\1" _coexec_source_regex "${PROJECT_SOURCE_DIR}")
set(CPACK_SOURCE_IGNORE_FILES "/\\.git/" "^${_coexec_source_regex}/build/" "/\\.cache/" "\\.swp$")
set(CPACK_PROJECT_CONFIG_FILE "${PROJECT_SOURCE_DIR}/cmake/CPackProjectConfig.cmake")

include(CPack)
