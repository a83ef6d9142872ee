#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Soak test of examples/offload_server: runs `offload_server serve` on
# 127.0.0.1 with a small pool and queue, drives it for SECONDS with mixed
# traffic from bounded client loops (valid requests of varying cost,
# malformed requests, garbage bytes, slow and idle clients, clients that
# vanish, periodic overload bursts), samples the process every few seconds,
# and checks at the end that
#   - RSS, open fds and threads stayed flat,
#   - every request the server accepted ended in a response (the client's
#     own counts against the server's /metrics ledger),
#   - the server shuts down cleanly on SIGTERM.
# Usage:
#   soak-server.sh SERVER_BINARY SECONDS      (SECONDS >= 40)
# Environment: SOAK_DIR, the work directory for the samples (samples.csv),
# the client logs and the server's output (default: a new mktemp directory).
# Prints a summary table; exits 1 if a check failed, 2 on a bad command line.
# Tools: bash 5, curl, coreutils; raw requests go through bash's /dev/tcp.
set -euo pipefail
# (pipefail: never pipe into `grep -q`, which may exit before the writer is
# done and fail the pipeline with SIGPIPE; grep a here-string instead.)
export LC_ALL=C

usage() {
  echo "usage: soak-server.sh SERVER_BINARY SECONDS   (SECONDS >= 40; env SOAK_DIR: work directory)" >&2
  exit 2
}
(($# == 2)) || usage
SERVER=$1
DURATION=$2
[[ -x "$SERVER" ]] || {
  echo "soak-server.sh: $SERVER is not an executable" >&2
  usage
}
if ! [[ "$DURATION" =~ ^[0-9]+$ ]] || ((DURATION < 40)); then usage; fi

# --- configuration ------------------------------------------------------------
POOL_THREADS=2         # pool threads (core = max)
QUEUE=4                # the pool's bounded queue: small, so bursts get 503
IO_THREADS=2           # io_context threads
HEADER_TIMEOUT_MS=2000 # time a client has to send a whole request
IDLE_TIMEOUT_MS=5000   # keep-alive idle time before the server closes
SAMPLE_EVERY=5         # seconds between samples
OVERLOAD_EVERY=30      # an overload phase starts every OVERLOAD_EVERY s ...
OVERLOAD_FOR=6         # ... and lasts OVERLOAD_FOR s
OVERLOAD_CLIENTS=12    # concurrent clients of expensive requests during a phase
CURL_MAX_TIME=30       # per transfer
FLOOD_CONNECTIONS=100  # idle connections opened at once in each overload phase
SLOW_READER_BATCH=273  # pipelined GET /metrics in one 8 KiB write (the slow reader's batch)
SLOW_READER_BATCHES=8  # at most this many batches
RAW_READ_TIMEOUT=15    # seconds a raw client waits for each line of an answer
GRACE=120              # seconds the clients have to stop after the deadline
SHUTDOWN_LIMIT=30      # seconds from SIGTERM to the exit
SHUTDOWN_IDLE=4        # keep-alive connections idle at SIGTERM
# Warm-up: the first tenth of the run, 10 to 60 s; not compared for flatness.
WARMUP=$((DURATION / 10 < 10 ? 10 : (DURATION / 10 > 60 ? 60 : DURATION / 10)))
# Tolerances of the flatness checks (medians of the last quarter of the
# samples after warm-up against the first quarter).
RSS_TOLERANCE_KB=8192  # RSS may grow by less than 8 MiB
ANON_TOLERANCE_KB=4096 # RssAnon (heap, stacks) by less than 4 MiB
FD_TOLERANCE=20        # fds in the load phases (not overload) may differ by this many
STRAY_FD_TOLERANCE=3   # fds not held by an open connection may differ by this many
EXPECTED_THREADS=$((1 + IO_THREADS + POOL_THREADS))

# Primes below n, to check the /work answers.
declare -A PRIMES=([100]=25 [1000]=168 [10000]=1229 [100000]=9592 [1000000]=78498 [2000000]=148933
  [5000000]=348513 [10000000]=664579 [20000000]=1270607 [50000000]=3001134 [100000000]=5761455)
# shellcheck disable=SC2034 # read through pick's nameref
CHEAP_N=(100 1000 10000 100000 1000000 2000000)
# shellcheck disable=SC2034
EXPENSIVE_N=(20000000 50000000 100000000)

SOAK_DIR=${SOAK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/soak-server.XXXXXX")}
mkdir -p "$SOAK_DIR/clients" "$SOAK_DIR/tmp"
rm -f "$SOAK_DIR"/clients/*.log "$SOAK_DIR/samples.csv" "$SOAK_DIR/overload-phases.txt"
CSV=$SOAK_DIR/samples.csv
echo "soak: work directory $SOAK_DIR (samples: $CSV)"

SERVER_PID=""
CLIENT_PIDS=()
cleanup() {
  local pid
  for pid in "${CLIENT_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

# The clients and their ledger, then the sampler: scripts/soak-server/.
SOAK_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/soak-server
# shellcheck source=soak-server/clients.sh
source "$SOAK_LIB/clients.sh"
# shellcheck source=soak-server/sampler.sh
source "$SOAK_LIB/sampler.sh"

# --- checks -----------------------------------------------------------------------
CHECK_NAMES=()
CHECK_RESULTS=()
FAILED=0
# check NAME CONDITION_AS_EXIT_STATUS...: runs the command, records PASS/FAIL.
check() {
  local name=$1
  shift
  if "$@"; then
    CHECK_RESULTS+=(PASS)
  else
    CHECK_RESULTS+=(FAIL)
    FAILED=$((FAILED + 1))
  fi
  CHECK_NAMES+=("$name")
}
is() { [[ "$1" == "$2" ]]; }
at_most() { [[ "$1" =~ ^-?[0-9]+$ ]] && (($1 <= $2)); }
at_least() { [[ "$1" =~ ^-?[0-9]+$ ]] && (($1 >= $2)); }

# --- start the server -------------------------------------------------------------
"$SERVER" serve --port 0 --threads "$POOL_THREADS" --queue "$QUEUE" --io-threads "$IO_THREADS" \
  --header-timeout-ms "$HEADER_TIMEOUT_MS" --idle-timeout-ms "$IDLE_TIMEOUT_MS" \
  >"$SOAK_DIR/server.out" 2>"$SOAK_DIR/server.err" &
SERVER_PID=$!
PORT=""
for _ in $(seq 300); do
  PORT=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$SOAK_DIR/server.out")
  [[ -n "$PORT" ]] && break
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.1
done
if [[ -z "$PORT" ]]; then
  echo "soak: the server did not print its port" >&2
  cat "$SOAK_DIR/server.out" "$SOAK_DIR/server.err" >&2
  exit 1
fi
open_log main
# Before any client: the baseline of fds (the listening socket, the reactor's
# descriptors, the signal pipe, what the server inherited).
proc_sample
BASELINE_FDS=$FDS
ready=no
for _ in $(seq 100); do
  out=$(curl -s -o /dev/null --max-time 5 -w '%{http_code} %{num_connects}' "$(url /healthz)" 2>/dev/null) || true
  read -r code conns <<<"${out:-000 0}"
  record probe 200 "$code" "${conns:-0}"
  [[ "$code" == 200 ]] && ready=yes && break
  sleep 0.1
done
if [[ "$ready" != yes ]]; then
  echo "soak: the server does not answer /healthz" >&2
  exit 1
fi
echo "soak: server pid $SERVER_PID on 127.0.0.1:$PORT (pool $POOL_THREADS threads, queue $QUEUE," \
  "io threads $IO_THREADS, header timeout $HEADER_TIMEOUT_MS ms, idle timeout $IDLE_TIMEOUT_MS ms); $DURATION s," \
  "warm-up $WARMUP s, overload $OVERLOAD_FOR s every $OVERLOAD_EVERY s with $OVERLOAD_CLIENTS clients"

START=$EPOCHSECONDS
DEADLINE=$((START + DURATION))
echo "$CSV_COLUMNS" >"$CSV"
sample start

# --- load ---------------------------------------------------------------------------
loop_valid 1 &
CLIENT_PIDS+=($!)
loop_valid 2 &
CLIENT_PIDS+=($!)
loop_bad &
CLIENT_PIDS+=($!)
loop_slow 1 &
CLIENT_PIDS+=($!)
loop_slow 2 &
CLIENT_PIDS+=($!)
loop_overload &
CLIENT_PIDS+=($!)
CLIENT_LOOPS=${#CLIENT_PIDS[@]}

next_sample=$((START + SAMPLE_EVERY))
server_alive=yes
while ((EPOCHSECONDS < DEADLINE)); do
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    server_alive=no
    echo "soak: the server exited during the run" >&2
    break
  fi
  if ((EPOCHSECONDS >= next_sample)); then
    if overload_window $((EPOCHSECONDS - START)); then sample overload; else sample load; fi
    next_sample=$((next_sample + SAMPLE_EVERY))
  fi
  sleep 0.5
done

# --- stop the clients, let the connections drain -------------------------------------
stopped_at=$EPOCHSECONDS
clients_stopped=no
while ((EPOCHSECONDS - stopped_at < GRACE)); do
  alive=0
  for pid in "${CLIENT_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=$((alive + 1)); done
  if ((alive == 0)); then
    clients_stopped=yes
    break
  fi
  sleep 0.5
done
for pid in "${CLIENT_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
wait "${CLIENT_PIDS[@]}" 2>/dev/null || true
CLIENT_PIDS=()
echo "soak: clients stopped $((EPOCHSECONDS - stopped_at)) s after the deadline"
# Connections close within the idle timeout and the one-second lingering
# close; until then /metrics shows more open than its own.
drained=no
for _ in $(seq 60); do
  fetch_metrics drain || true
  if [[ "${M[connections_open]:-}" == 1 && "${M[in_flight]:-}" == 1 ]]; then
    drained=yes
    break
  fi
  sleep 0.5
done
# fds back to the baseline once the last /metrics connection has closed too.
for _ in $(seq 50); do
  proc_sample
  [[ "$FDS" == "$BASELINE_FDS" ]] && break
  sleep 0.2
done
sample end

# Keep-alive connections left idle after a request when SIGTERM comes: the
# server must close them at once (not after its idle timeout), unanswered.
IDLE_AT_SHUTDOWN=()
for _ in $(seq "$SHUTDOWN_IDLE"); do
  if raw_open; then
    raw_send 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'
    raw_read_response
    record healthz-then-idle 200 "$RESP_CODE" 1
    IDLE_AT_SHUTDOWN+=("$RAW_FD")
  else
    record healthz-then-idle 200 000 0
  fi
done

# --- the ledger -----------------------------------------------------------------------
# Client-side counts, from every log so far (the final /metrics page below
# is not in them: the server counts a response once it has produced it, so
# that page does not count itself either).
declare -A C      # responses received, by status code (and 000 / badbody / none / unread)
declare -A KIND_N # requests, by kind
declare -A KIND_ANSWER
OVERLOAD_PHASES=$(grep -c '^phase ' "$SOAK_DIR/overload-phases.txt" 2>/dev/null || true)
OVERLOAD_PHASES=${OVERLOAD_PHASES:-0}
read -r CLIENT_REQUESTS CLIENT_CONNECTIONS CLIENT_MISMATCHES WORK_200 ABANDONED LOOPS_ENDED CUT \
  < <(awk '
    $1 == "end" { ended++; next }
    NF == 4 {
      requests++; connections += $4
      if ($1 ~ /^work/ && $3 == "200") work200++
      if ($1 == "work-abandoned") abandoned++
      if ($1 == "metrics-cut") cut++
      ok = 0; n = split($2, allowed, "|")
      for (i = 1; i <= n; i++) if (allowed[i] == $3) ok = 1
      if ($2 == "err" && $3 ~ /^(4[0-9][0-9]|501|505)$/) ok = 1
      if (!ok) mismatches++
    }
    END { printf "%d %d %d %d %d %d %d\n", requests, connections, mismatches, work200, abandoned, ended, cut }
  ' "$SOAK_DIR"/clients/*.log)
while read -r key value; do C[$key]=$value; done < <(awk 'NF == 4 { n[$3]++ } END { for (k in n) print k, n[k] }' \
  "$SOAK_DIR"/clients/*.log)
while read -r kind count answers; do
  KIND_N[$kind]=$count
  KIND_ANSWER[$kind]=$answers
done < <(awk 'NF == 4 { n[$1]++; a[$1 " " $3]++ }
  END {
    for (k in n) {
      s = ""
      for (ka in a) { split(ka, p, " "); if (p[1] == k) s = s (s == "" ? "" : ",") p[2] "=" a[ka] }
      print k, n[k], s
    }
  }' "$SOAK_DIR"/clients/*.log | sort)
# 503s per overload phase: every phase must have made the pool refuse.
PHASES_WITH_503=$(awk 'NF == 4 && $3 == "503" {
    f = FILENAME; sub(/.*\//, "", f)
    if (f ~ /^overload[0-9]+-/) { sub(/^overload/, "", f); sub(/-.*/, "", f); p[f] = 1 }
  }
  END { n = 0; for (k in p) n++; print n }' "$SOAK_DIR"/clients/*.log)

