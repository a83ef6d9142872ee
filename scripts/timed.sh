#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# timed.sh LABEL COMMAND...: runs COMMAND, then prints "==== LABEL: N s (CPU C s)"
# and appends "LABEL: N s (CPU C s)" to build/stage-times.txt (make check
# prints that file last, so that each stage's build and test times are in CI's
# output). N is wall time, C the user plus system time of COMMAND and its
# children. Exits with COMMAND's status.
set -u
label=$1
shift
start=$(date +%s)
"$@"
status=$?
took=$(($(date +%s) - start))
# `times` (run in this shell: in a pipe it would see no children) prints two
# lines: the shell's user and system time, then its children's.
timesFile=$(mktemp)
times >"$timesFile"
cpu=$(awk 'NR == 2 {
  total = 0
  for (i = 1; i <= 2; ++i) { split($i, p, "m"); total += p[1] * 60 + p[2] }
  printf "%d", total + 0.5 }' "$timesFile")
rm -f "$timesFile"
echo "==== $label: $took s (CPU $cpu s)"
mkdir -p build && echo "$label: $took s (CPU $cpu s)" >>build/stage-times.txt
exit "$status"
