# SPDX-License-Identifier: BSL-1.0
# Checks an installed coexec under `prefix` (the install test's temporary
# prefix, or the package test's extracted .deb), building consumers in
# WORK_DIR: a CMake one (find_package(coexec MAJOR.MINOR) -> coexec::coexec,
# after checking that the package refuses the next major and, before 1.0, the
# next and the previous minor version; building consumer/version_consumer.cpp,
# which checks coexec/Version.h against the version the root CMakeLists.txt
# declares, examples/routing.cpp, examples/hello.cpp and, with the installed
# Asio bridge header, examples/asio_bridge.cpp; and, when the package has
# coexec::boost_asio, consumer/boost_asio_consumer.cpp) and pkg-config ones:
# consumer/pkgconfig_consumer.cpp with `pkg-config coexec`, and
# examples/asio_bridge.cpp with `pkg-config coexec-asio`, built with clang
# where there is one (the compiler Asio needs the .pc's definitions for).
# Runs them all. Checks that the license is installed and named in the .pc
# files, that the consumers found this prefix's package (not another one),
# and that coexec.pc finds its prefix from its own location.
# With CONSUMERS set to `minimal` (CheckPackage.cmake, for a tree it has
# compared file by file with an installed one that the install test checks
# with every consumer), it builds and runs only version_consumer.cpp through
# find_package and pkgconfig_consumer.cpp through pkg-config; the checks that
# build nothing (the license, the version requests, the .pc files' flags) run
# in both modes.
# Included by CheckInstall.cmake and CheckPackage.cmake, after Run.cmake.
# Inputs: prefix SOURCE_DIR WORK_DIR CXX GENERATOR CXX_FLAGS LINKER_FLAGS [CONSUMERS]

# The version the project declares: project(coexec VERSION x.y.z ...).
file(READ "${SOURCE_DIR}/CMakeLists.txt" root_lists)
if(NOT root_lists MATCHES "project\\(coexec VERSION ([0-9]+\\.[0-9]+\\.[0-9]+)")
  message(FATAL_ERROR "no project(coexec VERSION x.y.z) in ${SOURCE_DIR}/CMakeLists.txt")
endif()
set(version "${CMAKE_MATCH_1}")
get_filename_component(prefix "${prefix}" REALPATH)

# The license is installed with the package and named in its .pc files.
if(NOT EXISTS "${prefix}/share/doc/coexec/LICENSE_1_0.txt")
  message(FATAL_ERROR "the license was not installed as share/doc/coexec/LICENSE_1_0.txt")
endif()
file(GLOB pc_files "${prefix}/lib*/pkgconfig/*.pc" "${prefix}/lib/*/pkgconfig/*.pc")
if(NOT pc_files)
  message(FATAL_ERROR "no .pc file was installed")
endif()
foreach(pc IN LISTS pc_files)
  file(STRINGS "${pc}" license REGEX "^License: BSL-1\\.0$")
  if(NOT license)
    message(FATAL_ERROR "${pc} has no `License: BSL-1.0` line")
  endif()
endforeach()

if(NOT DEFINED CONSUMERS)
  set(CONSUMERS all)
endif()
if(NOT CONSUMERS MATCHES "^(all|minimal)$")
  message(FATAL_ERROR "CONSUMERS must be all or minimal, not '${CONSUMERS}'")
endif()
# 1. CMake consumer.
set(consumer_sources "")
if(CONSUMERS STREQUAL "all")
  set(consumer_sources "-DEXAMPLE_SOURCE=${SOURCE_DIR}/examples/routing.cpp"
    "-DHELLO_SOURCE=${SOURCE_DIR}/examples/hello.cpp" "-DASIO_SOURCE=${SOURCE_DIR}/examples/asio_bridge.cpp"
    "-DBOOST_ASIO_SOURCE=${SOURCE_DIR}/tests/install/consumer/boost_asio_consumer.cpp")
endif()
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/consumer" -B "${WORK_DIR}/consumer" -G "${GENERATOR}"
    "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
    "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}" ${consumer_sources} "-DEXPECTED_VERSION=${version}")
