# SPDX-License-Identifier: BSL-1.0
# Test discovery for catch_discover_tests (Catch2 v2's Catch.cmake runs it
# after each build of a test executable, with the variables it passes): each
# Catch2 case becomes one CTest test named after the case, run in the
# executable's folder with the given properties, and its tags become its
# CTest labels: `[executor][stress]` gives LABELS executor;stress, so
# `ctest -L stress` runs the stress tests and `ctest -LE stress` the rest.
# One run of the executable (tests/CatchMain.cpp's --list-names-and-tags)
# gives every name and its tags; it writes the same add_test and
# set_tests_properties lines as Catch2's CatchAddTests.cmake, plus the labels.
# TEST_REPORTER and TEST_OUTPUT_DIR are refused: no test here uses them.
#
# With COEXEC_TEST_PER_FILE set (CatchDiscoverTestsPerFile.cmake, which the
# sanitizer builds use), each source file's cases are instead one CTest test,
# named `file.<File>` after the file (`file.FutureTest`), that runs them in
# one process (`--filenames-as-tags "[#FutureTest]~[.]"`: the file's cases,
# hidden ones excepted, as a per-case run selects them) and carries the
# labels of all of them; its timeout is at least 600 s. Under a sanitizer a process takes
# about 0.1 s to start and to exit, as long as most cases take to run.

cmake_minimum_required(VERSION 3.25)

if(TEST_REPORTER OR TEST_OUTPUT_DIR)
  message(FATAL_ERROR "coexec's test discovery does not take REPORTER or OUTPUT_DIR (${TEST_EXECUTABLE})")
endif()
if(NOT EXISTS "${TEST_EXECUTABLE}")
  message(FATAL_ERROR "Specified test executable '${TEST_EXECUTABLE}' does not exist")
endif()
execute_process(
  COMMAND ${TEST_EXECUTOR} "${TEST_EXECUTABLE}" ${TEST_SPEC} --list-names-and-tags
  OUTPUT_VARIABLE listing
  ERROR_VARIABLE listing_errors
  RESULT_VARIABLE listing_result
  WORKING_DIRECTORY "${TEST_WORKING_DIR}")
if(NOT listing_result EQUAL 0)
  message(FATAL_ERROR "Listing the tests of '${TEST_EXECUTABLE}' failed (${listing_result}):\n"
                      "${listing}${listing_errors}")
endif()
if(listing STREQUAL "")
  message(FATAL_ERROR "'${TEST_EXECUTABLE}' has no test")
endif()

# A ';' in a test's name would split it into two CTest arguments: the test
# would select nothing and pass having run nothing. Refuse such names.
string(REGEX MATCH "[^\n]*;[^\n]*" bad_name "${listing}")
if(bad_name)
  message(FATAL_ERROR "'${TEST_EXECUTABLE}' has a test whose name contains ';', which CTest cannot run "
                      "(it would pass having run nothing): \"${bad_name}\". Use ',' instead.")
endif()

# One argument of a generated command: bare when it is plain, else a bracket
# argument (CatchAddTests.cmake's add_command).
function(coexec_quote out value)
  if(value MATCHES "[^-./:a-zA-Z0-9_]")
    set(${out} "[==[${value}]==]" PARENT_SCOPE)
  else()
    set(${out} "${value}" PARENT_SCOPE)
  endif()
endfunction()

set(extra_args "")
foreach(arg IN LISTS TEST_EXTRA_ARGS)
  coexec_quote(quoted "${arg}")
  string(APPEND extra_args " ${quoted}")
endforeach()
set(properties "")
foreach(property IN LISTS TEST_PROPERTIES)
  coexec_quote(quoted "${property}")
  string(APPEND properties " ${quoted}")
endforeach()
coexec_quote(executable "${TEST_EXECUTABLE}")
coexec_quote(working_dir "${TEST_WORKING_DIR}")

