# SPDX-License-Identifier: BSL-1.0
# Installs the built project into a temporary prefix and checks it there
# (CheckConsumers.cmake: the version, the license, CMake and pkg-config
# consumers).
# Inputs: BUILD_DIR SOURCE_DIR WORK_DIR CXX GENERATOR CXX_FLAGS LINKER_FLAGS

include("${CMAKE_CURRENT_LIST_DIR}/Run.cmake")

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
include("${CMAKE_CURRENT_LIST_DIR}/CheckConsumers.cmake")
