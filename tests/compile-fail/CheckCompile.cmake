# SPDX-License-Identifier: BSL-1.0
cmake_minimum_required(VERSION 3.25)

# Builds TARGET (an EXCLUDE_FROM_ALL object library of one source) in
# BUILD_DIR and checks the outcome.
#   EXPECT=FAIL: the build fails; every line of SOURCE marked `expect-error`
#     is reported ("<file>:<line>:" in the compiler's output), the output
#     holds the message SOURCE states on its `expect-message:` line once per
#     marked line, and there are exactly that many errors.
#   EXPECT=PASS: the build succeeds.
# Inputs: BUILD_DIR TARGET SOURCE EXPECT

execute_process(COMMAND ${CMAKE_COMMAND} --build "${BUILD_DIR}" --target "${TARGET}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(log "${out}${err}")

if(EXPECT STREQUAL "PASS")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${TARGET} was expected to compile, but did not:\n${log}")
  endif()
  message(STATUS "${TARGET} compiles, as expected on this compiler")
  return()
endif()

if(rc EQUAL 0)
  message(FATAL_ERROR "${TARGET} was expected to fail to compile, but it compiled:\n${log}")
endif()

file(READ "${SOURCE}" text)
if(NOT text MATCHES "expect-message: ([^\n]*)")
  message(FATAL_ERROR "${SOURCE} has no `expect-message:` line")
endif()
set(MESSAGE "${CMAKE_MATCH_1}")
# One list element per line (semicolons hidden so they do not split lines).
string(REPLACE ";" "<semicolon>" text "${text}")
string(REPLACE "\n" ";" lines "${text}")
get_filename_component(name "${SOURCE}" NAME)
set(lineNumber 0)
set(expected 0)
foreach(line IN LISTS lines)
  math(EXPR lineNumber "${lineNumber} + 1")
  if(line MATCHES "// expect-error$")
    math(EXPR expected "${expected} + 1")
    string(FIND "${log}" "${name}:${lineNumber}:" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "no diagnostic at ${name}:${lineNumber}, which must be refused:\n${log}")
    endif()
  endif()
endforeach()
if(expected EQUAL 0)
  message(FATAL_ERROR "${SOURCE} marks no line `// expect-error`")
endif()

# Count the occurrences of MESSAGE and of "error:" in the output.
string(REPLACE "${MESSAGE}" "\n<<coexec-expected-message>>\n" marked "${log}")
string(REGEX MATCHALL "<<coexec-expected-message>>" messages "${marked}")
list(LENGTH messages messageCount)
string(REGEX MATCHALL "error:" errors "${log}")
list(LENGTH errors errorCount)
# (Ninja's own "FAILED:" and "build stopped" lines carry no "error:".)
if(NOT messageCount EQUAL expected)
  message(FATAL_ERROR "expected the message \"${MESSAGE}\" ${expected} times, found it ${messageCount} times:\n${log}")
endif()
if(NOT errorCount EQUAL expected)
  message(FATAL_ERROR "expected exactly ${expected} errors (one per refused line), found ${errorCount}:\n${log}")
endif()
message(STATUS "${TARGET} is refused with the expected message at each of the ${expected} marked lines")
