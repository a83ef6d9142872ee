#!/usr/bin/env bash
# Copies the latest benchmark results (docs/perf/latest.md, written by
# bench/run.sh) into the docs, between their `<!-- bench:begin -->` and
# `<!-- bench:end -->` lines:
#   docs/performance.md  the whole table, the goals and the chart;
#   README.md            a three-line summary with the headline ratios and a
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

# The summary: W1.2 (throughput of small tasks, 2 workers), W3.coro (a
# coroutine hop) and W4 (fork/join), each against asio::thread_pool and
# oneTBB, and the count of goals met. A ratio column reads "4.211x better".
summary=$(awk -F'|' '
  function trim(s) { gsub(/^ +| +$/, "", s); return s }
  /^Machine:/ { sub(/^Machine: */, ""); sub(/ +$/, ""); machine = $0 }
  /^\| / && NF >= 11 { key = trim($2) "/" trim($3); asio[key] = trim($9); tbb[key] = trim($10) }
  /^- MET / { met++; goals++ }
  /^- MISS / { goals++ }
  END {
    printf "Latest run (%s), coexec against `asio::thread_pool` and oneTBB, medians:  \n", machine
    printf "small-task throughput (W1.2) %s / %s; coroutine hop time (W3.coro) %s / %s; fork/join time (W4) %s / %s.  \n",
      asio["W1.2/throughput"], tbb["W1.2/throughput"], asio["W3.coro/hop"], tbb["W3.coro/hop"],
      asio["W4/fib time"], tbb["W4/fib time"]
    printf "%d of %d scheduler goals met. The table, the goals and the chart: [docs/performance.md](docs/performance.md#where-it-stands).", met, goals
  }' "$latest")
splice "$root/README.md" "$summary"
