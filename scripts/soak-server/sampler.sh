# Sourced by scripts/soak-server.sh (not run on its own): the sampler, which
# reads the server's /metrics page and its /proc entries every SAMPLE_EVERY
# seconds into samples.csv. Uses the configuration and SOAK_DIR, PORT, CSV
# and SERVER_PID of the main script.
# shellcheck shell=bash
# shellcheck disable=SC2034 # what it sets, the main script reads

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