set(script "")
set(tests "")
set(files "")
string(REPLACE "\n" ";" lines "${listing}")
foreach(line IN LISTS lines)
  if(line STREQUAL "")
    continue()
  endif()
  if(NOT line MATCHES "^([^\t]+)\t([^\t]*)\t([^\t]+)$")
    message(FATAL_ERROR "'${TEST_EXECUTABLE}' listed a line that is not 'name<TAB>tags<TAB>file': '${line}'")
  endif()
  set(name "${CMAKE_MATCH_1}")
  set(tags "${CMAKE_MATCH_2}")
  set(file "${CMAKE_MATCH_3}")
  # "[a][b]" -> LABELS "a;b": two labels
  string(REGEX MATCHALL "\\[[^]]+\\]" tag_list "${tags}")
  list(TRANSFORM tag_list REPLACE "^\\[(.*)\\]$" "\\1")
  if(COEXEC_TEST_PER_FILE)
    if(NOT file MATCHES "^[A-Za-z0-9_]+$")
      message(FATAL_ERROR "'${TEST_EXECUTABLE}' has a test in a file whose name is not a plain word: '${file}'")
    endif()
    if(NOT file IN_LIST files)
      list(APPEND files "${file}")
      set(labels_${file} "")
    endif()
    list(APPEND labels_${file} ${tag_list})
    continue()
  endif()
  # Catch2 reads ',' '[' ']' in a name on its command line as syntax.
  set(spec "${name}")
  foreach(char , [ ])
    string(REPLACE "${char}" "\\${char}" spec "${spec}")
  endforeach()
  coexec_quote(test "${TEST_PREFIX}${name}${TEST_SUFFIX}")
  coexec_quote(spec "${spec}")
  string(APPEND script "add_test(${test} ${TEST_EXECUTOR} ${executable} ${spec}${extra_args})\n")
  string(APPEND script "set_tests_properties(${test} PROPERTIES WORKING_DIRECTORY ${working_dir}${properties})\n")
  if(tag_list)
    string(APPEND script "set_tests_properties(${test} PROPERTIES LABELS [==[${tag_list}]==])\n")
  endif()
  list(APPEND tests "${TEST_PREFIX}${name}${TEST_SUFFIX}")
endforeach()

foreach(file IN LISTS files)
  set(test "${TEST_PREFIX}file.${file}${TEST_SUFFIX}")
  coexec_quote(quoted "${test}")
  string(APPEND script "add_test(${quoted} ${TEST_EXECUTOR} ${executable} --filenames-as-tags [==[[#${file}]~[.]]==]${extra_args})\n")
  string(APPEND script "set_tests_properties(${quoted} PROPERTIES WORKING_DIRECTORY ${working_dir}${properties})\n")
  # The properties' timeout is a case's: a file's cases get at least 600 s.
  set(timeout 600)
  list(FIND TEST_PROPERTIES TIMEOUT at)
  if(at GREATER_EQUAL 0)
    math(EXPR at "${at} + 1")
    list(GET TEST_PROPERTIES ${at} given)
    if(given GREATER timeout)
      set(timeout ${given})
    endif()
  endif()
  string(APPEND script "set_tests_properties(${quoted} PROPERTIES TIMEOUT ${timeout})\n")
  list(REMOVE_DUPLICATES labels_${file})
  if(labels_${file})
    string(APPEND script "set_tests_properties(${quoted} PROPERTIES LABELS [==[${labels_${file}}]==])\n")
  endif()
  list(APPEND tests "${test}")
endforeach()

# The list of the discovered tests, as CatchAddTests.cmake defines it.
set(test_list "")
foreach(test IN LISTS tests)
  coexec_quote(quoted "${test}")
  string(APPEND test_list " ${quoted}")
endforeach()
string(APPEND script "set(${TEST_LIST}${test_list})\n")
file(WRITE "${CTEST_FILE}" "${script}")
