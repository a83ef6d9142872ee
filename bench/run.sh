#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Runs the coexec benchmarks against asio::thread_pool, oneTBB and the JDK's
# ThreadPoolExecutor (tpe) and ForkJoinPool (fjp), and reports them side by
# side (make bench). Usage: bench/run.sh [build-dir]
# (default build/release, configured with -DCOEXEC_BUILD_BENCH=ON and built;
# bench_tpe and bench_fjp are there when CMake found a JDK 17, else the Java
# columns are left out with a note).
#
# Each workload runs BENCH_RUNS times per implementation, interleaved (run 1
# of coexec, asio, tbb, tpe, fjp, then run 2, ..., the order rotated each
# run); every binary does its own warm-up (the Java ones until the JIT has
# compiled the workload: bench/java/JdkPools.java). Then: heap allocations
# per operation on coexec (bench_alloc), the idle CPU of each pool,
# callgrind instructions per task for W1 with 1 worker (the C++ binaries
# only; skipped with a note without valgrind), and the report: the table on
# stdout, <build>/bench/results.csv (per-metric statistics; samples.csv holds
# every sample), docs/perf/latest.md and docs/perf/latest.svg, copied into
# docs/performance.md and summarised in README.md by bench/splice.sh.
#
# A workload an implementation lacks (oneTBB has no timers: W6; the JDK
# pools have no coroutine hop: W3.coro) is not run on it; its column shows
# '-'.
#
# Scaling mode (BENCH_MODE=scaling, make bench-scaling): W1 (one producer,
# the W1.2 workload), W2 and W4 with each worker count of BENCH_WORKERS
# (default "1 2 4 8 16"), on every implementation that has the workload,
# interleaved as above; the table goes to stdout and docs/perf/scaling.md
# (samples: <build>/bench/scaling-samples.csv); nothing else is run or
# written. The binaries take the worker count from the environment:
# BENCH_WORKERS_N=N makes W1.2, W2 and W4 use N workers instead of 2 (every
# binary reads it; `BENCH_WORKERS_N=8 bench_coexec W4` by hand).
#
# Environment: BENCH_RUNS (default 5), BENCH_SCALE (default 1: the issue's
# sizes), BENCH_WORKLOADS (default "W1.1 W1.2 W2 W3.coro W3.chain W4 W4d
# W4s.whenAll W4s.group W4s.invokeAll W5 W6.cancel W6.fire W7 W8 W9 W10 W11";
# a group name such as W6 runs W6.cancel and W6.fire in one process),
# BENCH_CALLGRIND=0 to skip callgrind, BENCH_TIMEOUT (seconds
# per binary run, default 120), BENCH_MODE and BENCH_WORKERS (above),
# BENCH_JAVA_WARMUP_MS and BENCH_JAVA_OPTS (the Java binaries' warm-up budget
# and JVM options: bench/java/JdkPools.java).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build/release}
[[ $build == /* ]] || build=$root/$build
bin=$build/bench
runs=${BENCH_RUNS:-5}
scale=${BENCH_SCALE:-1}
read -r -a workloads <<<"${BENCH_WORKLOADS:-W1.1 W1.2 W2 W3.coro W3.chain W4 W4d W4s.whenAll W4s.group W4s.invokeAll W5 W6.cancel W6.fire W7 W8 W9 W10 W11}"
limit=${BENCH_TIMEOUT:-120}
mode=${BENCH_MODE:-all}
cppImpls=(coexec asio tbb)
impls=("${cppImpls[@]}")

if [[ $mode != all && $mode != scaling ]]; then
  echo "run.sh: BENCH_MODE is '$mode': 'scaling', or unset for the whole benchmark" >&2
  exit 2
fi
for b in coexec asio tbb alloc report; do
  if [[ ! -x $bin/bench_$b ]]; then
    echo "run.sh: $bin/bench_$b is missing: configure with -DCOEXEC_BUILD_BENCH=ON and build first" >&2
    exit 1
  fi
done
javaNotes=()
for b in tpe fjp; do
  if [[ -x $bin/bench_$b ]]; then
    impls+=("$b")
  else
    javaNotes+=("  (no $bin/bench_$b: CMake found no JDK 17, make bench-deps installs default-jdk-headless; the $b column is left out)")
  fi
done

samples=$bin/samples.csv
if [[ $mode == scaling ]]; then samples=$bin/scaling-samples.csv; fi
log=$bin/bench.log
mkdir -p "$root/docs/perf"
: >"$log"
failures=0
start=$SECONDS

# One binary run: `measure RUN IMPL-BINARY IMPL WORKLOAD RUNS SCALE`; samples
# get the run number in front, stderr goes to the log.
measure() {
  local run=$1 binary=$2 impl=$3
  shift 3
  local out
  if out=$(timeout "$limit" "$bin/bench_$binary" "$@" 2>>"$log"); then
    if [[ -n $out ]]; then sed "s/^/$run,/" <<<"$out" >>"$samples"; fi
  else
    echo "  warning: $impl $1 (run $run) failed or timed out; see $log"
    failures=$((failures + 1))
  fi
}

# True if bench_$1 has workload $2, or one of group $2 (W6: W6.cancel, W6.fire).
has() {
  "$bin/bench_$1" list | awk -v w="$2" '$1 == w || index($1, w ".") == 1 { found = 1 } END { exit !found }'
}

# Sets `present` to the implementations that have workload $1, with a note
# for each that has not. False if none has it.
presentFor() {
  local impl
  present=()
  for impl in "${impls[@]}"; do
    if has "$impl" "$1"; then present+=("$impl"); else echo "  ($impl has no $1: not run, its column shows '-')"; fi
  done
  if ((${#present[@]} == 0)); then
    echo "  warning: no benchmark binary has a workload $1 (try bench_coexec list)"
    failures=$((failures + 1))
    return 1
  fi
}

# Runs workload $1 BENCH_RUNS times on each of `present`, interleaved (the
# order rotated each run); $2 goes in front of the run number in the
# samples ("" or "WORKERS,").
interleave() {
  local w=$1 prefix=$2 r k impl
  for ((r = 1; r <= runs; r++)); do
    for ((k = 0; k < ${#present[@]}; k++)); do
      impl=${present[$(((r + k) % ${#present[@]}))]}
      measure "$prefix$r" "$impl" "$impl" "$w" 1 "$scale"
    done
  done
}

# The same CPU work per task in every binary.
BENCH_SPIN_PER_US=$("$bin/bench_coexec" calibrate)
export BENCH_SPIN_PER_US
machine() {
  echo "$(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores, $(uname -sr), $(g++ --version 2>/dev/null | head -n 1), $(date -u '+%Y-%m-%d %H:%M UTC')"
}

if [[ $mode == scaling ]]; then
  read -r -a counts <<<"${BENCH_WORKERS:-1 2 4 8 16}"
  echo "coexec scaling: W1 (W1.2), W2 and W4 with ${counts[*]} workers, ${runs} interleaved runs per implementation, scale ${scale}, $(nproc) cores"
  echo "  (burn loop: ${BENCH_SPIN_PER_US} iterations/us; raw samples: $samples, log: $log)"
  if ((${#javaNotes[@]} > 0)); then printf '%s\n' "${javaNotes[@]}"; fi
  echo "workers,run,impl,workload,metric,unit,better,value" >"$samples"
  for w in W1.2 W2 W4; do
    presentFor "$w" || continue
    for n in "${counts[@]}"; do
      t0=$SECONDS
      BENCH_WORKERS_N=$n interleave "$w" "$n,"
      printf '  %-9s workers=%-3s %3d s\n' "$w" "$n" $((SECONDS - t0))
    done
  done
  # W1.2 with N workers is W1 with N workers: the table says W1.
  sed -i 's/^\([^,]*,[^,]*,[^,]*\),W1\.2,/\1,W1,/' "$samples"
  BENCH_MACHINE=$(machine)
  BENCH_COMMAND="make bench-scaling (BENCH_MODE=scaling bench/run.sh $(realpath --relative-to="$root" "$build"); BENCH_RUNS=$runs BENCH_SCALE=$scale; workers ${counts[*]})"
  export BENCH_MACHINE BENCH_COMMAND
  "$bin/bench_report" scaling "$samples" "$root/docs/perf/scaling.md" | tee "$bin/scaling.txt"
  # The figures the scaling model in docs/performance.md rests on.
  if [[ -x $bin/bench_limits ]]; then
    "$bin/bench_limits" markdown >"$bin/limits.md"
    echo
    echo "The machine's primitives (bench_limits):"
    cat "$bin/limits.md"
    {
      echo
      echo "## The machine's primitives"
      echo
      echo "What the scaling model in [../performance.md](../performance.md) rests on, measured by \`bench_limits\` in the same run:"
      echo
      cat "$bin/limits.md"
    } >>"$root/docs/perf/scaling.md"
  fi
  echo
  echo "Machine: $BENCH_MACHINE"
  echo "Wrote $samples and docs/perf/scaling.md ($((SECONDS - start)) s in all)"
  if ((failures > 0)); then
    echo "run.sh: $failures benchmark run(s) failed; see $log" >&2
    exit 1
  fi
  exit 0
fi

echo "coexec benchmarks: ${runs} interleaved runs per implementation, scale ${scale}, $(nproc) cores"
echo "  (burn loop: ${BENCH_SPIN_PER_US} iterations/us; raw samples: $samples, log: $log)"
if ((${#javaNotes[@]} > 0)); then printf '%s\n' "${javaNotes[@]}"; fi
echo "run,impl,workload,metric,unit,better,value" >"$samples"

for w in "${workloads[@]}"; do
  t0=$SECONDS
  presentFor "$w" || continue
  interleave "$w" ""
  printf '  %-9s %3d s\n' "$w" $((SECONDS - t0))
done

t0=$SECONDS
for impl in "${impls[@]}"; do measure 1 "$impl" "$impl" idle 1 "$scale"; done
measure 1 alloc coexec alloc "$runs" "$scale"  # median of the runs: a growth event in one is not the steady state
printf '  %-9s %3d s\n' "idle+alloc" $((SECONDS - t0))

# Callgrind: instructions per task for W1 with 1 worker, 100,000 tasks (the
# harness zeroes the counters at the start of the timed region and dumps them
# at its end; no warm-up under valgrind). Two figures: all threads (submit,
# hand-off, the task, and whatever the workers spin; valgrind runs one thread
# at a time, which inflates spinning) and the producer thread alone (the
# submit path). The C++ binaries only: under valgrind a JVM counts its
# interpreter and JIT, not the pool.
if [[ ${BENCH_CALLGRIND:-1} == 0 ]]; then
  echo "  callgrind: skipped (BENCH_CALLGRIND=0)"
elif ! command -v valgrind >/dev/null; then
  echo "  callgrind: skipped: valgrind is not installed (make bench-deps installs it)"
else
  t0=$SECONDS
  cg=$bin/callgrind
  rm -rf "$cg"
  mkdir -p "$cg"
  cgScale=$(awk -v s="$scale" 'BEGIN { print 0.1 * s }')
  tasks=$(awk -v s="$cgScale" 'BEGIN { n = int(1000000 * s + 0.5); print (n < 1 ? 1 : n) }')
  irOf() { sed -n 's/^summary: *//p' "$1" 2>/dev/null | head -n 1; }
  for impl in "${cppImpls[@]}"; do
    for threadMode in all producer; do
      threads=no
      dump=$cg/$impl-$threadMode.out.1
      if [[ $threadMode == producer ]]; then
        threads=yes
        dump=$cg/$impl-$threadMode.out.1-01
      fi
      if timeout $((limit * 3)) valgrind --tool=callgrind --separate-threads=$threads \
        --callgrind-out-file="$cg/$impl-$threadMode.out" "$bin/bench_$impl" W1.1 1 "$cgScale" >/dev/null 2>>"$log" &&
        ir=$(irOf "$dump") && [[ -n $ir ]]; then
        echo "0,$impl,W1.1 callgrind,Ir/task ($threadMode),instr,lower,$(awk -v ir="$ir" -v n="$tasks" 'BEGIN { printf "%.1f", ir / n }')" >>"$samples"
      else
        echo "  warning: callgrind on $impl ($threadMode) failed; see $log"
        failures=$((failures + 1))
      fi
    done
  done
  printf '  %-9s %3d s\n' "callgrind" $((SECONDS - t0))
fi

BENCH_MACHINE=$(machine)
BENCH_COMMAND="make bench (bench/run.sh $(realpath --relative-to="$root" "$build"); BENCH_RUNS=$runs BENCH_SCALE=$scale)"
export BENCH_MACHINE BENCH_COMMAND
"$bin/bench_report" "$samples" "$bin/results.csv" "$root/docs/perf/latest.md" "$root/docs/perf/latest.svg" |
  tee "$bin/report.txt"
{
  echo
  echo "## Workloads"
  for impl in "${impls[@]}"; do
    echo
    echo "$impl:"
    echo
    "$bin/bench_$impl" list | sed 's/^\([^ ]*\) *\(.*\)$/- `\1`: \2/'
  done
  echo
  echo "- \`alloc\`: global operator new calls per operation on coexec (bench_alloc, counting operator new);"
  echo "- \`W1.1 callgrind\`: callgrind instructions per task, W1 with 1 worker and 100,000 tasks, over the timed region."
} >>"$root/docs/perf/latest.md"

# docs/performance.md carries the latest table, goals and chart, README.md a
# three-line summary, between their `<!-- bench:begin -->` and
# `<!-- bench:end -->` lines.
"$root/bench/splice.sh" "$root"

echo
echo "Machine: $BENCH_MACHINE"
echo "Wrote $bin/results.csv, $samples, docs/perf/latest.md, docs/perf/latest.svg, the table in docs/performance.md and the summary in README.md ($((SECONDS - start)) s in all)"
if ((failures > 0)); then
  echo "run.sh: $failures benchmark run(s) failed; see $log" >&2
  exit 1
fi