ledger_ok=no
if fetch_metrics final unlogged; then ledger_ok=yes; fi
cp "$SOAK_DIR/metrics.txt" "$SOAK_DIR/metrics-final.txt"
S_TOTAL=NA
CODES=(200 400 404 405 408 413 414 431 500 501 503 505)
if [[ "$ledger_ok" == yes ]]; then
  S_TOTAL=0
  for code in "${CODES[@]}" other; do S_TOTAL=$((S_TOTAL + M["r$code"])); done
  A200=$((M[completed] - WORK_200))
  A503=$((M[rejected] - ${C[503]:-0}))
fi
record final-metrics 200 "$LAST_METRICS_CODE" "$LAST_METRICS_CONNS"
CLIENT_CONNECTIONS=$((CLIENT_CONNECTIONS + LAST_METRICS_CONNS))
CLIENT_ANSWERED=0
for code in "${CODES[@]}"; do CLIENT_ANSWERED=$((CLIENT_ANSWERED + ${C[$code]:-0})); done

# --- shutdown -------------------------------------------------------------------------
kill -0 "$SERVER_PID" 2>/dev/null || server_alive=no
kill -TERM "$SERVER_PID" 2>/dev/null || true
sigterm_at=$(date +%s%N)
for _ in $(seq $((SHUTDOWN_LIMIT * 10))); do
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.1
done
exited_in_time=yes
if kill -0 "$SERVER_PID" 2>/dev/null; then
  exited_in_time=no
  kill -KILL "$SERVER_PID" 2>/dev/null || true
