# SPDX-License-Identifier: BSL-1.0
# Checks that the README's examples list (its "## Examples" section, up to
# the next "## " heading) names every example: each examples/*.cpp file and
# each directory under examples/, as the text examples/<name> (a link to it).
# Run by the test docs.readmeListsEveryExample.
# Inputs: README (the file), EXAMPLES_DIR (the examples directory).
get_filename_component(EXAMPLES_DIR "${EXAMPLES_DIR}" ABSOLUTE)
file(READ "${README}" readme)
string(FIND "${readme}" "\n## Examples\n" begin)
if(begin EQUAL -1)
  message(FATAL_ERROR "${README} has no \"## Examples\" section")
endif()
math(EXPR begin "${begin} + 1")
string(SUBSTRING "${readme}" ${begin} -1 section)
# The section ends where the next level-2 heading starts.
string(SUBSTRING "${section}" 1 -1 rest)
string(FIND "${rest}" "\n## " end)
if(NOT end EQUAL -1)
  math(EXPR end "${end} + 1")
  string(SUBSTRING "${section}" 0 ${end} section)
endif()

file(GLOB sources RELATIVE "${EXAMPLES_DIR}" "${EXAMPLES_DIR}/*.cpp")
file(GLOB entries RELATIVE "${EXAMPLES_DIR}" LIST_DIRECTORIES true "${EXAMPLES_DIR}/*")
set(examples ${sources})
foreach(entry IN LISTS entries)
  if(IS_DIRECTORY "${EXAMPLES_DIR}/${entry}")
    list(APPEND examples "${entry}")
  endif()
endforeach()
list(SORT examples)
if(NOT examples)
  message(FATAL_ERROR "no example found in ${EXAMPLES_DIR}")
endif()

set(missing "")
foreach(example IN LISTS examples)
  string(REPLACE "." "\\." pattern "${example}")
  # examples/<name>, not a longer name that starts with it.
  if(NOT section MATCHES "examples/${pattern}([^A-Za-z0-9_.]|$)")
    string(APPEND missing "\n  examples/${example}")
  endif()
endforeach()
if(NOT missing STREQUAL "")
  message(FATAL_ERROR "the README's examples list (\"## Examples\") does not name:${missing}\n"
    "Add a line for each: - [examples/<name>](examples/<name>): what it shows.")
endif()
list(LENGTH examples count)
message(STATUS "the README's examples list names all ${count} examples")
