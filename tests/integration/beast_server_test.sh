#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Integration test of examples/beast_server.cpp (Boost.Beast + the Boost.Asio
# bridge) with Debian's curl as the client (and bash's /dev/tcp for the
# request curl will not send). Usage:
#   beast_server_test.sh path/to/beast_server
# Starts `beast_server --port 0 --threads 1 --queue 1 --gate` and checks: 200
# with the right count, 503 + Retry-After while the pool is full (made full
# by /hold jobs that wait for /release, each step awaited on /metrics: no
# timing involved), the held requests answered after /release, 400 for a bad
# n and for a malformed request, 404, the /metrics page, and a clean exit on
# SIGTERM. Prints each failed check; exits 1 if any failed.
set -uo pipefail
# (pipefail: never pipe into `grep -q`; grep a here-string instead.)

SERVER=${1:?usage: beast_server_test.sh path/to/beast_server}
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
# the status code of the answer.
raw() {
  local fd line
  exec {fd}<>"/dev/tcp/127.0.0.1/$PORT" || return 1
  printf '%b' "$1" >&"$fd"
  IFS= read -r -t 30 line <&"$fd"
  exec {fd}>&-
  line=${line%$'\r'}
  echo "${line#HTTP/1.1 }" | cut -d' ' -f1
}

"$SERVER" --port 0 --threads 1 --queue 1 --gate >"$WORK/out" 2>"$WORK/err" &
SERVER_PID=$!
for _ in $(seq 300); do
  PORT=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$WORK/out")
  [[ -n "$PORT" ]] && break
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.1
done
if [[ -z "$PORT" ]]; then
  echo "FAIL: the server did not print its port"
  cat "$WORK/out" "$WORK/err"
  exit 1
fi

echo "results"
expect "/work?n=100" "$(curl -s --max-time 60 "$(url '/work?n=100')")" 25
expect "/work?n=1000000" "$(curl -s --max-time 60 "$(url '/work?n=1000000')")" 78498
expect "/work status" "$(status '/work?n=10')" 200
expect "/healthz" "$(curl -s --max-time 60 "$(url /healthz)")" ok

echo "bad input"
expect "n not a number" "$(status '/work?n=abc')" 400
expect "n zero" "$(status '/work?n=0')" 400
expect "n above the maximum" "$(status '/work?n=50000001')" 400
expect "n missing" "$(status /work)" 400
expect "malformed request line" "$(raw 'GARBAGE\r\n\r\n')" 400
expect "unknown path" "$(status /nope)" 404
expect "not GET" "$(status /healthz -X DELETE)" 405

echo "a full pool: 503 with Retry-After"
# The pool has one thread and a queue of one: a first /hold runs and waits
# for /release, then a second one waits in the queue; then the pool is full.
# (The second is sent once the first runs: sent at once, it could find the
# first still in the queue, before the worker took it, and be refused.)
# metric_becomes NAME VALUE: waits until /metrics shows NAME = VALUE (a
# condition, however slow the machine: up to 120 s); prints yes, or no and
# what it saw last.
metric_becomes() {
  local value deadline=$((SECONDS + 120))
  while ((SECONDS < deadline)); do
    value=$(metric "$1")
    if [[ "$value" == "$2" ]]; then
      echo yes
      return
    fi
    sleep 0.05
  done
  echo "no: $1 was $value"
}
curl -s --max-time 240 -o "$WORK/hold1" -w '%{http_code}' "$(url /hold)" >"$WORK/hold1.status" &
hold1=$!
expect "first /hold running per /metrics" "$(metric_becomes beast_server_held_jobs 1)" yes
curl -s --max-time 240 -o "$WORK/hold2" -w '%{http_code}' "$(url /hold)" >"$WORK/hold2.status" &
hold2=$!
expect "second /hold queued per /metrics" "$(metric_becomes 'coexec_pool_queue_size{pool="beast"}' 1)" yes
headers=$(curl -s -D - -o "$WORK/busy" --max-time 60 "$(url '/work?n=100')" | tr -d '\r')
expect "/work on a full pool: status" "$(head -1 <<<"$headers" | cut -d' ' -f2)" 503
expect "/work on a full pool: Retry-After" "$(sed -n 's/^[Rr]etry-[Aa]fter: //p' <<<"$headers")" 1
expect "rejected tasks on /metrics" "$(metric 'coexec_pool_rejected_tasks_total{pool="beast"}')" 1
expect "503 responses on /metrics" "$(metric 'beast_server_responses_total{code="503"}')" 1
expect "/release" "$(status /release)" 200
wait "$hold1"
wait "$hold2"
expect "held request 1 after /release" "$(cat "$WORK/hold1.status") $(cat "$WORK/hold1")" "200 released"
expect "held request 2 after /release" "$(cat "$WORK/hold2.status") $(cat "$WORK/hold2")" "200 released"
expect "/work after the overload" "$(curl -s --max-time 60 "$(url '/work?n=100')")" 25

echo "metrics page"
page=$(curl -s -D "$WORK/metrics.headers" --max-time 60 "$(url /metrics)")
expect "/metrics content type" "$(tr -d '\r' <"$WORK/metrics.headers" | sed -n 's/^[Cc]ontent-[Tt]ype: //p')" \
  "text/plain; version=0.0.4; charset=utf-8"
bad_lines=$(grep -v '^#' <<<"$page" | grep -Ev '^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? ([0-9]+(\.[0-9]+)?|\+Inf)$')
expect "/metrics lines that are not 'name{labels} number'" "$bad_lines" ""
for name in coexec_pool_size coexec_pool_active_threads coexec_pool_queue_size coexec_pool_tasks_total \
  coexec_pool_completed_tasks_total coexec_pool_rejected_tasks_total; do
  grep -q "^# TYPE $name " <<<"$page" || fail "/metrics has no TYPE line for $name"
done
expect "queue capacity" "$(awk '$1 == "coexec_pool_queue_capacity{pool=\"beast\"}" {print $2}' <<<"$page")" 1
# Tasks run: 3 /work, 2 /hold, 1 /work after the overload.
expect "completed tasks" "$(awk '$1 == "coexec_pool_completed_tasks_total{pool=\"beast\"}" {print $2}' <<<"$page")" 6
expect "400 responses" "$(awk '$1 == "beast_server_responses_total{code=\"400\"}" {print $2}' <<<"$page")" 5

echo "shutdown"
kill -TERM "$SERVER_PID"
for _ in $(seq 600); do
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$SERVER_PID" 2>/dev/null; then
  fail "still running 60 s after SIGTERM"
  kill -KILL "$SERVER_PID"
fi
wait "$SERVER_PID"
expect "exit code after SIGTERM" "$?" 0
SERVER_PID=""
grep -q "^final: pool 'beast' TERMINATED" "$WORK/out" || fail "no final stats line: $(cat "$WORK/out")"
if [[ -s "$WORK/err" ]]; then fail "wrote to stderr: $(head -c 2000 "$WORK/err")"; fi

echo "$CHECKS checks, $FAILURES failed"
((FAILURES == 0))