fi
exit_code=0
wait "$SERVER_PID" || exit_code=$?
shutdown_ms=$((($(date +%s%N) - sigterm_at) / 1000000))
SERVER_PID=""
IDLE_CLOSED=0
for RAW_FD in "${IDLE_AT_SHUTDOWN[@]}"; do
  c=""
  # EOF (status 1, nothing read): closed by the server without an answer
  IFS= read -r -N 1 -t 1 c <&"$RAW_FD" 2>/dev/null && c=${c:-x}
  [[ -z "$c" ]] && IDLE_CLOSED=$((IDLE_CLOSED + 1))
  raw_close
done
FINAL_LINE=$(grep '^final: ' "$SOAK_DIR/server.out" || true)
F_TASKS=NA F_COMPLETED=NA F_FAILED=NA F_CANCELLED=NA F_REJECTED=NA F_RESPONSES=NA F_HTTP_REJECTED=NA
if [[ "$FINAL_LINE" =~ tasks\ ([0-9]+)\ \(completed\ ([0-9]+),\ failed\ ([0-9]+),\ cancelled\ ([0-9]+),.*\),\ rejected\ ([0-9]+)\;\ responses\ ([0-9]+),\ rejected\ ([0-9]+)$ ]]; then
  F_TASKS=${BASH_REMATCH[1]} F_COMPLETED=${BASH_REMATCH[2]} F_FAILED=${BASH_REMATCH[3]}
  F_CANCELLED=${BASH_REMATCH[4]} F_REJECTED=${BASH_REMATCH[5]} F_RESPONSES=${BASH_REMATCH[6]}
  F_HTTP_REJECTED=${BASH_REMATCH[7]}
