# Installs the built project into a temporary prefix, then builds two
# consumers against it: a CMake one (find_package(coexec) -> coexec::coexec,
# building examples/routing.cpp, examples/hello.cpp and, with the installed
# Asio bridge header, examples/asio_bridge.cpp; and, when the package has
# coexec::boost_asio, consumer/boost_asio_consumer.cpp) and a pkg-config one.
# Runs them all.
# Inputs: BUILD_DIR SOURCE_DIR WORK_DIR CXX GENERATOR CXX_FLAGS LINKER_FLAGS

include("${CMAKE_CURRENT_LIST_DIR}/Run.cmake")

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")

# 1. CMake consumer.
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/consumer" -B "${WORK_DIR}/consumer" -G "${GENERATOR}"
    "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
    "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}" "-DEXAMPLE_SOURCE=${SOURCE_DIR}/examples/routing.cpp"
    "-DHELLO_SOURCE=${SOURCE_DIR}/examples/hello.cpp" "-DASIO_SOURCE=${SOURCE_DIR}/examples/asio_bridge.cpp"
    "-DBOOST_ASIO_SOURCE=${SOURCE_DIR}/tests/install/consumer/boost_asio_consumer.cpp")
run(${CMAKE_COMMAND} --build "${WORK_DIR}/consumer")
run("${WORK_DIR}/consumer/routing")
if(NOT last_output MATCHES "all four routes behaved")
  message(FATAL_ERROR "the consumer built against the installed package did not run correctly:\n${last_output}")
endif()
run("${WORK_DIR}/consumer/hello")
if(NOT last_output MATCHES "1 \\+ 4 \\+ 9 \\+ 16 = 30")
  message(FATAL_ERROR "hello built against the installed package did not print the expected sum:\n${last_output}")
endif()

if(NOT EXISTS "${prefix}/include/coexec/asio.h" OR NOT EXISTS "${prefix}/include/coexec/asio/AsyncWait.h")
  message(FATAL_ERROR "the Asio bridge headers (coexec/asio.h, coexec/asio/*.h) were not installed")
endif()
run("${WORK_DIR}/consumer/asio_bridge")
if(NOT last_output MATCHES "the spawned Task returned fib")
  message(FATAL_ERROR "asio_bridge built against the installed package did not run correctly:\n${last_output}")
endif()

# The Boost.Asio bridge: installed (its own export set) when the build found
# Boost, and then the consumer, which finds Boost too, must have the target.
file(GLOB boost_asio_exports "${prefix}/lib*/cmake/coexec/coexecBoostAsioTargets.cmake"
  "${prefix}/lib/*/cmake/coexec/coexecBoostAsioTargets.cmake")
if(boost_asio_exports)
  if(NOT EXISTS "${prefix}/include/coexec/boost_asio.h" OR NOT EXISTS "${prefix}/include/coexec/asio/impl/AsyncWait.ipp")
    message(FATAL_ERROR "the Boost.Asio bridge headers (coexec/boost_asio.h, coexec/asio/impl/*.ipp) were not installed")
  endif()
  run("${WORK_DIR}/consumer/boost_asio_consumer")
  if(NOT last_output MATCHES "boost_asio consumer: 21 and 42")
    message(FATAL_ERROR "boost_asio_consumer built against the installed package did not run correctly:\n${last_output}")
  endif()
endif()

# 2. pkg-config consumer.
find_program(PKG_CONFIG pkg-config REQUIRED)
file(GLOB pcdir "${prefix}/lib*/pkgconfig" "${prefix}/lib/*/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "${pcdir}")
run(${PKG_CONFIG} --cflags --libs coexec)
string(STRIP "${last_output}" pkgflags)
separate_arguments(pkgflags UNIX_COMMAND "${pkgflags}")
separate_arguments(extra UNIX_COMMAND "${CXX_FLAGS} ${LINKER_FLAGS}")
file(GLOB libdir LIST_DIRECTORIES true "${prefix}/lib*")
run(${CXX} ${extra} "${SOURCE_DIR}/tests/install/consumer/pkgconfig_consumer.cpp" ${pkgflags}
    "-Wl,-rpath,${libdir}" -o "${WORK_DIR}/pkgconfig_consumer")
run("${WORK_DIR}/pkgconfig_consumer")
message(STATUS "installed package works: ${last_output}")
