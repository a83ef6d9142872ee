#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Copies the latest benchmark results (docs/perf/latest.md, written by
# bench/run.sh) into the docs, between their `<!-- bench:begin -->` and
# `<!-- bench:end -->` lines:
#   docs/performance.md  the whole table, the goals and the chart;
#   README.md            a three-line summary: the headline workloads, coexec
#                        against the best peer of each, the goals met, and a
#                        link to docs/performance.md.
# bench/run.sh calls it after each run; run it by hand after editing latest.md.
# Usage: bench/splice.sh [source-root]
set -euo pipefail
root=$(realpath "${1:-$(dirname "$0")/..}")
latest="$root/docs/perf/latest.md"

# Replaces the lines between the markers of file $1 with the text $2.
splice() {
  local target=$1 block=$2
  grep -q '^<!-- bench:begin -->' "$target" || { echo "splice.sh: no bench:begin marker in $target" >&2; exit 1; }
  awk -v block="$block" '
    /^<!-- bench:begin -->/ { print; print block; skip = 1; next }
    /^<!-- bench:end -->/ { skip = 0 }
    !skip { print }' "$target" >"$target.tmp" && mv "$target.tmp" "$target"
}

table=$(awk '/^Machine:/ { on = 1 } on { print } /^!\[chart\]/ { exit }' "$latest" |
  sed "s|^!\[chart\](latest.svg)|![chart](perf/latest.svg)|")
splice "$root/docs/performance.md" "$table"

# The summary: the headline workloads (small-task throughput, fan-out,
# coroutine hop, fork/join, overload, invokeAll), each as coexec's median
# next to the best peer's of the same run (the table's `best peer` column),
# named, with coexec's ratio to it ("1.57x better"), and the count of goals
# met. Columns are found by their header, so the set of peers may change.
summary=$(awk -F'|' '
  function trim(s) { gsub(/^ +| +$/, "", s); return s }
  function median(c) { c = trim(c); sub(/ .*/, "", c); return c }
  function item(key, label,   w) {
    w = key; sub(/\/.*/, "", w)
    if (!(key in own)) return label " (" w "): not run"
    if (best[key] == "-" || best[key] == "") return label " (" w ") " own[key] " " unit[key] ", no peer measured"
    return label " (" w ") " own[key] " " unit[key] " against " best[key] "\047s " peer[key] ": " ratio[key]
  }
  /^Machine:/ { sub(/^Machine: */, ""); sub(/ +$/, ""); machine = $0 }
  /^\| workload \|/ && !header { header = 1; for (i = 2; i < NF; i++) col[trim($i)] = i; next }
  header && /^\| / && !/^\|---/ {
    key = trim($2) "/" trim($3)
    unit[key] = trim($4)
    own[key] = median($(col["coexec median [min-max]"]))
    best[key] = trim($(col["best peer"]))
    ratio[key] = trim($(col["coexec/best"]))
    if ((best[key] " median [min-max]") in col) peer[key] = median($(col[best[key] " median [min-max]"]))
  }
  /^Kept from earlier rounds:/ { kept = 1 }
  /^- MET / { if (kept) { keptMet++; keptGoals++ } else { met++; goals++ } }
  /^- MISS |^- n\/a / { if (kept) keptGoals++; else goals++ }
  END {
    printf "Latest run (%s), coexec against the best peer of each workload in the same run (`asio::thread_pool`, oneTBB, the JDK\047s `ThreadPoolExecutor` and `ForkJoinPool`), medians:  \n", machine
    printf "%s; %s; %s; %s; %s; %s.  \n", item("W1.2/throughput", "small-task throughput"), item("W2/rounds/s", "fan-out/fan-in rounds"),
      item("W3.coro/hop", "coroutine hop"), item("W4/fib time", "fork/join fib(25)"), item("W5/throughput", "overload throughput"),
      item("W7/rounds/s", "invokeAll of 64 rounds")
    printf "%d of %d goals of the scheduler work met, and %d of %d kept from earlier rounds. The table, the goals and the chart: [docs/performance.md](docs/performance.md#where-it-stands).", met, goals, keptMet, keptGoals
  }' "$latest")
splice "$root/README.md" "$summary"
