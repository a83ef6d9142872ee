#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Integration test of examples/offload_server with Debian's curl as the client
# (and bash's /dev/tcp for the requests curl will not send). Usage:
#   offload_server_test.sh path/to/offload_server
# Starts `offload_server serve --port 0` with small pools and checks: results,
# /healthz, /metrics, 503 + Retry-After under overload while accepted requests
# complete correctly, every bad input's status code, the header and idle
# timeouts, a client vanishing mid-request, graceful shutdown under load, and
# bad command lines. Prints each failed check; exits 1 if any failed.
set -uo pipefail
# (pipefail: never pipe into `grep -q`, which may exit before the writer is
# done and fail the pipeline with SIGPIPE; grep a here-string instead.)

SERVER=${1:?usage: offload_server_test.sh path/to/offload_server}
WORK=$(mktemp -d)
FAILURES=0
CHECKS=0
SERVER_PID=""
PORT=""

cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -KILL "$SERVER_PID" 2>/dev/null; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

pass() { CHECKS=$((CHECKS + 1)); }
fail() {
  CHECKS=$((CHECKS + 1))
  FAILURES=$((FAILURES + 1))
  echo "FAIL: $*"
}
# expect NAME ACTUAL EXPECTED
expect() { if [[ "$2" == "$3" ]]; then pass; else fail "$1: got '$2', expected '$3'"; fi; }

# start_server NAME ARGS...: runs the server, waits for its port (30 s).
start_server() {
  local name=$1
  shift
  "$SERVER" serve --port 0 "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  SERVER_PID=$!
  for _ in $(seq 300); do
    PORT=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$WORK/$name.out")
    [[ -n "$PORT" ]] && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL: server $name did not print its port"
  cat "$WORK/$name.out" "$WORK/$name.err"
  exit 1
}

# stop_server NAME [signalled]: SIGTERM (unless the caller sent it already:
# a second one may land after the server's signal handler is gone, while it
# is exiting), then wait (60 s) for a clean exit.
stop_server() {
  local name=$1 code
  if [[ "${2:-}" != signalled ]] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -TERM "$SERVER_PID"; fi
  for _ in $(seq 600); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    fail "$name: still running 60 s after SIGTERM"
    kill -KILL "$SERVER_PID"
  fi
  wait "$SERVER_PID"
  code=$?
  expect "$name: exit code after SIGTERM" "$code" 0
  grep -q "^final: pool 'offload' TERMINATED" "$WORK/$name.out" || fail "$name: no final stats line: $(cat "$WORK/$name.out")"
  if [[ -s "$WORK/$name.err" ]]; then fail "$name: wrote to stderr: $(head -c 2000 "$WORK/$name.err")"; fi
  SERVER_PID=""
}

url() { echo "http://127.0.0.1:$PORT$1"; }

# status PATH [CURL ARGS...]: the status code of one request.
status() {
  local path=$1
  shift
  curl -s -o /dev/null -w '%{http_code}' --max-time 60 "$@" "$(url "$path")"
}

# metric NAME_WITH_LABELS: its value on /metrics now.
metric() {
  curl -s --max-time 60 "$(url /metrics)" | awk -v name="$1" '$1 == name { print $2 }'
}

# raw BYTES: sends BYTES (printf %b escapes) on a new connection and prints
# the status code of the answer (empty if the connection closed silently).
raw() {
  local fd line
  exec {fd}<>"/dev/tcp/127.0.0.1/$PORT" || return 1
  printf '%b' "$1" >&"$fd"
  IFS= read -r -t 30 line <&"$fd"
  exec {fd}>&-
  line=${line%$'\r'}
  echo "${line#HTTP/1.1 }" | cut -d' ' -f1
}

# --- server A: one thread, a queue of one -----------------------------------
start_server a --threads 1 --queue 1 --io-threads 2 --header-timeout-ms 300 --idle-timeout-ms 1000

