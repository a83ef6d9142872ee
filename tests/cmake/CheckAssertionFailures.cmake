# SPDX-License-Identifier: BSL-1.0
# Runs the test cases of tests/AssertionsTest.cpp that fail on purpose
# ([.assertion-failures]) and checks what Catch2 reported for each: the
# assertion as written, its expansion, that a failed CHECK goes on and a
# failed REQUIRE ends its case, that an exception from an expression fails
# its case, and the totals.
# Inputs: EXE (the test executable that holds AssertionsTest.cpp)

execute_process(COMMAND "${EXE}" "[.assertion-failures]" --use-colour no
  OUTPUT_VARIABLE output ERROR_VARIABLE errors RESULT_VARIABLE status)
set(output "${output}${errors}")
if(status EQUAL 0)
  message(FATAL_ERROR "the failing assertions passed (exit status 0):\n${output}")
endif()

set(expected
  # CHECK: reported, expanded, and the case went on.
  "  CHECK( three == 4 )\nwith expansion:\n  3 == 4\n"
  "  CHECK_FALSE( three == 3 )\nwith expansion:\n  !(3 == 3)\n"
  "  CHECK( empty )\nwith expansion:\n  {?}\n"
  "after the failed CHECKs"
  # REQUIRE and REQUIRE_FALSE: reported, expanded.
  "  REQUIRE( name == \"abd\" )\nwith expansion:\n  \"abc\" == \"abd\"\n"
  "  REQUIRE_FALSE( yes )\nwith expansion:\n  !true\n"
  # The exception: the case failed with its message.
  "due to unexpected exception with message:\n  thrown while evaluating\n"
  # 4 cases failed; 1 assertion passed (CHECK(three == 3)) and 6 failed: the
  # 5 assertions above and, as Catch2 counts it, the exception.
  "test cases: 4 | 4 failed\nassertions: 7 | 1 passed | 6 failed\n")
foreach(text IN LISTS expected)
  string(FIND "${output}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "Catch2's report lacks\n${text}\nin:\n${output}")
  endif()
endforeach()
foreach(text IN ITEMS "not reached after REQUIRE" "not reached after REQUIRE_FALSE" "not reached after the exception")
  string(FIND "${output}" "${text}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "a case went on past its failure (\"${text}\"):\n${output}")
  endif()
endforeach()
message(STATUS "the failing assertions were reported as expected")
