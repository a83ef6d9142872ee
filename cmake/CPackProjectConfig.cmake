# Read by cpack once per generator (CPACK_PROJECT_CONFIG_FILE, set in
# cmake/Packaging.cmake). For the source package (the one run with
# CPACK_INSTALLED_DIRECTORIES set), it puts the files git tracks in the source
# tree, as they are in the working tree, into a staging folder and packages
# that folder instead: the tarball holds the tracked files and nothing else.
# Without git or outside a checkout the source tree is packaged as it is,
# less CPACK_SOURCE_IGNORE_FILES (build/, VCS folders).

if(NOT CPACK_INSTALLED_DIRECTORIES)
  return()
endif()
list(GET CPACK_INSTALLED_DIRECTORIES 0 _coexec_source)
find_program(_coexec_git git)
if(NOT _coexec_git)
  return()
endif()
# One name a line, unquoted (core.quotePath=off): a name git would still
# quote (a newline, a double quote or a backslash in it) stops the packaging.
execute_process(COMMAND "${_coexec_git}" -c core.quotePath=off -C "${_coexec_source}" ls-files
  RESULT_VARIABLE _coexec_rc OUTPUT_VARIABLE _coexec_files ERROR_QUIET)
if(NOT _coexec_rc EQUAL 0 OR _coexec_files STREQUAL "")
  return()
endif()
if(_coexec_files MATCHES "(^|\n)\"" OR _coexec_files MATCHES ";")
  message(FATAL_ERROR "coexec: a tracked file's name has a character the source package cannot take (\", \\, newline or ;)")
endif()
string(REPLACE "\n" ";" _coexec_files "${_coexec_files}")

if(CPACK_PACKAGE_DIRECTORY)
  set(_coexec_stage "${CPACK_PACKAGE_DIRECTORY}/_CPack_Packages/tracked-sources")
else()
  set(_coexec_stage "${CMAKE_CURRENT_BINARY_DIR}/_CPack_Packages/tracked-sources")
endif()
file(REMOVE_RECURSE "${_coexec_stage}")
foreach(_coexec_file IN LISTS _coexec_files)
  # A tracked file deleted in the working tree is not packaged.
  if(_coexec_file STREQUAL "" OR NOT EXISTS "${_coexec_source}/${_coexec_file}")
    continue()
  endif()
  get_filename_component(_coexec_dir "${_coexec_stage}/${_coexec_file}" DIRECTORY)
  file(COPY "${_coexec_source}/${_coexec_file}" DESTINATION "${_coexec_dir}")  # keeps the mode
endforeach()
set(CPACK_INSTALLED_DIRECTORIES "${_coexec_stage};/")
# The staging folder lies below the build folder: only the VCS patterns apply.
set(CPACK_IGNORE_FILES "/\\.git/")
