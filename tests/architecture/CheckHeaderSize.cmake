# SPDX-License-Identifier: BSL-1.0
# What including the pool costs (docs/architecture.md, "What including the
# pool costs"): a file that includes only <coexec/ThreadPoolExecutor.h>
# preprocesses to at most LIMIT lines (when LIMIT is set: the figure holds
# for one compiler and standard library), and StandardLibraryUse.cpp
# compiles both with coexec's default includes and with
# COEXEC_FULL_STD_HEADERS.
# Inputs: CXX INCLUDES (separated by |) SOURCE WORK_DIR [LIMIT]

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
string(REPLACE "|" ";" include_dirs "${INCLUDES}")
set(flags -std=c++20)
foreach(dir IN LISTS include_dirs)
  list(APPEND flags "-I${dir}")
endforeach()

if(LIMIT)
  file(WRITE "${WORK_DIR}/OnlyThePool.cpp" "#include <coexec/ThreadPoolExecutor.h>\n")
  execute_process(COMMAND "${CXX}" ${flags} -E "${WORK_DIR}/OnlyThePool.cpp"
    OUTPUT_FILE "${WORK_DIR}/OnlyThePool.ii" RESULT_VARIABLE result ERROR_VARIABLE errors)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "preprocessing <coexec/ThreadPoolExecutor.h> failed:\n${errors}")
  endif()
  execute_process(COMMAND wc -l "${WORK_DIR}/OnlyThePool.ii" OUTPUT_VARIABLE counted RESULT_VARIABLE result)
  string(REGEX MATCH "^ *[0-9]+" lines "${counted}")
  string(STRIP "${lines}" lines)
  if(NOT result EQUAL 0 OR lines STREQUAL "")
    message(FATAL_ERROR "could not count the preprocessed lines: ${counted}")
  endif()
  if(lines GREATER LIMIT)
    message(FATAL_ERROR "<coexec/ThreadPoolExecutor.h> preprocesses to ${lines} lines, more than ${LIMIT}")
  endif()
  message(STATUS "<coexec/ThreadPoolExecutor.h> preprocesses to ${lines} lines (at most ${LIMIT})")
endif()

foreach(mode IN ITEMS "" "-DCOEXEC_FULL_STD_HEADERS")
  execute_process(COMMAND "${CXX}" ${flags} ${mode} -Wall -Wextra -Werror -fsyntax-only "${SOURCE}"
    RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${SOURCE} does not compile (${mode}):\n${output}")
  endif()
endforeach()
