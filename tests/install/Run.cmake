# SPDX-License-Identifier: BSL-1.0
# run(COMMAND...): runs a command and stops the script with its output if it
# fails; its standard output is left in `last_output`.
# run_program(PROGRAM PATTERN WHAT): runs PROGRAM as run() does, then stops
# the script unless its output matches the regular expression PATTERN,
# naming the program as WHAT.
# Shared by the install and subproject checks.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

function(run_program program pattern what)
  run("${program}")
  if(NOT last_output MATCHES "${pattern}")
    message(FATAL_ERROR "${what} did not print what it should (`${pattern}`):\n${last_output}")
  endif()
  set(last_output "${last_output}" PARENT_SCOPE)
endfunction()