fi

# --- flatness -------------------------------------------------------------------------
# The samples after warm-up (steady.csv), and those of them outside the
# overload phases (steady-load.csv).
STEADY=$SOAK_DIR/steady.csv
awk -F, -v w="$WARMUP" 'NR > 1 && $2 != "start" && $2 != "end" && $1 >= w' "$CSV" >"$STEADY"
awk -F, '$2 == "load"' "$STEADY" >"$SOAK_DIR/steady-load.csv"
STEADY_N=$(wc -l <"$STEADY")
QUARTER=$(((STEADY_N + 3) / 4))
LOAD_N=$(wc -l <"$SOAK_DIR/steady-load.csv")
LOAD_QUARTER=$(((LOAD_N + 3) / 4))
# median COLUMN FIRST LAST [FILE]: the median of a CSV column over rows
# FIRST..LAST of FILE (default steady.csv).
median() {
  awk -F, -v c="$1" -v a="$2" -v b="$3" 'NR >= a && NR <= b && $c != "NA" { print $c }' "${4:-$STEADY}" | sort -n |
    awk '{ v[NR] = $1 } END { if (NR == 0) print "NA"; else if (NR % 2) print v[(NR + 1) / 2]; else print int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
column_stat() { # column_stat COLUMN: start end min max over all rows
  awk -F, -v c="$1" 'NR == 2 { s = $c } NR > 1 && $c != "NA" { e = $c; if (min == "" || $c < min) min = $c; if (max == "" || $c > max) max = $c }
    END { print s, e, min, max }' "$CSV"
}
RSS_FIRST=NA RSS_LAST=NA ANON_FIRST=NA ANON_LAST=NA FDS_FIRST=NA FDS_LAST=NA STRAY_FIRST=NA STRAY_LAST=NA
if ((STEADY_N >= 4)); then
  RSS_FIRST=$(median 3 1 "$QUARTER")
  RSS_LAST=$(median 3 $((STEADY_N - QUARTER + 1)) "$STEADY_N")
  ANON_FIRST=$(median 23 1 "$QUARTER")
  ANON_LAST=$(median 23 $((STEADY_N - QUARTER + 1)) "$STEADY_N")
  STRAY_FIRST=$(median 22 1 "$QUARTER")
  STRAY_LAST=$(median 22 $((STEADY_N - QUARTER + 1)) "$STEADY_N")
fi
if ((LOAD_N >= 4)); then
  FDS_FIRST=$(median 4 1 "$LOAD_QUARTER" "$SOAK_DIR/steady-load.csv")
  FDS_LAST=$(median 4 $((LOAD_N - LOAD_QUARTER + 1)) "$LOAD_N" "$SOAK_DIR/steady-load.csv")
fi
read -r THREADS_MIN THREADS_MAX < <(awk -F, '$5 != "NA" { if (min == "" || $5 < min) min = $5; if (max == "" || $5 > max) max = $5 } END { print min, max }' "$STEADY")
read -r RSS_START RSS_END RSS_MIN RSS_MAX < <(column_stat 3)
read -r ANON_START ANON_END ANON_MIN ANON_MAX < <(column_stat 23)
read -r FDS_START FDS_END FDS_MIN FDS_MAX < <(column_stat 4)
read -r THR_START THR_END THR_MIN THR_MAX < <(column_stat 5)
END_FDS=$FDS

# --- checks ---------------------------------------------------------------------------
diff_or_na() { if [[ "$1" =~ ^[0-9]+$ && "$2" =~ ^[0-9]+$ ]]; then echo $(($2 - $1)); else echo NA; fi; }
RSS_GROWTH=$(diff_or_na "$RSS_FIRST" "$RSS_LAST")
ANON_GROWTH=$(diff_or_na "$ANON_FIRST" "$ANON_LAST")
FDS_DRIFT=$(diff_or_na "$FDS_FIRST" "$FDS_LAST")
FDS_DRIFT_ABS=${FDS_DRIFT#-}
STRAY_DRIFT=$(diff_or_na "$STRAY_FIRST" "$STRAY_LAST")
STRAY_DRIFT_ABS=${STRAY_DRIFT#-}

check "server alive until SIGTERM" is "$server_alive" yes
EXPECTED_ENDS=$((CLIENT_LOOPS + OVERLOAD_PHASES * (OVERLOAD_CLIENTS + 1)))
check "client loops ended by themselves at the deadline: $LOOPS_ENDED of $EXPECTED_ENDS ($CLIENT_LOOPS loops, $OVERLOAD_PHASES x $OVERLOAD_CLIENTS overload clients and a flood)" \
  is "$clients_stopped/$LOOPS_ENDED" "yes/$EXPECTED_ENDS"
check "enough samples after the ${WARMUP} s warm-up to compare quarters ($STEADY_N >= 4)" at_least "$STEADY_N" 4
check "RSS: last-quarter median - first-quarter median = ${RSS_GROWTH} kB < $RSS_TOLERANCE_KB kB" \
  at_most "$RSS_GROWTH" $((RSS_TOLERANCE_KB - 1))
check "RssAnon: last-quarter median - first-quarter median = ${ANON_GROWTH} kB < $ANON_TOLERANCE_KB kB" \
  at_most "$ANON_GROWTH" $((ANON_TOLERANCE_KB - 1))
check "fds in the load phases: |last-quarter median $FDS_LAST - first-quarter median $FDS_FIRST| <= $FD_TOLERANCE" \
  at_most "$FDS_DRIFT_ABS" "$FD_TOLERANCE"
check "fds beyond the open connections: |last-quarter median $STRAY_LAST - first-quarter median $STRAY_FIRST| <= $STRAY_FD_TOLERANCE" \
  at_most "$STRAY_DRIFT_ABS" "$STRAY_FD_TOLERANCE"
check "fds after the clients closed: $END_FDS = the baseline before any client ($BASELINE_FDS)" is "$END_FDS" "$BASELINE_FDS"
check "threads after warm-up: min $THREADS_MIN = max $THREADS_MAX = 1 main + $IO_THREADS io + $POOL_THREADS pool" \
  is "$THREADS_MIN/$THREADS_MAX" "$EXPECTED_THREADS/$EXPECTED_THREADS"
check "connections drained: /metrics shows only its own connection and request" is "$drained" yes
check "every overload phase got 503s ($PHASES_WITH_503 of $OVERLOAD_PHASES phases)" \
  is "$PHASES_WITH_503" "$OVERLOAD_PHASES"
check "overload phases ran (${OVERLOAD_PHASES:-0} >= 1)" at_least "${OVERLOAD_PHASES:-0}" 1
check "client: every answer as expected, every 200 from /work with the right count (mismatches: $CLIENT_MISMATCHES)" \
  is "$CLIENT_MISMATCHES" 0
check "client: no request that expected an answer went without one (${C[000]:-0} without)" is "${C[000]:-0}" 0
check "final /metrics page fetched" is "$ledger_ok" yes
if [[ "$ledger_ok" == yes ]]; then
  check "server: before SIGTERM, open connections ${M[connections_open]} = the final page's + $SHUTDOWN_IDLE idle, in flight ${M[in_flight]} = 1" \
    is "${M[connections_open]}/${M[in_flight]}" "$((1 + SHUTDOWN_IDLE))/1"
  check "server: pool queue ${M[queued]} and active ${M[active]} are 0 at the end" is "${M[queued]}/${M[active]}" 0/0
  check "server: pool tasks ${M[tasks]} = completed ${M[completed]} + failed ${M[failed]} + cancelled ${M[cancelled]}" \
    is "${M[tasks]}" $((M[completed] + M[failed] + M[cancelled]))
  check "server: no task failed or was cancelled (${M[failed]}, ${M[cancelled]})" is "${M[failed]}/${M[cancelled]}" 0/0
  check "server: no 500 and no uncounted status (${M[r500]}, ${M[rother]})" is "${M[r500]}/${M[rother]}" 0/0
  check "server: 503 sent ${M[r503]} = /work rejected ${M[http_rejected]} = pool rejected ${M[rejected]}" \
    is "${M[r503]}/${M[http_rejected]}" "${M[rejected]}/${M[rejected]}"
  for code in 400 404 405 408 413 414 431 501 505; do
    check "ledger: $code sent by the server ${M[r$code]} = received by the clients ${C[$code]:-0}" \
      is "${M[r$code]}" "${C[$code]:-0}"
  done
  check "ledger: abandoned /work requests $ABANDONED = completed unread $A200 + refused unread $A503 (both >= 0)" \
    is "$((A200 >= 0 && A503 >= 0 ? A200 + A503 : -1))" "$ABANDONED"
  check "ledger: 200 sent ${M[r200]} = received ${C[200]:-0} + abandoned completed $A200 + cut by a write timeout $CUT" \
    is "${M[r200]}" $((${C[200]:-0} + A200 + CUT))
  check "ledger: 503 sent ${M[r503]} = received ${C[503]:-0} + abandoned refused $A503" \
    is "${M[r503]}" $((${C[503]:-0} + A503))
  check "ledger: connections accepted ${M[connections_total]} = opened by the clients $CLIENT_CONNECTIONS" \
    is "${M[connections_total]}" "$CLIENT_CONNECTIONS"
fi
check "shutdown: exited within $SHUTDOWN_LIMIT s of SIGTERM ($shutdown_ms ms)" is "$exited_in_time" yes
check "shutdown: exit code $exit_code = 0" is "$exit_code" 0
check "shutdown: the $SHUTDOWN_IDLE idle keep-alive connections closed unanswered ($IDLE_CLOSED), sooner than the idle timeout ($shutdown_ms < $IDLE_TIMEOUT_MS ms)" \
  is "$IDLE_CLOSED/$((shutdown_ms < IDLE_TIMEOUT_MS))" "$SHUTDOWN_IDLE/1"
check "shutdown: final stats line printed, pool TERMINATED" is "${FINAL_LINE:0:35}" "final: pool 'offload' TERMINATED: s"
check "shutdown: final tasks $F_TASKS = completed $F_COMPLETED + failed $F_FAILED + cancelled $F_CANCELLED" \
  is "$F_TASKS" "$([[ "$F_COMPLETED" =~ ^[0-9]+$ ]] && echo $((F_COMPLETED + F_FAILED + F_CANCELLED)))"
if [[ "$ledger_ok" == yes ]]; then
  check "shutdown: final completed $F_COMPLETED, rejected $F_REJECTED = the last /metrics page's" \
    is "$F_COMPLETED/$F_REJECTED/$F_HTTP_REJECTED" "${M[completed]}/${M[rejected]}/${M[http_rejected]}"
  check "shutdown: final responses $F_RESPONSES = the last page's $S_TOTAL + that page itself" \
    is "$F_RESPONSES" $((S_TOTAL + 1))
  check "shutdown: final responses $F_RESPONSES = answers received $((CLIENT_ANSWERED + 1)) + abandoned $ABANDONED + cut $CUT" \
    is "$F_RESPONSES" $((CLIENT_ANSWERED + 1 + ABANDONED + CUT))
fi
check "server wrote nothing to stderr" is "$(head -c 2000 "$SOAK_DIR/server.err")" ""

# --- summary --------------------------------------------------------------------------
echo
echo "== soak of offload_server: $DURATION s, $CLIENT_REQUESTS requests, $CLIENT_CONNECTIONS connections =="
printf '%-10s %10s %10s %10s %10s\n' "" start end min max
printf '%-10s %10s %10s %10s %10s\n' "RSS kB" "$RSS_START" "$RSS_END" "$RSS_MIN" "$RSS_MAX"
printf '%-10s %10s %10s %10s %10s\n' "RssAnon kB" "$ANON_START" "$ANON_END" "$ANON_MIN" "$ANON_MAX"
printf '%-10s %10s %10s %10s %10s\n' fds "$FDS_START" "$FDS_END" "$FDS_MIN" "$FDS_MAX"
printf '%-10s %10s %10s %10s %10s\n' threads "$THR_START" "$THR_END" "$THR_MIN" "$THR_MAX"
echo "(after the ${WARMUP} s warm-up: RSS median first quarter $RSS_FIRST kB, last quarter $RSS_LAST kB;" \
  "RssAnon $ANON_FIRST -> $ANON_LAST kB;" \
  "fds in the load phases $FDS_FIRST -> $FDS_LAST; fds beyond the open connections $STRAY_FIRST -> $STRAY_LAST;" \
  "baseline fds $BASELINE_FDS)"
echo
printf '%-20s %9s  %s\n' "requests by kind" sent "answers (status=count)"
for kind in $(printf '%s\n' "${!KIND_N[@]}" | sort); do
  printf '%-20s %9s  %s\n' "$kind" "${KIND_N[$kind]}" "${KIND_ANSWER[$kind]}"
done
echo
printf '%-20s %12s %12s\n' "responses by status" "client got" "server sent"
for code in "${CODES[@]}" other; do
  printf '%-20s %12s %12s\n' "$code" "${C[$code]:-0}" "${M[r$code]:-NA}"
done
for key in 000 badbody none unread; do printf '%-20s %12s %12s\n' "$key" "${C[$key]:-0}" -; done
echo "(client counts exclude the final /metrics page; server counts are from that page;" \
  "'unread': requests whose client left without reading, $ABANDONED of them /work)"
echo "pool: tasks ${M[tasks]:-NA}, completed ${M[completed]:-NA}, rejected ${M[rejected]:-NA}," \
  "failed ${M[failed]:-NA}, cancelled ${M[cancelled]:-NA}; /work 200s received $WORK_200"
echo "server: $FINAL_LINE"
echo
for i in "${!CHECK_NAMES[@]}"; do printf '%-4s %s\n' "${CHECK_RESULTS[$i]}" "${CHECK_NAMES[$i]}"; done
echo
echo "soak: ${#CHECK_NAMES[@]} checks, $FAILED failed; samples in $CSV"
((FAILED == 0))
