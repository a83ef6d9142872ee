# SPDX-License-Identifier: BSL-1.0
# The packages `make package` makes, from this build tree:
#  - the Debian package: cpack builds libcoexec-dev_<version>_<arch>.deb, its
#    control fields are checked (name, version, architecture from dpkg,
#    section, Depends libfmt-dev, Recommends libasio-dev, a maintainer), it is
#    extracted with `dpkg -x` into a scratch root, compared file by file with
#    this build installed into a scratch prefix (the tree the install test
#    checks with every consumer), and two consumers of CheckConsumers.cmake
#    (CONSUMERS=minimal) are built and run against <root>/usr: find_package
#    with CMAKE_PREFIX_PATH there, pkg-config with PKG_CONFIG_PATH there
#    (through the relocatable coexec.pc).
#  - the source tarball: cpack builds coexec-<version>.tar.gz, which must hold
#    exactly the files git tracks (where git and a checkout are there), and
#    at least CMakeLists.txt and the license, and nothing under build/.
# Inputs: BUILD_DIR SOURCE_DIR WORK_DIR CPACK CXX GENERATOR CXX_FLAGS LINKER_FLAGS

include("${CMAKE_CURRENT_LIST_DIR}/Run.cmake")

# Fails with `what` unless the sorted lists `actual` and `expected` are equal,
# naming the files only one of them has.
function(require_same_files what actual expected)
  if(NOT "${actual}" STREQUAL "${expected}")
    set(extra ${actual})
    list(REMOVE_ITEM extra ${expected})
    set(missing ${expected})
    list(REMOVE_ITEM missing ${actual})
    message(FATAL_ERROR "${what}: extra '${extra}', missing '${missing}'")
  endif()
endfunction()

find_program(DPKG dpkg REQUIRED)
find_program(DPKG_DEB dpkg-deb REQUIRED)
file(REMOVE_RECURSE "${WORK_DIR}")
set(packages "${WORK_DIR}/packages")

# 1. The Debian package.
run("${CPACK}" --config "${BUILD_DIR}/CPackConfig.cmake" -B "${packages}")
file(GLOB debs "${packages}/*.deb")
list(LENGTH debs count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "cpack made ${count} .deb files, not one: '${debs}'")
endif()
run("${DPKG}" --print-architecture)
string(STRIP "${last_output}" arch)

# The version the project declares (CheckConsumers.cmake reads it again).
file(READ "${SOURCE_DIR}/CMakeLists.txt" root_lists)
if(NOT root_lists MATCHES "project\\(coexec VERSION ([0-9]+\\.[0-9]+\\.[0-9]+)")
  message(FATAL_ERROR "no project(coexec VERSION x.y.z) in ${SOURCE_DIR}/CMakeLists.txt")
endif()
set(expected_version "${CMAKE_MATCH_1}")
get_filename_component(deb_name "${debs}" NAME)
if(NOT deb_name STREQUAL "libcoexec-dev_${expected_version}_${arch}.deb")
  message(FATAL_ERROR "the package is ${deb_name}, not libcoexec-dev_${expected_version}_${arch}.deb")
endif()

# Its control fields: each `Field: value` line, matched as a whole.
run("${DPKG_DEB}" --field "${debs}")
set(control "${last_output}")
foreach(field IN ITEMS "Package: libcoexec-dev" "Version: ${expected_version}" "Architecture: ${arch}"
                       "Section: libdevel" "Depends: libfmt-dev" "Recommends: libasio-dev")
  string(REGEX REPLACE "([][+.*()^$?|\\\\])" "\\\\\\1" pattern "${field}")
  if(NOT control MATCHES "(^|\n)${pattern}(\n|$)")
    message(FATAL_ERROR "the package's control has no line '${field}':\n${control}")
  endif()
endforeach()
if(NOT control MATCHES "(^|\n)Maintainer: [^\n]+ <[^\n@>]+@[^\n>]+>(\n|$)")
  message(FATAL_ERROR "the package's control names no maintainer 'Name <address>':\n${control}")
endif()
if(NOT control MATCHES "(^|\n)Description: [^\n]+\n [^\n]")
  message(FATAL_ERROR "the package's control has no summary and extended description:\n${control}")
endif()

# Extracted into a scratch root, as dpkg would install it below /.
set(root "${WORK_DIR}/root")
run("${DPKG}" -x "${debs}" "${root}")
foreach(file IN ITEMS include/coexec/coexec.h include/coexec/Version.h include/coexec/Export.h
                      lib/cmake/coexec/coexecConfig.cmake lib/cmake/coexec/coexecConfigVersion.cmake
                      lib/pkgconfig/coexec.pc lib/pkgconfig/coexec-asio.pc share/doc/coexec/LICENSE_1_0.txt)
  if(NOT EXISTS "${root}/usr/${file}")
    message(FATAL_ERROR "the package lacks /usr/${file}")
  endif()