run(${CMAKE_COMMAND} --build "${WORK_DIR}/consumer")
file(STRINGS "${WORK_DIR}/consumer/CMakeCache.txt" coexec_dir REGEX "^coexec_DIR:")
string(REGEX REPLACE "^coexec_DIR:[A-Z]+=" "" coexec_dir "${coexec_dir}")
get_filename_component(coexec_dir "${coexec_dir}" REALPATH)
string(FIND "${coexec_dir}/" "${prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "the CMake consumer found coexec in ${coexec_dir}, not under ${prefix}")
endif()
run_program("${WORK_DIR}/consumer/version_consumer" "coexec ${version} " "version_consumer built against the installed package")
if(CONSUMERS STREQUAL "all")
  run_program("${WORK_DIR}/consumer/routing" "all four routes behaved" "the consumer built against the installed package")
  run_program("${WORK_DIR}/consumer/hello" "1 \\+ 4 \\+ 9 \\+ 16 = 30" "hello built against the installed package")

  if(NOT EXISTS "${prefix}/include/coexec/asio.h" OR NOT EXISTS "${prefix}/include/coexec/asio/AsyncWait.h")
    message(FATAL_ERROR "the Asio bridge headers (coexec/asio.h, coexec/asio/*.h) were not installed")
  endif()
  run_program("${WORK_DIR}/consumer/asio_bridge" "the spawned Task returned fib" "asio_bridge built against the installed package")

  # The Boost.Asio bridge: installed (its own export set) when the build found
  # Boost, and then the consumer, which finds Boost too, must have the target.
  file(GLOB boost_asio_exports "${prefix}/lib*/cmake/coexec/coexecBoostAsioTargets.cmake"
    "${prefix}/lib/*/cmake/coexec/coexecBoostAsioTargets.cmake")
  if(boost_asio_exports)
    if(NOT EXISTS "${prefix}/include/coexec/boost_asio.h" OR NOT EXISTS "${prefix}/include/coexec/asio/impl/AsyncWait.ipp")
      message(FATAL_ERROR "the Boost.Asio bridge headers (coexec/boost_asio.h, coexec/asio/impl/*.ipp) were not installed")
    endif()
    run_program("${WORK_DIR}/consumer/boost_asio_consumer" "boost_asio consumer: 21 and 42" "boost_asio_consumer built against the installed package")
  endif()
endif()
# 2. pkg-config consumer.
find_program(PKG_CONFIG pkg-config REQUIRED)
file(GLOB pcdir "${prefix}/lib*/pkgconfig" "${prefix}/lib/*/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "${pcdir}")
# coexec.pc is relocatable: its prefix is where it lies, whatever prefix the
# build was configured with.
run(${PKG_CONFIG} --variable=prefix coexec)
string(STRIP "${last_output}" pc_prefix)
get_filename_component(pc_prefix "${pc_prefix}" REALPATH)
if(NOT pc_prefix STREQUAL prefix)
  message(FATAL_ERROR "pkg-config coexec's prefix is ${pc_prefix}, not ${prefix}")
endif()
run(${PKG_CONFIG} --modversion coexec)
string(STRIP "${last_output}" pc_version)
if(NOT pc_version STREQUAL version)
  message(FATAL_ERROR "pkg-config --modversion coexec says '${pc_version}', the project ${version}")
endif()
run(${PKG_CONFIG} --cflags --libs coexec)
string(STRIP "${last_output}" pkgflags)
# The consumer chooses the standard (C++20 or later): the .pc must not.
if(pkgflags MATCHES "-std=")
  message(FATAL_ERROR "pkg-config --cflags coexec forces a language standard: ${pkgflags}")
endif()
separate_arguments(pkgflags UNIX_COMMAND "${pkgflags}")
separate_arguments(extra UNIX_COMMAND "${CXX_FLAGS} ${LINKER_FLAGS}")
file(GLOB libdir LIST_DIRECTORIES true "${prefix}/lib*")
run(${CXX} -std=c++20 ${extra} "${SOURCE_DIR}/tests/install/consumer/pkgconfig_consumer.cpp" ${pkgflags}
    "-Wl,-rpath,${libdir}" -o "${WORK_DIR}/pkgconfig_consumer")
run("${WORK_DIR}/pkgconfig_consumer")
string(STRIP "${last_output}" pkgconfig_result)
if(NOT pkgconfig_result MATCHES "coexec ${version}")
  message(FATAL_ERROR "pkgconfig_consumer did not print coexec ${version}:\n${pkgconfig_result}")
endif()

# The Asio bridge with pkg-config: asio_bridge.cpp (Asio coroutines) needs the
# definitions of coexec-asio.pc on clang. Built with clang++ when this build
# is not clang's already (without this build's flags, which are GCC's, unless
# they instrument the library: then with the build's compiler and flags).
run(${PKG_CONFIG} --cflags --libs coexec-asio)
string(STRIP "${last_output}" asioflags)
if(NOT asioflags MATCHES "-DASIO_HAS_CO_AWAIT=1" OR NOT asioflags MATCHES "-DASIO_HAS_STD_COROUTINE=1")
  message(FATAL_ERROR "pkg-config --cflags coexec-asio lacks Asio's coroutine definitions: ${asioflags}")
endif()
separate_arguments(asioflags UNIX_COMMAND "${asioflags}")
if(NOT CONSUMERS STREQUAL "all")
  message(STATUS "installed package works: ${pkgconfig_result} (version_consumer and pkgconfig_consumer only)")
  return()
endif()
find_program(CLANGXX clang++)
if(CXX MATCHES "clang" OR NOT CLANGXX OR CXX_FLAGS MATCHES "-fsanitize=")
  set(asio_cxx ${CXX} ${extra})
else()
  set(asio_cxx ${CLANGXX})
endif()
run(${asio_cxx} -std=c++20 "${SOURCE_DIR}/examples/asio_bridge.cpp" ${asioflags} "-Wl,-rpath,${libdir}"
    -o "${WORK_DIR}/pkgconfig_asio_bridge")
run_program("${WORK_DIR}/pkgconfig_asio_bridge" "the spawned Task returned fib"
  "asio_bridge built with pkg-config coexec-asio (${asio_cxx})")
message(STATUS "installed package works: ${pkgconfig_result}; asio_bridge with pkg-config coexec-asio (${asio_cxx})")
