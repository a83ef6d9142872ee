#!/usr/bin/env bash
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

# --- the client's ledger ----------------------------------------------------------
# Every client writes one line per request to its own log:
#   KIND EXPECTED GOT CONNECTIONS
# KIND says what was sent (kinds starting with "work" are valid /work
# requests, the only ones that reach the pool). EXPECTED is what the answer
# may be: a status code, codes joined by '|', "err" (any 4xx or 501/505:
# garbage), "none" (no answer: an idle connection) or "unread" (the client
# closed without reading). GOT is the status code received, "000" if no answer
# came (connection closed or timed out), "badbody" for a 200 whose body was
# wrong, "none" / "unread" as above. CONNECTIONS is how many TCP connections
# the request opened (curl's num_connects; 1 for the first request of a raw
# connection).
LOG_FD=""
open_log() { exec {LOG_FD}>>"$SOAK_DIR/clients/$1.log"; }
record() { printf '%s %s %s %s\n' "$1" "$2" "$3" "$4" >&"$LOG_FD"; }

url() { echo "http://127.0.0.1:$PORT$1"; }

# check_work_body FILE N: true if FILE holds the right count for /work?n=N.
check_work_body() {
  local body=""
  IFS= read -r body <"$1" || true
  [[ "$body" =~ \"primes\":([0-9]+) ]] && [[ "${BASH_REMATCH[1]}" == "${PRIMES[$2]}" ]]
}

# curl_batch KIND... : one curl process, one connection kept alive, several
# requests. Arguments come in groups of three: KIND EXPECTED URL (a URL of
# /work?n=N has its body checked). Extra curl options go in CURL_OPTS.
CURL_OPTS=()
curl_batch() {
  local -a kinds=() expects=() ns=() args=()
  local i=0 out code conns n head=no
  [[ " ${CURL_OPTS[*]} " == *" -I "* ]] && head=yes
  while (($# >= 3)); do
    kinds+=("$1")
    expects+=("$2")
    n=""
    [[ "$head" == no && "$3" =~ ^/work\?n=([0-9]+)$ ]] && n=${BASH_REMATCH[1]}
    ns+=("$n")
    args+=(-o "$TMP/body.$i" "$(url "$3")") # written only when a body came: checked only after a 200
    i=$((i + 1))
    shift 3
  done
  out=$(curl -s --connect-timeout 10 --max-time "$CURL_MAX_TIME" -w '%{http_code} %{num_connects}\n' \
    "${CURL_OPTS[@]}" "${args[@]}" 2>/dev/null) || true
  i=0
  while read -r code conns; do
    ((i < ${#kinds[@]})) || break
    if [[ "$code" == 200 && -n "${ns[$i]}" ]] && ! check_work_body "$TMP/body.$i" "${ns[$i]}"; then code=badbody; fi
    record "${kinds[$i]}" "${expects[$i]}" "$code" "${conns:-0}"
    i=$((i + 1))
  done <<<"$out"
  while ((i < ${#kinds[@]})); do # curl printed nothing for these
    record "${kinds[$i]}" "${expects[$i]}" 000 0
    i=$((i + 1))
  done
}

# Raw connections through bash's /dev/tcp, on RAW_FD.
RAW_FD=""
raw_open() { { exec {RAW_FD}<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null; }
raw_close() { exec {RAW_FD}>&-; }
raw_send() { printf '%b' "$1" 1>&"$RAW_FD" 2>/dev/null || true; }
# raw_read_response [head]: reads one response from RAW_FD into RESP_CODE
# ("000" if none came) and RESP_BODY (none after HEAD).
RESP_CODE=""
RESP_BODY=""
raw_read_response() {
  local line="" length=0
  RESP_CODE=000
  RESP_BODY=""
  IFS= read -r -t "$RAW_READ_TIMEOUT" line <&"$RAW_FD" 2>/dev/null || return 0
  line=${line%$'\r'}
  [[ "$line" =~ ^HTTP/1\.[01]\ ([0-9]{3})\  ]] || return 0
  RESP_CODE=${BASH_REMATCH[1]}
  while IFS= read -r -t "$RAW_READ_TIMEOUT" line <&"$RAW_FD" 2>/dev/null; do
    line=${line%$'\r'}
    [[ -z "$line" ]] && break
    [[ "${line,,}" =~ ^content-length:\ *([0-9]+)$ ]] && length=${BASH_REMATCH[1]}
  done
  if ((length > 0)) && [[ "${1:-}" != head ]]; then IFS= read -r -N "$length" -t "$RAW_READ_TIMEOUT" RESP_BODY <&"$RAW_FD" 2>/dev/null || true; fi
}
# raw_request KIND EXPECTED BYTES: a new connection, BYTES (printf %b), one
# answer read, closed.
raw_request() {
  if ! raw_open; then
    record "$1" "$2" 000 0
    return
  fi
  raw_send "$3"
  raw_read_response
  raw_close
  record "$1" "$2" "$RESP_CODE" 1
}

# count_responses FILE: "COMPLETE PARTIAL": the number of complete responses
# at the start of FILE (a byte stream of responses), and 1 if bytes of a
# further one follow.
count_responses() {
  awk -v size="$(wc -c <"$1")" '
    { pos += length($0) + 1 }
    state == 0 { if ($0 ~ /^HTTP\/1\.1 [0-9][0-9][0-9] /) { state = 1; len = 0 } else junk = 1; next }
    state == 1 {
      line = $0; sub(/\r$/, "", line)
      if (line == "") {
        end = pos + len
        if (end <= size) complete++; else partial = 1
        state = len > 0 ? 2 : 0
      } else if (tolower(line) ~ /^content-length: *[0-9]+$/) { sub(/^[^:]*: */, "", line); len = line + 0 }
      next
    }
    state == 2 && pos >= end { state = 0 }
    END { if (state == 1 || junk) partial = 1; print complete + 0, partial + 0 }
  ' "$1"
}

# tcp_queues: "SERVER_RX SERVER_TX CLIENT_RX", the bytes queued in the kernel
# on both ends of the raw connection RAW_FD (from /proc/net/tcp).
tcp_queues() {
  local inode
  inode=$(readlink "/proc/$BASHPID/fd/$RAW_FD")
  inode=${inode//[^0-9]/}
  awk -v inode="$inode" -v port="$PORT" '
    function hex(s, i, v) {
      v = 0
      for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789ABCDEF", toupper(substr(s, i, 1))) - 1
      return v
    }
    NR > 1 {
      split($2, l, ":"); split($3, r, ":"); split($5, q, ":")
      key = hex(l[2]) " " hex(r[2]); tx[key] = hex(q[1]); rx[key] = hex(q[2])
      if ($10 == inode) { client = hex(l[2]); clientRx = hex(q[2]) }
    }
    END { key = port " " client; print (key in rx ? rx[key] : -1), (key in tx ? tx[key] : -1), clientRx + 0 }
  ' /proc/net/tcp
}

# slow_reader: on a raw connection (RAW_FD), a client that stops reading.
# It sends batches of SLOW_READER_BATCH pipelined GET /metrics, each in one
# write that the server reads whole, and reads nothing. A batch goes out only
# once every answer to the earlier ones is in the socket queues (the server
# has read every request byte so far and waits for more); otherwise the
# server's write is blocked and the client stops sending, so that when the
# write times out (10 s) the server closes with nothing unread: a FIN, not a
# reset that would drop answers on the way. After 12 s the client reads what
# came. Complete answers count as received; if fewer than the requests, the
# server counted one more, the one it was writing (metrics-cut), and never
# parsed the rest (metrics-unparsed). If the answers all fit in the queues,
# the server closes after the idle timeout instead, all answered.
slow_reader() {
  local batches=0 per_batch=0 previous queued sent k got complete partial server_rx server_tx client_rx
  while ((batches < SLOW_READER_BATCHES)); do
    cat "$TMP/pipelined-metrics" 1>&"$RAW_FD" 2>/dev/null || true
    batches=$((batches + 1))
    previous=""
    for ((k = 0; k < 25; k++)); do # until the queues stop moving (5 s at most)
      sleep 0.2
      read -r server_rx server_tx client_rx < <(tcp_queues)
      [[ "$previous" == "$server_tx $client_rx" ]] && break
      previous="$server_tx $client_rx"
    done
    queued=$((server_tx + client_rx))
    # The first batch's answers all written: at least 4000 bytes each (a
    # /metrics page is over 4 KiB). Later ones: answers only grow (their
    # numbers get digits), so fewer bytes than batches * per_batch (64 bytes
    # of slack) means a write is blocked.
    ((batches == 1)) && per_batch=$((queued >= SLOW_READER_BATCH * 4000 ? queued : 0))
    ((server_rx == 0 && per_batch > 0 && queued >= batches * per_batch - 64)) || break
  done
  sent=$((batches * SLOW_READER_BATCH))
  sleep 12
  got=closed
  timeout 20 cat <&"$RAW_FD" >"$TMP/slow-reader" 2>/dev/null || got=open
  record slow-reader-close closed "$got" 0
  read -r complete partial < <(count_responses "$TMP/slow-reader")
  for ((k = 0; k < complete; k++)); do record metrics-slow-reader 200 200 $((k == 0 ? 1 : 0)); done
  # bytes after the last complete answer: one cut short, or junk (a mismatch)
  ((partial && complete >= sent)) && record slow-reader-junk none junk 0
  if ((complete < sent)); then
    record metrics-cut unread unread $((complete == 0 ? 1 : 0))
    for ((k = complete + 1; k < sent; k++)); do record metrics-unparsed unread unread 0; done
  fi
  return 0
}

pick() { # pick NAME_OF_ARRAY: one element at random
  local -n array=$1
  echo "${array[RANDOM % ${#array[@]}]}"
}

# --- the client loops (each runs until DEADLINE, then writes "end") -----------
# Valid traffic: batches of 1-6 requests on one keep-alive connection.
loop_valid() {
  trap '' PIPE
  open_log "valid$1"
  TMP=$SOAK_DIR/tmp/valid$1
  mkdir -p "$TMP"
  local -a batch
  local n i
  while ((EPOCHSECONDS < DEADLINE)); do
    batch=()
    for ((i = RANDOM % 6; i >= 0; i--)); do
      case $((RANDOM % 10)) in
        0) batch+=(healthz 200 /healthz) ;;
        1) batch+=(metrics 200 /metrics) ;;
        *)
          n=${CHEAP_N[RANDOM % ${#CHEAP_N[@]}]}
          batch+=(work '200|503' "/work?n=$n")
          ;;
      esac
    done
    CURL_OPTS=()
    case $((RANDOM % 8)) in
      0) CURL_OPTS=(-I) ;; # HEAD: no body to check
      1) CURL_OPTS=(-0) ;; # HTTP/1.0: a connection per request
    esac
    if [[ "${CURL_OPTS[*]}" == -I ]]; then # HEAD: work-head, head-healthz, head-metrics
      for ((i = 0; i < ${#batch[@]}; i += 3)); do
        if [[ "${batch[i]}" == work ]]; then batch[i]=work-head; else batch[i]=head-${batch[i]}; fi
      done
    elif [[ "${CURL_OPTS[*]}" == -0 ]]; then
      for ((i = 0; i < ${#batch[@]}; i += 3)); do batch[i]=${batch[i]}-http10; done
    fi
    curl_batch "${batch[@]}"
    sleep 0.0$((RANDOM % 10))
  done
  echo end >&"$LOG_FD"
}

# Malformed requests, one case after another, each on a new connection.
loop_bad() {
  trap '' PIPE
  open_log bad
  TMP=$SOAK_DIR/tmp/bad
  mkdir -p "$TMP"
  local long_line long_header many_headers case_number=0
  long_line=/$(head -c 10000 /dev/zero | tr '\0' a)
  long_header="X-Big: $(head -c 20000 /dev/zero | tr '\0' b)"
  head -c 100000 /dev/zero >"$TMP/big-body"
  many_headers=$(for i in $(seq 150); do printf 'X-H%d: v\\r\\n' "$i"; done)
  while ((EPOCHSECONDS < DEADLINE)); do
    CURL_OPTS=()
    case $((case_number % 32)) in
      0) curl_batch bad-path 404 /nope bad-path 404 /../etc/passwd ;;
      1) curl_batch bad-n 400 '/work?n=abc' bad-n 400 '/work?n=0' bad-n 400 '/work?n=100000001' ;;
      2) curl_batch bad-n 400 '/work' bad-n 400 '/work?n=%zz' bad-n 400 '/work?n=-5' ;;
      3)
        CURL_OPTS=(-X BREW)
        curl_batch bad-method 405 /healthz
        ;;
      4)
        CURL_OPTS=(-X DELETE)
        curl_batch bad-method 405 '/work?n=5'
        ;;
      5) curl_batch bad-long-line 414 "$long_line" ;;
      6)
        CURL_OPTS=(-H "$long_header")
        curl_batch bad-long-header 431 /healthz
        ;;
      7)
        CURL_OPTS=(-X POST --data-binary @"$TMP/big-body" -H 'Expect:')
        curl_batch bad-big-body 413 /healthz
        ;;
      8)
        CURL_OPTS=(-X POST -H 'Transfer-Encoding: chunked' -d x)
        curl_batch bad-chunked 501 /healthz
        ;;
      9) raw_request bad-raw 400 'GARBAGE\r\n\r\n' ;;
      10) raw_request bad-raw 400 '\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n' ;;
      11) raw_request bad-version 505 'GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n' ;;
      12) raw_request bad-raw 400 'GET /healthz HTTP/1.1\r\n\r\n' ;;
      13) raw_request bad-raw 400 'GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n' ;;
      14) raw_request bad-raw 400 'GET /healthz HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n' ;;
      15) raw_request bad-raw 400 'GET /healthz HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n' ;;
      16) raw_request bad-raw 400 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-C: a\x01b\r\n\r\n' ;;
      17) raw_request bad-raw 400 'GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n' ;;
      18) raw_request bad-raw 400 'GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n' ;;
      19) raw_request bad-raw 400 'POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\nx' ;;
      20) raw_request bad-raw 400 'GET /a\x7fb HTTP/1.1\r\nHost: x\r\n\r\n' ;;
      21) raw_request bad-raw 400 'GET  /healthz HTTP/1.1\r\nHost: x\r\n\r\n' ;;
      22) raw_request bad-raw 400 'GET /healthz http/1.1\r\nHost: x\r\n\r\n' ;;
      23) raw_request bad-many-headers 431 "GET /healthz HTTP/1.1\\r\\nHost: x\\r\\n$many_headers\\r\\n" ;;
      24) raw_request bad-long-line 414 "GET /$(head -c 9000 /dev/zero | tr '\0' c)" ;;
      25) raw_request bad-raw 400 '\r\n\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n' ;;
      26) raw_request bad-big-body 413 'POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n' ;;
      27) raw_request bad-path 404 'OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n' ;;
      *) # garbage: random bytes, sometimes followed by an empty line
        if raw_open; then
          head -c $((64 + RANDOM % 4000)) /dev/urandom 1>&"$RAW_FD" 2>/dev/null || true
          ((RANDOM % 2)) && raw_send '\r\n\r\n'
          raw_read_response
          raw_close
          record garbage err "$RESP_CODE" 1
        else
          record garbage err 000 0
        fi
        ;;
    esac
    case_number=$((case_number + 1))
    sleep 0.0$((RANDOM % 10))
  done
  echo end >&"$LOG_FD"
}

