#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# make check's stages, each build beside the test run before it:
#
#   dev build
#   dev tests    | asan build   (nice 19, output in build/asan/build.log)
#   asan tests   | tsan build   (nice 19, output in build/tsan/build.log)
#   tsan tests   | clang build  (nice 19, output in build/clang/build.log)
#   clang tests  | fuzz build   (nice 19, output in build/fuzz/build.log)
#   fuzz smoke
#
# Each build compiles through ccache where it is installed (CMakeLists.txt,
# COEXEC_CCACHE): an object whose inputs an earlier build compiled already
# comes from the cache. The run ends with ccache's counts of hits and misses.
#
# A test run leaves part of both cores idle (its tests wait on latches,
# timers and each other); the next build, at the lowest priority, takes only
# that idle time, so the tests run as fast as they would alone. The builds
# and tests are the same as `make test`, `make asan`, `make tsan`,
# `make clang` and `make fuzz-smoke` run one after another. The first stage
# that fails stops the run (a build beside it is stopped), and its output is
# shown: a background build's whole log, a test run's ctest verdict.
# Each stage's time is appended to build/stage-times.txt (scripts/timed.sh).
#
# Environment: BUILD_FLAGS (cmake --build), CTEST_FLAGS (ctest),
# FUZZ_SMOKE_SECONDS.
set -euo pipefail
cd "$(dirname "$0")/.."

buildFlags=${BUILD_FLAGS:--j $(nproc)}
ctestFlags=${CTEST_FLAGS:--j$(($(nproc) + 1)) --timeout 300}
fuzzSeconds=${FUZZ_SMOKE_SECONDS:-20}

background=
stopBackground() {
  if [[ -n $background ]]; then
    kill -- -"$background" 2>/dev/null || kill "$background" 2>/dev/null || true
    wait "$background" 2>/dev/null || true
    background=
  fi
}
trap stopBackground EXIT

# startBuild PRESET BESIDE: configures PRESET, then builds it in the
# background at the lowest priority, its output in build/PRESET/build.log.
# The build runs in a session of its own (setsid), so that a failure can stop
# it whole (its process group). Where the kernel groups each session's
# processes for scheduling (autogroup, /proc/sys/kernel/sched_autogroup_enabled),
# a session gets an even share of the CPU whatever its processes' nice
# values: the new session's group is set to nice 19 too.
startBuild() {
  local preset=$1 beside=$2
  cmake --preset "$preset" >/dev/null
  echo "==== $preset build: in the background beside $beside (log: build/$preset/build.log)"
  # shellcheck disable=SC2016,SC2086 # the inner script's "$@"; buildFlags is a list of flags
  setsid bash -c '{ echo 19 >/proc/self/autogroup; } 2>/dev/null; exec nice -n 19 "$@"' lowestPriority \
    ./scripts/timed.sh "$preset build (beside $beside)" \
    cmake --build --preset "$preset" $buildFlags >"build/$preset/build.log" 2>&1 &
  background=$!
  backgroundPreset=$preset
}

# finishBuild: waits for the background build; on failure shows its log and fails.
finishBuild() {
  local status=0
  wait "$background" || status=$?
  background=
  if [[ $status -ne 0 ]]; then
    echo "==== $backgroundPreset build FAILED (status $status): build/$backgroundPreset/build.log"
    cat "build/$backgroundPreset/build.log"
    exit "$status"
  fi
  tail -n 2 "build/$backgroundPreset/build.log"
}

runTests() {
  local preset=$1
  # shellcheck disable=SC2086 # ctestFlags is a list of flags
  ./scripts/timed.sh "$preset tests" ./scripts/ctest-verdict.sh run "build/$preset/ctest.log" \
    --preset "$preset" $ctestFlags
}

# ccache's counts for this run alone (CMakeLists.txt, COEXEC_CCACHE): zeroed
# here, shown at the end.
if command -v ccache >/dev/null; then ccache --zero-stats >/dev/null; fi

cmake --preset dev
# shellcheck disable=SC2086
./scripts/timed.sh "dev build" cmake --build --preset dev $buildFlags

previous=dev
for preset in asan tsan clang fuzz; do
  startBuild "$preset" "$previous tests"
  runTests "$previous"
  finishBuild
  previous=$preset
done
./scripts/timed.sh "fuzz smoke" ./scripts/fuzz.sh build/fuzz "$fuzzSeconds"
if command -v ccache >/dev/null; then
  echo "==== ccache, this run:"
  ccache --show-stats | grep -E "^(Cacheable calls|  Hits|  Misses|Uncacheable calls)" || true
fi
