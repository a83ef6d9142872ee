#!/usr/bin/env bash
# ctest, with its verdict printed last.
#
#   ctest-verdict.sh run LOG CTEST_ARGS...   runs `ctest CTEST_ARGS...`, showing its output as it
#                                            comes and keeping a copy in LOG, then prints ctest's
#                                            verdict again: the "N% tests passed, M tests failed
#                                            out of K" line and the name of every test that failed.
#                                            Exits with ctest's status.
#   ctest-verdict.sh show LOG...             prints the verdict of each LOG again (make check's
#                                            closing summary); fails if one has no passing verdict.
#
# A run whose output has no verdict line (ctest could not start, found no
# tests, was killed) says so, and keeps ctest's non-zero status.
set -uo pipefail

verdict() {
  local log=$1
  local line
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" 2>/dev/null | tail -n 1)
  if [ -z "$line" ]; then
    echo "no ctest verdict in $log"
    return 1
  fi
  echo "$line"
  # The failed tests: the indented lines after "The following tests FAILED:".
  awk '/^The following tests FAILED:/ { on = 1; next } on && /^[ \t]+[0-9]+ - / { print } on && !/^[ \t]/ { on = 0 }' "$log"
  [[ "$line" == "100% tests passed"* ]]
}

mode=${1:-}
case "$mode" in
  run)
    log=$2
    shift 2
    mkdir -p "$(dirname "$log")"
    ctest "$@" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    echo
    echo "==== ctest $* ===="
    verdict "$log"
    if [ "$status" -ne 0 ]; then
      echo "ctest exited with status $status (output: $log)"
    fi
    exit "$status"
    ;;
  show)
    shift
    failed=0
    for log in "$@"; do
      echo "==== $log"
      verdict "$log" || failed=1
    done
    exit "$failed"
    ;;
  *)
    echo "usage: $0 run LOG CTEST_ARGS... | show LOG..." >&2
    exit 2
    ;;
esac
