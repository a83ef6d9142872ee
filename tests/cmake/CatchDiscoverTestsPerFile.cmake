# SPDX-License-Identifier: BSL-1.0
# Test discovery with one CTest test per source file (CatchDiscoverTests.cmake
# says how): what the sanitizer builds register.
set(COEXEC_TEST_PER_FILE ON)
include("${CMAKE_CURRENT_LIST_DIR}/CatchDiscoverTests.cmake")