echo "results"
for pair in 1:0 2:0 3:1 100:25 1000:168 1000000:78498; do
  n=${pair%%:*}
  primes=${pair#*:}
  body=$(curl -s --max-time 60 "$(url "/work?n=$n")")
  expect "/work?n=$n primes" "$(echo "$body" | sed -n 's/.*"primes":\([0-9]*\).*/\1/p')" "$primes"
done
expect "/healthz body" "$(curl -s --max-time 60 "$(url /healthz)")" ok
expect "/healthz status" "$(status /healthz)" 200
expect "HEAD /healthz status" "$(status /healthz -I)" 200

echo "metrics"
page=$(curl -s --max-time 60 "$(url /metrics)")
bad_lines=$(echo "$page" | grep -v '^#' | grep -Ev '^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? ([0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?|\+Inf)$')
expect "/metrics lines that are not 'name{labels} number'" "$bad_lines" ""
for name in coexec_pool_size coexec_pool_active_threads coexec_pool_queue_size coexec_pool_queue_capacity \
  coexec_pool_tasks_total coexec_pool_completed_tasks_total coexec_pool_rejected_tasks_total \
  coexec_pool_failed_tasks_total coexec_pool_cancelled_tasks_total coexec_pool_largest_size \
  coexec_pool_waiting_producers coexec_pool_waited_for_room_tasks_total; do
  grep -q "^# TYPE $name " <<<"$page" || fail "/metrics has no TYPE line for $name"
  grep -Eq "^$name\{pool=\"offload\"\} [0-9]+$" <<<"$page" || fail "/metrics has no numeric sample of $name"
done
expect "queue capacity" "$(echo "$page" | awk '$1 == "coexec_pool_queue_capacity{pool=\"offload\"}" {print $2}')" 1
for name in coexec_pool_queue_wait_seconds coexec_pool_run_time_seconds; do
  grep -q "^# TYPE $name histogram$" <<<"$page" || fail "/metrics has no histogram $name"
  grep -Eq "^${name}_bucket\{pool=\"offload\",le=\"\+Inf\"\} [0-9]+$" <<<"$page" || fail "/metrics has no +Inf bucket of $name"
done
runs_before=$(metric 'coexec_pool_run_time_seconds_count{pool="offload"}')
completed_before=$(metric 'coexec_pool_completed_tasks_total{pool="offload"}')
ok_before=$(metric 'offload_http_responses_total{code="200"}')
curl -s -o /dev/null --max-time 60 "$(url "/work?n=5000")"
completed_after=$(metric 'coexec_pool_completed_tasks_total{pool="offload"}')
ok_after=$(metric 'offload_http_responses_total{code="200"}')
# The worker records the run time once the task has returned, which may be
# after its response went out: wait (up to 5 s) for the sample.
runs_after=$runs_before
for _ in $(seq 50); do
  runs_after=$(metric 'coexec_pool_run_time_seconds_count{pool="offload"}')
  ((runs_after > runs_before)) && break
  sleep 0.1
done
expect "run times recorded after one /work (the server records latency)" "$runs_after" "$((runs_before + 1))"
expect "completed tasks after one /work" "$completed_after" "$((completed_before + 1))"
# A response is counted once sent: each /metrics page shows the ones before
# it. Since ok_before's page: its own response, /work and completed_after's.
expect "200 responses after /work and two /metrics" "$ok_after" "$((ok_before + 3))"
expect "tasks counted as completed" "$completed_before" 6

echo "bad input"
expect "unknown path" "$(status /nope)" 404
expect "--path-as-is dot segments" "$(status /../etc/passwd --path-as-is)" 404
expect "n not a number" "$(status '/work?n=abc')" 400
expect "n zero" "$(status '/work?n=0')" 400
expect "n above the maximum" "$(status '/work?n=100000001')" 400
expect "n negative" "$(status '/work?n=-5')" 400
expect "n missing" "$(status '/work')" 400
expect "n badly escaped" "$(status '/work?n=%zz')" 400
expect "unknown method" "$(status /healthz -X BREW)" 405
allow=$(curl -s -o /dev/null -D - -X DELETE --max-time 60 "$(url /work?n=5)" | tr -d '\r' | sed -n 's/^Allow: //p')
expect "405 Allow header" "$allow" "GET, HEAD"
expect "request line of 10 KB" "$(status "/$(head -c 10000 /dev/zero | tr '\0' a)")" 414
expect "header of 20 KB" "$(status /healthz -H "X-Big: $(head -c 20000 /dev/zero | tr '\0' b)")" 431
head -c 100000 /dev/zero >"$WORK/body"
expect "body of 100 KB" "$(status /healthz -X POST --data-binary @"$WORK/body" -H 'Expect:')" 413
expect "chunked body" "$(status /healthz -X POST -H 'Transfer-Encoding: chunked' -d x)" 501
expect "malformed request line" "$(raw 'GARBAGE\r\n\r\n')" 400
expect "binary junk" "$(raw '\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n')" 400
expect "HTTP/2.0 request line" "$(raw 'GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n')" 505
expect "no Host header" "$(raw 'GET /healthz HTTP/1.1\r\n\r\n')" 400
expect "space before colon" "$(raw 'GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n')" 400

echo "slowloris and vanishing clients"
exec {slow}<>"/dev/tcp/127.0.0.1/$PORT"
printf 'GET /healthz HTTP/1.1\r\nHost: x\r\n' >&"$slow"
started=$(date +%s%N)
answer=$(timeout 30 cat <&"$slow")
closed=$?
elapsed_ms=$((($(date +%s%N) - started) / 1000000))
exec {slow}>&-
expect "unfinished request: status line" "$(echo "$answer" | head -1 | tr -d '\r')" "HTTP/1.1 408 Request Timeout"
expect "unfinished request: connection closed by the server" "$closed" 0
((elapsed_ms >= 250)) && pass || fail "unfinished request answered after $elapsed_ms ms, before the 300 ms header timeout"
exec {idle}<>"/dev/tcp/127.0.0.1/$PORT"
answer=$(timeout 30 cat <&"$idle")
closed=$?
exec {idle}>&-
expect "idle connection: closed by the server" "$closed" 0
expect "idle connection: closed without an answer" "$answer" ""
for _ in 1 2 3; do
  exec {gone}<>"/dev/tcp/127.0.0.1/$PORT"
  printf 'GET /work?n=1000 HTTP/1.1\r\nHo' >&"$gone"
  exec {gone}>&-
done
exec {gone}<>"/dev/tcp/127.0.0.1/$PORT"
printf 'GET /work?n=10000000 HTTP/1.1\r\nHost: x\r\n\r\n' >&"$gone"
exec {gone}>&-
expect "after vanished clients /healthz" "$(status /healthz)" 200
open=""
for _ in $(seq 100); do
  open=$(metric offload_http_connections_open)
  [[ "$open" == 1 ]] && break
  sleep 0.1
done
expect "connections open besides the one asking" "$open" 1
expect "after bad input /work?n=100" "$(curl -s --max-time 60 "$(url /work?n=100)" | sed -n 's/.*"primes":\([0-9]*\).*/\1/p')" 25

echo "overload: 503 with Retry-After, accepted requests still right"
rejected_before=$(metric offload_http_rejected_total)
# pool_shows ACTIVE QUEUED: waits (5 s) until /metrics shows that many
# threads running and tasks queued; prints yes or no.
pool_shows() {
  local page
  for _ in $(seq 500); do
    page=$(curl -s --max-time 60 "$(url /metrics)")
    if grep -q "^coexec_pool_active_threads{pool=\"offload\"} $1\$" <<<"$page" &&
      grep -q "^coexec_pool_queue_size{pool=\"offload\"} $2\$" <<<"$page"; then
      echo yes
      return
    fi
    sleep 0.01
  done
  echo no
}
# A long job: the largest count, repeated until it takes about 2 s in this
# build (70 ms once at -O2, over a second at -O0), so that it outlasts the
# checks below whatever the optimization.
one_ms=$(curl -s --max-time 120 "$(url /work?n=100000000)" | sed -n 's/.*"compute_ms":\([0-9.]*\).*/\1/p')
repeat=$(awk -v ms="$one_ms" 'BEGIN { r = int(2000 / (ms > 0 ? ms : 1)) + 1; print (r > 1000 ? 1000 : r) }')
LONG="/work?n=100000000&repeat=$repeat"
expect "a repeated count gives the same primes" \
  "$(curl -s --max-time 60 "$(url '/work?n=1000&repeat=3')" | sed -n 's/.*"primes":\([0-9]*\).*/\1/p')" 168
expect "repeat=0 refused" "$(curl -s -o /dev/null -w '%{http_code}' "$(url '/work?n=10&repeat=0')")" 400
expect "repeat=1001 refused" "$(curl -s -o /dev/null -w '%{http_code}' "$(url '/work?n=10&repeat=1001')")" 400
# Fill the pool one job at a time (a second job sent at once could find the
# first still in the queue, not yet taken by the idle thread, and be refused).
expect "pool idle before the long requests" "$(pool_shows 0 0)" yes
curl -s -o "$WORK/long1.body" -w '%{http_code}' --max-time 120 "$(url "$LONG")" >"$WORK/long1.code" &
long_pid1=$!
expect "first long request running" "$(pool_shows 1 0)" yes
curl -s -o "$WORK/long2.body" -w '%{http_code}' --max-time 120 "$(url "$LONG")" >"$WORK/long2.code" &
long_pid2=$!
full=$(pool_shows 1 1)
expect "pool full (1 running, 1 queued)" "$full" yes
burst_pids=()
for i in $(seq 8); do
  curl -s -o "$WORK/burst$i.body" -D "$WORK/burst$i.headers" -w '%{http_code} %{time_total}' --max-time 120 \
    "$(url /work?n=1000)" >"$WORK/burst$i.code" &
  burst_pids+=($!)
done
wait "${burst_pids[@]}" "$long_pid1" "$long_pid2"
rejected=0
for i in $(seq 8); do
  read -r code seconds <"$WORK/burst$i.code"
  case "$code" in
    503)
      rejected=$((rejected + 1))
      expect "burst $i: Retry-After" "$(tr -d '\r' <"$WORK/burst$i.headers" | sed -n 's/^Retry-After: //p')" 1
      awk -v s="$seconds" 'BEGIN { exit !(s < 0.5) }' && pass || fail "burst $i: 503 took $seconds s (not immediate)"
      ;;
    200) expect "burst $i: primes below 1000" "$(sed -n 's/.*"primes":\([0-9]*\).*/\1/p' "$WORK/burst$i.body")" 168 ;;
    *) fail "burst $i: status $code" ;;
  esac
