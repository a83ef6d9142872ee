# SPDX-License-Identifier: BSL-1.0
# scripts/check-layers.py can fail: on a small tree written here it must exit
# 1 and name each kind of problem (a file in no layer, an upward include, a
# listed include that is gone, an include cycle), and on the same tree with
# those fixed it must pass.
# Inputs: PYTHON SCRIPT WORK_DIR

file(REMOVE_RECURSE "${WORK_DIR}")
set(rules_head "# Fixture\n\n## Layers\n\n| # | layer | files |\n|---|---|---|\n| 1 | low | `include/coexec/Low.h` `src/low/` |\n| 2 | high | `include/coexec/High.h` `include/coexec/Other.h` |\n\n")
file(WRITE "${WORK_DIR}/include/coexec/Low.h" "#pragma once\n#include \"coexec/High.h\"\n")
file(WRITE "${WORK_DIR}/include/coexec/High.h" "#pragma once\n#include \"coexec/Other.h\"\n")
file(WRITE "${WORK_DIR}/include/coexec/Other.h" "#pragma once\n#include \"coexec/High.h\"\n")
file(WRITE "${WORK_DIR}/include/coexec/Stray.h" "#pragma once\n")
file(WRITE "${WORK_DIR}/src/low/Low.cpp" "#include \"coexec/Low.h\"\n")
file(WRITE "${WORK_DIR}/docs/architecture.md"
  "${rules_head}## Upward includes still to remove\n\n- `src/low/Low.cpp` -> `include/coexec/High.h`\n\n"
  "## Include cycles still to remove\n\n")

execute_process(COMMAND "${PYTHON}" "${SCRIPT}" "${WORK_DIR}"
  RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT result EQUAL 1)
  message(FATAL_ERROR "check-layers.py exited ${result} on a tree with problems, not 1:\n${output}")
endif()
foreach(expected IN ITEMS
    "include/coexec/Stray.h: in no layer"
    "include/coexec/Low.h (low) includes include/coexec/High.h, of a layer above it (high)"
    "src/low/Low.cpp -> include/coexec/High.h is listed as an upward include still to remove, but is not one"
    "an include cycle: include/coexec/High.h include/coexec/Other.h")
  string(FIND "${output}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check-layers.py did not report \"${expected}\":\n${output}")
  endif()
endforeach()

# The same tree, each problem either fixed or listed: it passes.
file(REMOVE "${WORK_DIR}/include/coexec/Stray.h")
file(WRITE "${WORK_DIR}/docs/architecture.md"
  "${rules_head}## Upward includes still to remove\n\n- `include/coexec/Low.h` -> `include/coexec/High.h`\n\n"
  "## Include cycles still to remove\n\n- `include/coexec/High.h` `include/coexec/Other.h`\n")
execute_process(COMMAND "${PYTHON}" "${SCRIPT}" "${WORK_DIR}"
  RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "check-layers.py exited ${result} on a tree whose problems are all listed:\n${output}")
endif()
message(STATUS "${output}")
