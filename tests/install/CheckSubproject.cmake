# SPDX-License-Identifier: BSL-1.0
cmake_minimum_required(VERSION 3.25)

# Builds tests/install/subproject twice, consuming coexec from its source tree
# with FetchContent and with add_subdirectory, and runs the hello example it
# builds. Checks that coexec, not being the top-level project there, builds
# neither its tests nor its examples. Both compile the library as unity
# batches (COEXEC_UNITY_BUILD, as a consumer may set it); the clang build of
# `make check` compiles it file by file.
# Inputs: SOURCE_DIR WORK_DIR CXX GENERATOR CXX_FLAGS LINKER_FLAGS

include("${CMAKE_CURRENT_LIST_DIR}/Run.cmake")

file(REMOVE_RECURSE "${WORK_DIR}")
foreach(mode fetchcontent subdirectory)
  set(build "${WORK_DIR}/${mode}")
  run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/subproject" -B "${build}" -G "${GENERATOR}"
      "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}"
      "-DCOEXEC_SOURCE_DIR=${SOURCE_DIR}" "-DCOEXEC_CONSUME=${mode}" "-DCOEXEC_UNITY_BUILD=ON")
  run(${CMAKE_COMMAND} --build "${build}")
  run_program("${build}/hello" "1 \\+ 4 \\+ 9 \\+ 16 = 30" "hello built through ${mode}")
  # coexec's own build tree: FetchContent's default, or add_subdirectory's binary dir.
  if(NOT EXISTS "${build}/_deps/coexec-build" AND NOT EXISTS "${build}/coexec")
    message(FATAL_ERROR "found no build tree of coexec under ${build}")
  endif()
  foreach(coexecBuild "${build}/_deps/coexec-build" "${build}/coexec")
    if(EXISTS "${coexecBuild}/tests" OR EXISTS "${coexecBuild}/examples")
      message(FATAL_ERROR "coexec as a subproject (${mode}) configured its tests or examples in ${coexecBuild}")
    endif()
  endforeach()
  message(STATUS "${mode}: ${last_output}")
endforeach()