done
((rejected >= 1)) && pass || fail "no 503 while the pool was full"
for i in 1 2; do
  expect "long request $i status" "$(cat "$WORK/long$i.code")" 200
  expect "long request $i primes" "$(sed -n 's/.*"primes":\([0-9]*\).*/\1/p' "$WORK/long$i.body")" 5761455
done
expect "rejections counted" "$(metric offload_http_rejected_total)" "$((rejected_before + rejected))"
expect "pool rejections counted" "$(metric 'coexec_pool_rejected_tasks_total{pool="offload"}')" "$((rejected_before + rejected))"
stop_server a

# --- server B: graceful shutdown under load ---------------------------------
echo "graceful shutdown"
start_server b --threads 2 --queue 8
long_pids=()
for i in $(seq 6); do
  curl -s -o "$WORK/shut$i.body" -w '%{http_code}' --max-time 120 "$(url "$LONG")" >"$WORK/shut$i.code" &
  long_pids+=($!)
done
admitted=""
for _ in $(seq 500); do
  admitted=$(metric 'coexec_pool_tasks_total{pool="offload"}')
  [[ "$admitted" == 6 ]] && break
  sleep 0.01
done
expect "long requests admitted before SIGTERM" "$admitted" 6
kill -TERM "$SERVER_PID"
refused_while_running=no
for _ in $(seq 200); do
  curl -s -o /dev/null --max-time 5 "$(url /healthz)"
  if [[ $? == 7 ]]; then
    kill -0 "$SERVER_PID" 2>/dev/null && refused_while_running=yes
    break
  fi
  sleep 0.02
done
expect "new connections refused while requests finish" "$refused_while_running" yes
wait "${long_pids[@]}"
for i in $(seq 6); do
  expect "request $i accepted before SIGTERM: status" "$(cat "$WORK/shut$i.code")" 200
  expect "request $i accepted before SIGTERM: primes" "$(sed -n 's/.*"primes":\([0-9]*\).*/\1/p' "$WORK/shut$i.body")" 5761455
done
stop_server b signalled
grep -q "completed 6," "$WORK/b.out" || fail "final stats do not show 6 completed tasks: $(tail -1 "$WORK/b.out")"

echo "command line"
for args in "serve --threads 0" "serve --queue 4 --unbounded" "serve --port 70000" "serve --bogus" "nonsense" ""; do
  # shellcheck disable=SC2086
  "$SERVER" $args >/dev/null 2>"$WORK/cli.err"
  code=$?
  expect "'offload_server $args' exit code" "$code" 2
  [[ -s "$WORK/cli.err" ]] && pass || fail "'offload_server $args' printed no error"
done

echo "$CHECKS checks, $FAILURES failed"
((FAILURES == 0))