endforeach()
file(GLOB libraries "${root}/usr/lib/libcoexec.a" "${root}/usr/lib/libcoexec.so*")
if(NOT libraries)
  message(FATAL_ERROR "the package has no libcoexec.a or libcoexec.so under /usr/lib")
endif()

# The package's tree is the installed one, file for file and byte for byte:
# `cmake --install` of this build into a scratch prefix, compared with
# <root>/usr. The install test (CheckInstall.cmake) builds and runs every
# consumer against that installed tree; here the two that reach the package
# through each of its entry points, find_package and pkg-config, are enough
# to check that its files work from where the package puts them.
set(installed "${WORK_DIR}/installed")
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${installed}")
file(GLOB_RECURSE deb_files LIST_DIRECTORIES false RELATIVE "${root}/usr" "${root}/usr/*")
file(GLOB_RECURSE installed_files LIST_DIRECTORIES false RELATIVE "${installed}" "${installed}/*")
list(FILTER deb_files EXCLUDE REGEX "^share/doc/libcoexec-dev/")  # Debian's own copyright and changelog
list(SORT deb_files)
list(SORT installed_files)
require_same_files("the package's /usr is not the installed tree" "${deb_files}" "${installed_files}")
foreach(file IN LISTS deb_files)
  if(IS_SYMLINK "${root}/usr/${file}" OR IS_SYMLINK "${installed}/${file}")
    file(READ_SYMLINK "${root}/usr/${file}" deb_target)
    file(READ_SYMLINK "${installed}/${file}" installed_target)
    if(NOT deb_target STREQUAL installed_target)
      message(FATAL_ERROR "/usr/${file} links to '${deb_target}' in the package, to '${installed_target}' installed")
    endif()
    continue()
  endif()
  file(SHA256 "${root}/usr/${file}" deb_hash)
  file(SHA256 "${installed}/${file}" installed_hash)
  if(NOT deb_hash STREQUAL installed_hash)
    message(FATAL_ERROR "/usr/${file} in the package differs from the installed ${file}")
  endif()
endforeach()
list(LENGTH deb_files deb_count)

set(prefix "${root}/usr")
set(WORK_DIR "${WORK_DIR}/consumers")
set(CONSUMERS minimal)
include("${CMAKE_CURRENT_LIST_DIR}/CheckConsumers.cmake")
set(deb_result "${pkgconfig_result}; its ${deb_count} files are the installed ones")

# 2. The source tarball.
run("${CPACK}" --config "${BUILD_DIR}/CPackSourceConfig.cmake" -B "${packages}")
set(tarball "${packages}/coexec-${expected_version}.tar.gz")
if(NOT EXISTS "${tarball}")
  message(FATAL_ERROR "cpack made no ${tarball}")
endif()
set(unpacked "${packages}/unpacked")
file(MAKE_DIRECTORY "${unpacked}")
execute_process(COMMAND ${CMAKE_COMMAND} -E tar xzf "${tarball}" WORKING_DIRECTORY "${unpacked}"
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "could not unpack ${tarball}: ${err}")
endif()
set(top "${unpacked}/coexec-${expected_version}")
foreach(file IN ITEMS CMakeLists.txt LICENSE_1_0.txt README.md CHANGELOG.md include/coexec/coexec.h)
  if(NOT EXISTS "${top}/${file}")
    message(FATAL_ERROR "the source tarball lacks coexec-${expected_version}/${file}")
  endif()
endforeach()
file(GLOB_RECURSE packed RELATIVE "${top}" "${top}/*")
list(SORT packed)
foreach(file IN LISTS packed)
  if(file MATCHES "^build/|^\\.git/")
    message(FATAL_ERROR "the source tarball holds ${file}")
  endif()
endforeach()
find_program(GIT git)
if(GIT)
  execute_process(COMMAND "${GIT}" -c core.quotePath=off -C "${SOURCE_DIR}" ls-files
    RESULT_VARIABLE rc OUTPUT_VARIABLE tracked ERROR_QUIET)
endif()
if(GIT AND rc EQUAL 0 AND NOT tracked STREQUAL "")
  string(REPLACE "\n" ";" tracked "${tracked}")
  set(expected "")
  foreach(file IN LISTS tracked)
    if(NOT file STREQUAL "" AND EXISTS "${SOURCE_DIR}/${file}")
      list(APPEND expected "${file}")
    endif()
  endforeach()
  list(SORT expected)
  require_same_files("the source tarball is not the tracked files" "${packed}" "${expected}")
  list(LENGTH packed packed_count)
  set(source_result "the ${packed_count} tracked files")
else()
  list(LENGTH packed packed_count)
  set(source_result "${packed_count} files (no git checkout to compare with)")
endif()

message(STATUS "packages work: ${deb_name} (${deb_result}); coexec-${expected_version}.tar.gz holds ${source_result}")
