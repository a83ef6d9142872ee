#!/usr/bin/env bash
# Runs every libFuzzer target of a build tree, side by side:
#
#   scripts/fuzz.sh BUILD_DIR SECONDS      (make fuzz, make fuzz-smoke)
#
# A target is an executable BUILD_DIR/tests/fuzz/fuzz_<Name>, built from
# tests/fuzz/<Name>Fuzz.cpp (tests/fuzz/CMakeLists.txt). Its files in the
# source tree, by the same <Name>:
#   tests/fuzz/corpus/<Name>/   seed corpus (read only: never written to)
#   tests/fuzz/<Name>.dict      dictionary, optional (-dict=)
#   tests/fuzz/<Name>.options   extra libFuzzer flags, optional: whitespace-separated,
#                               '#' starts a comment; they come after the defaults
#                               below, so they override them (e.g. -max_len=65536)
# Each target first runs once over its seeds alone (-runs=0), so a seed that
# crashes fails at once; then it fuzzes for SECONDS (0: the seeds only) over
# its corpus in BUILD_DIR/fuzz/<Name>/corpus, which keeps what earlier runs
# found (merged after each run: fewer inputs, the same coverage). libFuzzer's
# output goes to BUILD_DIR/fuzz/<Name>/{seeds,fuzz,merge}.log; a crashing,
# leaking or timing-out input is written to BUILD_DIR/fuzz/<Name>/artifacts/
# and the script says where, shows the log's tail and exits 1.
# Reproduce with: BUILD_DIR/tests/fuzz/fuzz_<Name> <that file>.

set -euo pipefail

