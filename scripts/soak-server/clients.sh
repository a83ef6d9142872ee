# Sourced by scripts/soak-server.sh (not run on its own): the clients of the
# soak, each a bounded loop that writes one ledger line per request, and the
# raw-TCP helpers they share. Uses the configuration and SOAK_DIR, PORT and
# LOG_FD of the main script.
# shellcheck shell=bash
# shellcheck disable=SC2034 # what it sets, the main script reads

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
