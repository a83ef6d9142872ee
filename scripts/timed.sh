#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# timed.sh LABEL COMMAND...: runs COMMAND, then prints "==== LABEL: N s" and
# appends "LABEL: N s" to build/stage-times.txt (make check prints that file
# last, so that each stage's build and test times are in CI's output). Exits
# with COMMAND's status.
set -u
label=$1
shift
start=$(date +%s)
"$@"
status=$?
took=$(($(date +%s) - start))
echo "==== $label: $took s"
mkdir -p build && echo "$label: $took s" >>build/stage-times.txt
exit "$status"