if [[ $# -ne 2 || ! $2 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
seconds=$2
source_dir=$(cd "$(dirname "$0")/.." && pwd)
fuzz_source_dir=$source_dir/tests/fuzz

# Flags every target gets: inputs up to 4 KiB, 10 s per input, 4 GiB of RSS.
default_flags=(-max_len=4096 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1)

# Leaks fail a run (libFuzzer's default under ASan); UBSan stops at the first
# report (the preset builds with -fno-sanitize-recover=undefined too).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

mapfile -t targets < <(find "$build_dir/tests/fuzz" -maxdepth 1 -type f -name 'fuzz_*' -perm -u+x 2>/dev/null | sort)
if [[ ${#targets[@]} -eq 0 ]]; then
  echo "fuzz.sh: no fuzz_* executables in $build_dir/tests/fuzz (build the fuzz preset first)" >&2
  exit 1
fi

# The input a failed run wrote, from its log ("Test unit written to ...").
artifact_of() {
  sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$1" | tail -n 1
}

# A failed run: what failed, where its input is (and which seed of SEED_DIR
# it is, if given), the tail of its log.
report_failure() {
  local target=$1 log=$2 what=$3 seed_dir=${4:-} artifact seed
  artifact=$(artifact_of "$log")
  echo "$target: FAILED $what (libFuzzer log: $log)"
  if grep -q '^SUMMARY: ' "$log"; then
    echo "$target: $(sed -n 's/^SUMMARY: //p' "$log" | tail -n 1)"
  fi
  if [[ -n $artifact ]]; then
    echo "$target: the failing input is $artifact"
    echo "$target: reproduce with: $build_dir/tests/fuzz/$target $artifact"
    if [[ -n $seed_dir && -d $seed_dir ]]; then
      for seed in "$seed_dir"/*; do
        if [[ -f $seed ]] && cmp -s "$seed" "$artifact"; then
          echo "$target: it is the seed ${seed#"$source_dir"/}"
        fi
      done
    fi
  elif grep -q '^Running: ' "$log"; then
    echo "$target: the failing seed is $(sed -n 's/^Running: //p' "$log" | tail -n 1)"
  fi
  echo "---- last 40 lines of $log ----"
  tail -n 40 "$log"
  echo "----"
}

# The value of libFuzzer's final statistic `name` in a log (0 if absent).
stat_of() {
  local value
  value=$(sed -n "s/^stat::$2: *\([0-9]*\)$/\1/p" "$1" | tail -n 1)
  echo "${value:-0}"
}

# One target's run: its seeds, then SECONDS of fuzzing and the merge. Prints
# its report; returns 1 if the target failed.
fuzz_target() {
  local executable=$1 target name work seeds corpus artifacts flags extra seed_count start status elapsed \
    executions rate corpus_size kept
  target=$(basename "$executable")
  name=${target#fuzz_}
  work=$build_dir/fuzz/$name
  seeds=$work/seeds
  corpus=$work/corpus
  artifacts=$work/artifacts
  mkdir -p "$corpus" "$artifacts"

  # The seeds, copied: libFuzzer only reads them, but the repository's own
  # files are never handed to it.
  rm -rf "$seeds"
  mkdir -p "$seeds"
  if [[ -d $fuzz_source_dir/corpus/$name ]]; then
    cp -R "$fuzz_source_dir/corpus/$name/." "$seeds/"
  else
    echo "$target: warning: no seed corpus tests/fuzz/corpus/$name/, starting from an empty one"
  fi
  flags=("${default_flags[@]}" "-artifact_prefix=$artifacts/")
  if [[ -f $fuzz_source_dir/$name.dict ]]; then
    flags+=("-dict=$fuzz_source_dir/$name.dict")
  fi
  if [[ -f $fuzz_source_dir/$name.options ]]; then
    mapfile -t extra < <(sed 's/#.*//' "$fuzz_source_dir/$name.options" | tr -s ' \t' '\n' | grep -v '^$')
    flags+=("${extra[@]}")
  fi

  seed_count=$(find "$seeds" -type f | wc -l)
  if ! "$executable" "${flags[@]}" -runs=0 "$seeds" >"$work/seeds.log" 2>&1; then
    report_failure "$target" "$work/seeds.log" "on its seed corpus ($seed_count seeds)" \
      "$fuzz_source_dir/corpus/$name"
    return 1
  fi
  echo "$target: $seed_count seeds pass"
  [[ $seconds -eq 0 ]] && return 0

  # New inputs go to the first directory, $corpus; the seeds are read too.
  start=$(date +%s.%N)
  status=0
  "$executable" "${flags[@]}" -max_total_time="$seconds" "$corpus" "$seeds" >"$work/fuzz.log" 2>&1 || status=$?
  elapsed=$(awk -v from="$start" -v to="$(date +%s.%N)" 'BEGIN { print to - from }')
  if [[ $status -ne 0 ]]; then
    report_failure "$target" "$work/fuzz.log" "after $(printf '%.0f' "$elapsed") s (exit status $status)"
    return 1
  fi
  # Keep a minimal corpus: the inputs of $corpus that add coverage beyond
  # the seeds (-merge=1 keeps the coverage of all, in fewer files).
  rm -rf "$work/merged"
  mkdir "$work/merged"
  if "$executable" "${flags[@]}" -merge=1 "$work/merged" "$corpus" >"$work/merge.log" 2>&1; then
    rm -rf "$corpus"
    mv "$work/merged" "$corpus"
  else
    echo "$target: warning: merging the corpus failed, kept as it was (see $work/merge.log)"
  fi
  executions=$(stat_of "$work/fuzz.log" number_of_executed_units)
  rate=$(stat_of "$work/fuzz.log" average_exec_per_sec)
  # The last status line's "corp: <inputs>/<bytes>".
  corpus_size=$(sed -n 's/.* corp: \([0-9]*\)\/\([0-9]*[a-zA-Z]*\) .*/\1 inputs, \2/p' "$work/fuzz.log" | tail -n 1)
  kept=$(find "$corpus" -type f | wc -l)
  printf '%s: %s executions in %.0f s (%s exec/s), corpus %s (%s kept in %s), no crash\n' \
    "$target" "$executions" "$elapsed" "$rate" "${corpus_size:-?}" "$kept" "${corpus#"$source_dir"/}"
}

# The targets run side by side, FUZZ_JOBS at once (default: one per CPU),
# each into its own report, printed in order once all have ended.
jobs_max=${FUZZ_JOBS:-$(nproc)}
echo "fuzz.sh: ${#targets[@]} target(s), $seconds s each after their seeds, $jobs_max at once"
pids=()
reports=()
for executable in "${targets[@]}"; do
  while [[ $(jobs -rp | wc -l) -ge $jobs_max ]]; do
    wait -n || true
  done
  report=$build_dir/fuzz/$(basename "$executable").report
  mkdir -p "$build_dir/fuzz"
  fuzz_target "$executable" >"$report" 2>&1 &
  pids+=($!)
  reports+=("$report")
done
failed=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed=1
  cat "${reports[$i]}"
done

if [[ $failed -ne 0 ]]; then
  echo "fuzz.sh: a target failed (see above)"
  exit 1
fi