# Slow, idle, vanishing and pipelining clients on raw connections.
loop_slow() {
  trap '' PIPE
  open_log "slow$1"
  local i hold got n1 n2 pieces
  TMP=$SOAK_DIR/tmp/slow$1
  mkdir -p "$TMP"
  for ((i = 0; i < SLOW_READER_BATCH; i++)); do printf 'GET /metrics HTTP/1.1\nHost:x\n\n'; done >"$TMP/pipelined-metrics"
  while ((EPOCHSECONDS < DEADLINE)); do
    if ! raw_open; then
      record slow-connect 200 000 0
      sleep 1
      continue
    fi
    case $((RANDOM % 16)) in
      0) # slowloris: a header line every 0.5 s, never the end: 408 after the header timeout
        raw_send 'GET /healthz HTTP/1.1\r\n'
        for ((i = 0; i < HEADER_TIMEOUT_MS / 500 + 1; i++)); do
          sleep 0.5
          raw_send "X-Slow-$i: 1\\r\\n"
        done
        raw_read_response
        record slowloris 408 "$RESP_CODE" 1
        ;;
      1 | 6) # slow but complete: four pieces within the header timeout
        pieces=('GET /healthz HTTP/1.1\r\n' 'Host: x\r\n' 'X-Slow: 1\r\n' '\r\n')
        for i in "${pieces[@]}"; do
          raw_send "$i"
          sleep 0.2
        done
        raw_read_response
        record healthz-slow 200 "$RESP_CODE" 1
        ;;
      2 | 7 | 8) # idle: no byte for 1-8 s (the server closes silently after 5 s)
        hold=$((1 + RANDOM % 8))
        got=none
        i=""
        if IFS= read -r -N 1 -t "$hold" i <&"$RAW_FD" 2>/dev/null || [[ -n "$i" ]]; then got=answered; fi
        record idle none "$got" 1
        ;;
      3 | 9) # vanishes halfway through a request
        raw_send 'GET /work?n=1000 HTTP/1.1\r\nHo'
        record vanished unread unread 1
        ;;
      4 | 10) # sends a whole /work request and leaves without reading the answer
        raw_send 'GET /work?n=1000000 HTTP/1.1\r\nHost: x\r\n\r\n'
        record work-abandoned unread unread 1
        ;;
      11) # slowloris in the body: the headers, then a byte of the body every 0.5 s
        raw_send 'POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n'
        for ((i = 0; i < HEADER_TIMEOUT_MS / 500 + 1; i++)); do
          sleep 0.5
          raw_send x
        done
        raw_read_response
        record slowloris-body 408 "$RESP_CODE" 1
        ;;
      12) # a slow body within the header timeout: the whole request, answered 405 (POST)
        raw_send 'POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nab'
        sleep 0.3
        raw_send 'cd'
        sleep 0.3
        raw_send 'ef'
        raw_read_response
        record post-slow-body 405 "$RESP_CODE" 1
        ;;
      13) # a reader that stops reading (the write timeout), in slow_reader
        slow_reader
        ;;
      *) # three pipelined requests in one write, then one more on the same connection
        n1=$(pick CHEAP_N)
        n2=$(pick CHEAP_N)
        raw_send "GET /healthz HTTP/1.1\\r\\nHost: x\\r\\n\\r\\nGET /work?n=$n1 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\nHEAD /work?n=$n2 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"
        raw_read_response
        record healthz-pipelined 200 "$RESP_CODE" 1
        raw_read_response
        if [[ "$RESP_CODE" == 200 && ! ("$RESP_BODY" =~ \"primes\":([0-9]+) && "${BASH_REMATCH[1]}" == "${PRIMES[$n1]}") ]]; then
          RESP_CODE=badbody
        fi
        record work-pipelined '200|503' "$RESP_CODE" 0
        raw_read_response head
        record work-pipelined-head '200|503' "$RESP_CODE" 0
        raw_send 'GET /healthz HTTP/1.0\r\n\r\n'
        raw_read_response
        record healthz-http10 200 "$RESP_CODE" 0
        ;;
    esac
    raw_close
    sleep 0.$((RANDOM % 5))
  done
  echo end >&"$LOG_FD"
}

# overload_window T: true if T (seconds since the start) is in an overload
# phase: [k*OVERLOAD_EVERY + OVERLOAD_EVERY/2, ... + OVERLOAD_FOR).
overload_window() {
  local t=$1 offset=$((OVERLOAD_EVERY / 2))
  ((t >= offset)) && (((t - offset) % OVERLOAD_EVERY < OVERLOAD_FOR))
}

# One client of an overload phase: expensive requests, three per connection,
# until the phase ends.
overload_client() {
  trap '' PIPE
  open_log "overload$1-$2"
  TMP=$SOAK_DIR/tmp/overload$2
  mkdir -p "$TMP"
  CURL_OPTS=()
  while ((EPOCHSECONDS < $3)); do
    curl_batch work-overload '200|503' "/work?n=$(pick EXPENSIVE_N)" work-overload '200|503' \
      "/work?n=$(pick EXPENSIVE_N)" work-overload '200|503' "/work?n=$(pick EXPENSIVE_N)"
  done
  echo end >&"$LOG_FD"
}

# FLOOD_CONNECTIONS idle connections opened at once, held until the phase
# ends (the server closes them after its idle timeout if that comes first),
# closed without a byte sent.
flood() {
  trap '' PIPE
  open_log "overload$1-flood"
  local -a fds=()
  local i
  for ((i = 0; i < FLOOD_CONNECTIONS; i++)); do
    if raw_open; then
      fds+=("$RAW_FD")
      record flood unread unread 1
    else
      record flood unread 000 0
    fi
  done
  while ((EPOCHSECONDS < $2)); do sleep 0.5; done
  for RAW_FD in "${fds[@]}"; do raw_close; done
  echo end >&"$LOG_FD"
}

# Starts OVERLOAD_CLIENTS clients and a flood at the start of each overload phase.
loop_overload() {
  trap '' PIPE
  open_log overload
  local phase=0 t end i
  local -a pids
  while ((EPOCHSECONDS < DEADLINE)); do
    t=$((EPOCHSECONDS - START))
    if overload_window "$t"; then
      phase=$((phase + 1))
      end=$((START + t - (t - OVERLOAD_EVERY / 2) % OVERLOAD_EVERY + OVERLOAD_FOR))
      ((end > DEADLINE)) && end=$DEADLINE
      pids=()
      flood "$phase" "$end" &
      pids+=($!)
      for ((i = 1; i <= OVERLOAD_CLIENTS; i++)); do
        overload_client "$phase" "$i" "$end" &
        pids+=($!)
      done
      wait "${pids[@]}" || true
      printf 'phase %d from %d s to %d s\n' "$phase" "$t" "$((EPOCHSECONDS - START))" >>"$SOAK_DIR/overload-phases.txt"
    fi
    sleep 0.5
  done
  echo end >&"$LOG_FD"
}

# --- the sampler ------------------------------------------------------------------
declare -A M # the last /metrics page, by short name
METRICS_FIELDS=(state pool_size active queued tasks completed rejected failed cancelled discarded drained
  in_flight connections_open connections_total http_rejected
  r200 r400 r404 r405 r408 r413 r414 r431 r500 r501 r503 r505 rother errors)
# fetch_metrics KIND: GET /metrics into M (and the client's ledger); false if
# the page did not come.
fetch_metrics() {
  local out code conns key value
  out=$(curl -s --max-time "$CURL_MAX_TIME" -o "$SOAK_DIR/metrics.txt" -w '%{http_code} %{num_connects}' \
    "$(url /metrics)" 2>/dev/null) || true
  read -r code conns <<<"${out:-000 0}"
  [[ "${2:-}" == unlogged ]] || record "$1" 200 "$code" "$conns"
  LAST_METRICS_CODE=$code
  LAST_METRICS_CONNS=$conns
  [[ "$code" == 200 ]] || return 1
  M=()
  while read -r key value; do M[$key]=$value; done < <(awk '
    /^coexec_pool_state\{/ && $2 == 1 { sub(/.*state="/, "", $1); sub(/".*/, "", $1); print "state", $1 }
    { name = $1; sub(/\{pool="offload"\}$/, "", name) }
    name == "coexec_pool_size" { print "pool_size", $2 }
    name == "coexec_pool_active_threads" { print "active", $2 }
    name == "coexec_pool_queue_size" { print "queued", $2 }
    name == "coexec_pool_tasks_total" { print "tasks", $2 }
    name == "coexec_pool_completed_tasks_total" { print "completed", $2 }
    name == "coexec_pool_rejected_tasks_total" { print "rejected", $2 }
    name == "coexec_pool_failed_tasks_total" { print "failed", $2 }
    name == "coexec_pool_cancelled_tasks_total" { print "cancelled", $2 }
    name == "coexec_pool_discarded_tasks_total" { print "discarded", $2 }
    name == "coexec_pool_drained_tasks_total" { print "drained", $2 }
    name == "offload_http_requests_in_flight" { print "in_flight", $2 }
    name == "offload_http_connections_open" { print "connections_open", $2 }
    name == "offload_http_connections_total" { print "connections_total", $2 }
    name == "offload_http_rejected_total" { print "http_rejected", $2 }
    /^offload_http_responses_total\{code="/ {
      c = $1; sub(/.*code="/, "", c); sub(/".*/, "", c); print "r" c, $2
      if (c != "200" && c != "503") errors += $2
    }
    END { print "errors", errors + 0 }
  ' "$SOAK_DIR/metrics.txt")
  for key in "${METRICS_FIELDS[@]}"; do
    [[ -n "${M[$key]:-}" ]] || M[$key]=NA
  done
}

# proc_sample: RSS (kB; RssAnon, its heap and stacks part: the rest is pages
# of the binary and libraries, mapped in as code runs), open fds and threads
# of the server now.
proc_sample() {
  local line
  RSS_KB=NA
  RSS_ANON_KB=NA
  THREADS=NA
  FDS=NA
  [[ -r "/proc/$SERVER_PID/status" ]] || return 0
  while IFS= read -r line; do
    [[ "$line" =~ ^VmRSS:[[:space:]]+([0-9]+) ]] && RSS_KB=${BASH_REMATCH[1]}
    [[ "$line" =~ ^RssAnon:[[:space:]]+([0-9]+) ]] && RSS_ANON_KB=${BASH_REMATCH[1]}
    [[ "$line" =~ ^Threads:[[:space:]]+([0-9]+) ]] && THREADS=${BASH_REMATCH[1]}
  done <"/proc/$SERVER_PID/status"
  local -a fds=("/proc/$SERVER_PID/fd/"*)
  FDS=${#fds[@]}
}

CSV_COLUMNS="elapsed_s,phase,rss_kb,fds,threads,pool_state,pool_size,pool_active,pool_queued,pool_tasks,pool_completed,pool_rejected,pool_failed,pool_cancelled,in_flight,connections_open,connections_total,http_rejected,responses_200,responses_503,responses_4xx_5xx_other,fds_beyond_connections,rss_anon_kb"
# sample PHASE: one CSV row.
sample() {
  local t=$((EPOCHSECONDS - START)) stray=NA fds_before
  proc_sample
  fds_before=$FDS
  M=()
  fetch_metrics metrics || true
  proc_sample
  # fds beyond the open connections (this page's own among them, but not yet
  # open when /proc was read first): the baseline. Left out (NA) when other
  # connections opened or closed while the page was fetched (the fd count
  # moved by more than this page's own connection, which the server may not
  # have closed yet at the second reading).
  if [[ "$FDS" =~ ^[0-9]+$ && "$fds_before" =~ ^[0-9]+$ && "${M[connections_open]:-}" =~ ^[0-9]+$ ]] &&
    ((FDS - fds_before <= 1 && fds_before - FDS <= 1)); then
    stray=$((fds_before - M[connections_open] + 1))
  fi
  printf '%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$t" "$1" "$RSS_KB" "$FDS" "$THREADS" \
    "${M[state]:-NA}" "${M[pool_size]:-NA}" "${M[active]:-NA}" "${M[queued]:-NA}" "${M[tasks]:-NA}" \
    "${M[completed]:-NA}" "${M[rejected]:-NA}" "${M[failed]:-NA}" "${M[cancelled]:-NA}" "${M[in_flight]:-NA}" \
    "${M[connections_open]:-NA}" "${M[connections_total]:-NA}" "${M[http_rejected]:-NA}" "${M[r200]:-NA}" \
    "${M[r503]:-NA}" "${M[errors]:-NA}" "$stray" "$RSS_ANON_KB" >>"$CSV"
  printf 'soak: t=%4ss %-8s rss %s kB, fds %s, threads %s, pool %s queued %s, tasks %s, rejected %s, connections %s\n' \
    "$t" "$1" "$RSS_KB" "$FDS" "$THREADS" "${M[active]:-NA}" "${M[queued]:-NA}" "${M[tasks]:-NA}" \
    "${M[rejected]:-NA}" "${M[connections_open]:-NA}"
}

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
