# SPDX-License-Identifier: BSL-1.0
# Included by tests/CMakeLists.txt (its scope: CMAKE_CURRENT_SOURCE_DIR is tests/).

# Compile-time refusals: each tests/compile-fail/<Name>.cpp is an object
# library outside `all`, which the test compileFail.<name> builds and whose
# diagnostics it checks (CheckCompile.cmake): with EXPECT=FAIL, one error per
# line marked `expect-error`, each the static_assert message the file states.
# The arguments after `expect` are libraries to link, then optionally
# DEFINITIONS and macros to define (for a second flavour of one source).
# What they check is the compiler's front end (a static_assert, an error of
# GCC's), which a sanitizer does not change: the plain builds (dev on GCC,
# clang) run them, the sanitizer builds do not. COEXEC_TEST_COMPILE_CHECKS=ON
# forces them.
option(COEXEC_TEST_COMPILE_CHECKS "Run the compile-time refusal checks (compileFail.*)" ${_plain})
function(coexec_compile_check test source expect)
  if(NOT COEXEC_TEST_COMPILE_CHECKS)
    return()
  endif()
  cmake_parse_arguments(PARSE_ARGV 3 check "" "" "DEFINITIONS")
  set(target compile_check_${test})
  add_library(${target} OBJECT EXCLUDE_FROM_ALL ${source})
  target_link_libraries(${target} PRIVATE coexec::coexec coexec_warnings ${check_UNPARSED_ARGUMENTS})
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  if(check_DEFINITIONS)
    target_compile_definitions(${target} PRIVATE ${check_DEFINITIONS})
  endif()
  add_test(NAME compileFail.${test}
    COMMAND ${CMAKE_COMMAND}
      -DBUILD_DIR=${PROJECT_BINARY_DIR}
      -DTARGET=${target}
      -DSOURCE=${CMAKE_CURRENT_SOURCE_DIR}/${source}
      -DEXPECT=${expect}
      -P ${CMAKE_CURRENT_SOURCE_DIR}/compile-fail/CheckCompile.cmake)
  # The tests share one build tree: one ninja at a time.
  set_tests_properties(compileFail.${test} PROPERTIES TIMEOUT 300 LABELS compile-fail
    RESOURCE_LOCK coexec_build_tree)
endfunction()

# The forms GCC 12 miscompiles (detail/OwningCallableFuture.h, and the Task
# parameters of detail/TaskPromise.h): on GCC 12 and older each file's marked
# lines must fail with the message that names the fix; elsewhere each file
# must compile, and compileForms.* runs every form in them, refused ones
# included, and checks its result (AwaitableFormsTest and
# AsioAwaitableFormsTest run the accepted forms on every compiler).
set(COEXEC_GCC12_FORMS
  coAwaitTemporary compile-fail/CoAwaitTemporary.cpp
  withTimeoutTemporaryFuture compile-fail/WithTimeoutTemporaryFuture.cpp
  combinatorTemporary compile-fail/CombinatorTemporary.cpp
  groupAndLaneTemporary compile-fail/GroupAndLaneTemporary.cpp
  asyncWaitTemporary compile-fail/AsyncWaitTemporary.cpp
  submitWhenRoomTemporary compile-fail/SubmitWhenRoomTemporary.cpp
  taskClosureParameter compile-fail/TaskClosureParameter.cpp)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  set(_gcc12_expect FAIL)
else()
  set(_gcc12_expect PASS)
endif()
set(_forms_sources "")
while(COEXEC_GCC12_FORMS)
  list(POP_FRONT COEXEC_GCC12_FORMS test source)
  coexec_compile_check(${test} ${source} ${_gcc12_expect} coexec::asio)
  list(APPEND _forms_sources ${source})
endwhile()
# The bridge's refusal, against Boost.Asio too.
if(COEXEC_HAS_BOOST_ASIO)
  coexec_compile_check(asyncWaitTemporaryBoost compile-fail/AsyncWaitTemporary.cpp ${_gcc12_expect}
    coexec::boost_asio DEFINITIONS COEXEC_TEST_BOOST_ASIO=1)
endif()
# The opt-out of the Task parameter refusal: the same file compiles everywhere.
coexec_compile_check(taskClosureParameterAllowed compile-fail/TaskClosureParameter.cpp PASS coexec::asio
  DEFINITIONS COEXEC_ALLOW_GCC12_CLOSURE_PARAMETERS)
# A GCC 12 bug the refusals rely on: no braced list inside a co_await
# expression (GCC's own error; tests/GccCoroutineBugsTest.cpp).
coexec_compile_check(gccBracedListInCoAwait compile-fail/GccBracedListInCoAwait.cpp ${_gcc12_expect})
if(_gcc12_expect STREQUAL "PASS")
  # One executable of the same files, each with its TEST_CASE.
  function(coexec_forms_runner target)
    add_executable(${target} ${_forms_sources})
    target_compile_definitions(${target} PRIVATE COEXEC_RUN_FORMS)
    target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
    target_link_libraries(${target} PRIVATE coexec::coexec coexec::asio coexec_catch_main coexec_warnings)
    if(COEXEC_TEST_UNITY)
      coexec_unity_build(${target} 0)
    endif()
    catch_discover_tests(${target} DISCOVERY_MODE PRE_TEST TEST_PREFIX "${target}." PROPERTIES TIMEOUT 120)
  endfunction()
  # In a build without sanitizers on clang (the clang build), the runner and
  # the forms matrix run under ASan/UBSan instead: what GCC 12 would free
  # twice is freed once here, and ASan says so if not. Only these
  # executables are instrumented (the library is not: ASan sees every free
  # all the same). Elsewhere the runner is built with the build's flags.
  if(COEXEC_FORMS_UNDER_ASAN)
    # Without UBSan's `function` check: with it, clang 14 fails to compile the
    # Asio coroutines of AsyncWaitTemporary.cpp ("error: Cannot represent a
    # difference across sections"); every other check is on.
    set(_asan -fsanitize=address,undefined -fno-sanitize=function -fno-sanitize-recover=undefined
      -fno-omit-frame-pointer)
    coexec_forms_runner(compileFormsAsan)
    add_executable(AwaitableFormsAsanTest AwaitableFormsTest.cpp AsioAwaitableFormsTest.cpp)
    target_include_directories(AwaitableFormsAsanTest PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
    target_link_libraries(AwaitableFormsAsanTest PRIVATE coexec::coexec coexec::asio coexec_catch_main
      coexec_warnings)
    if(COEXEC_TEST_UNITY)
      coexec_unity_build(AwaitableFormsAsanTest 0)
    endif()
    catch_discover_tests(AwaitableFormsAsanTest DISCOVERY_MODE PRE_TEST TEST_PREFIX "asan."
      PROPERTIES TIMEOUT 120)
    foreach(target compileFormsAsan AwaitableFormsAsanTest)
      target_compile_options(${target} PRIVATE ${_asan})
      target_link_options(${target} PRIVATE ${_asan})
    endforeach()
  else()
    coexec_forms_runner(compileForms)
  endif()
endif()

# Everywhere: syncWait and withTimeout of a named Task must say "std::move".
coexec_compile_check(syncWaitNamedTask compile-fail/SyncWaitNamedTask.cpp FAIL)
# syncWait of something that is not awaitable says what it takes.
coexec_compile_check(syncWaitNotAwaitable compile-fail/SyncWaitNotAwaitable.cpp FAIL)
coexec_compile_check(withTimeoutNamedTask compile-fail/WithTimeoutNamedTask.cpp FAIL)
