# SPDX-License-Identifier: BSL-1.0
cmake_minimum_required(VERSION 3.25)

# Checks that every source file under include/, src/, tests/, examples/ and
# bench/ of SOURCE_DIR names its license in its first line (its second after a
# `#!` line): `// SPDX-License-Identifier: BSL-1.0` in C++ and Java files
# (.h .hpp .cpp .ipp .java, and .h.in and the like), `# SPDX-License-Identifier:
# BSL-1.0` in CMake, shell and Python files (CMakeLists.txt .cmake .sh .py,
# and their .in templates). Data files (fuzz corpora, dictionaries,
# suppression lists, JSON) are not sources and are not checked. Fails naming
# every file that lacks the line. Run by the test license.everySourceHasSpdxLine.
# Inputs: SOURCE_DIR

set(folders include src tests examples bench)
set(slash_extensions h hpp cpp ipp java)
set(hash_extensions cmake sh py)

set(checked 0)
set(missing "")
foreach(folder IN LISTS folders)
  file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/${folder}/*")
  list(SORT files)
  foreach(file IN LISTS files)
    get_filename_component(name "${file}" NAME)
    # A template (.in) is checked as the file it becomes.
    string(REGEX REPLACE "\\.in$" "" target "${name}")
    set(style "")
    if(target STREQUAL "CMakeLists.txt")
      set(style "#")
    elseif(target MATCHES "\\.([A-Za-z0-9]+)$")
      set(extension "${CMAKE_MATCH_1}")
      if(extension IN_LIST slash_extensions)
        set(style "//")
      elseif(extension IN_LIST hash_extensions)
        set(style "#")
      endif()
    endif()
    if(style STREQUAL "")
      continue()
    endif()
    math(EXPR checked "${checked} + 1")
    file(STRINGS "${SOURCE_DIR}/${file}" head LIMIT_COUNT 2)
    list(LENGTH head count)
    set(first "")
    set(second "")
    if(count GREATER 0)
      list(GET head 0 first)
    endif()
    if(count GREATER 1)
      list(GET head 1 second)
    endif()
    set(expected "${style} SPDX-License-Identifier: BSL-1.0")
    if(first STREQUAL expected OR (first MATCHES "^#!" AND second STREQUAL expected))
      continue()
    endif()
    string(APPEND missing "\n  ${file}")
  endforeach()
endforeach()

if(checked EQUAL 0)
  message(FATAL_ERROR "no source file found under ${SOURCE_DIR}/{include,src,tests,examples,bench}")
endif()
if(NOT missing STREQUAL "")
  message(FATAL_ERROR "these files do not start with their license line (`// SPDX-License-Identifier: BSL-1.0` "
    "in C++ and Java, `# SPDX-License-Identifier: BSL-1.0` in CMake, shell and Python; after the `#!` line if "
    "there is one):${missing}")
endif()
message(STATUS "all ${checked} source files under include, src, tests, examples and bench name their license")
