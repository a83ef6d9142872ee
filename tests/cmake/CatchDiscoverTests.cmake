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
string(REPLACE "\n" ";" lines "${listing}")
foreach(line IN LISTS lines)
  if(line STREQUAL "")
    continue()
  endif()
  if(NOT line MATCHES "^([^\t]+)\t(.*)$")
    message(FATAL_ERROR "'${TEST_EXECUTABLE}' listed a line that is not 'name<TAB>tags': '${line}'")
  endif()
  set(name "${CMAKE_MATCH_1}")
  set(tags "${CMAKE_MATCH_2}")
  # Catch2 reads ',' '[' ']' in a name on its command line as syntax.
  set(spec "${name}")
  foreach(char , [ ])
    string(REPLACE "${char}" "\\${char}" spec "${spec}")
  endforeach()
  coexec_quote(test "${TEST_PREFIX}${name}${TEST_SUFFIX}")
  coexec_quote(spec "${spec}")
  string(APPEND script "add_test(${test} ${TEST_EXECUTOR} ${executable} ${spec}${extra_args})\n")
  string(APPEND script "set_tests_properties(${test} PROPERTIES WORKING_DIRECTORY ${working_dir}${properties})\n")
  # "[a][b]" -> LABELS "a;b": two labels
  string(REGEX MATCHALL "\\[[^]]+\\]" tag_list "${tags}")
  if(tag_list)
    list(TRANSFORM tag_list REPLACE "^\\[(.*)\\]$" "\\1")
    string(APPEND script "set_tests_properties(${test} PROPERTIES LABELS [==[${tag_list}]==])\n")
  endif()
  list(APPEND tests "${TEST_PREFIX}${name}${TEST_SUFFIX}")
endforeach()

# The list of the discovered tests, as CatchAddTests.cmake defines it.
set(test_list "")
foreach(test IN LISTS tests)
  coexec_quote(quoted "${test}")
  string(APPEND test_list " ${quoted}")
endforeach()
string(APPEND script "set(${TEST_LIST}${test_list})\n")
file(WRITE "${CTEST_FILE}" "${script}")
