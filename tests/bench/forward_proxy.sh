#!/usr/bin/env bash
# Forward-proxy benchmark, side by side in one run on this machine (wrk, origin and gate share
# it): direct to a loopback origin vs through the forward proxy (absolute-form, wrk) vs through
# a CONNECT tunnel (wrk cannot CONNECT: the `connect_bench` example drives keep-alive HTTP/1.1
# inside tunnels, and the same client runs direct for its own baseline). Then the gate's RSS with
# 1,000 concurrent idle tunnels. Release builds.
#
# Two references put the ratio in context: `bench_relay`, a zero-logic relay (one read and one
# write per direction, no parsing, gates or logs), is the ceiling of any proxy that sits between
# wrk and the origin on the same two cores; and a second pass at one connection gives the
# latency a request gains through the gate when nothing queues (at CONNS connections every
# path is saturated, so p50 there mostly measures throughput).
#
# With REFERENCES=1 (the default) the same rounds also drive three widely deployed proxies from
# Debian, installed with apt when missing and skipped when they cannot be had: HAProxy as a
# reverse proxy to the origin (keep-alive reuse, two threads, no logs; and the same HAProxy
# writing its default HTTP log line per request to a file, as the gate writes its decision
# line), squid and tinyproxy as
# forward proxies (absolute-form, no cache, no access log). None of them runs gates; they show
# where a production proxy lands on the same two cores.
# A hyper-based relay (`bench_hyper_relay`: hyper's server and client, re-framing by
# construction, no gates) runs in the same rounds as the reference for the gate's own HTTP/1.1.
#
# With SMOKESCREEN=1 (the default) the same rounds drive smokescreen, Stripe's egress proxy (host
# ACL and SSRF filter: the egress proxy platform teams deploy for this job), pinned and built once
# into the machine-level cache by tests/bench/smokescreen/build.sh. Its config is the gate's:
# the test origin's one address and port allowed (`allow_addresses: [127.0.0.1:<origin port>]`,
# which lets that loopback address through smokescreen's default deny of loopback and private
# ranges while every other loopback address, port and private range stays denied), an egress ACL
# whose default enforces an allow-list holding only the origin's host, no role (no TLS client
# certificates: `allow_missing_role`), its canonical decision line per request logged to a file,
# as the gate's is, and an upstream keep-alive pool as large as the load (the gate keeps one
# upstream connection per client connection; smokescreen's default keeps two idle per host).
#
# Every proxy is measured on both paths it can take, at CONNS connections and at one: HTTP
# (absolute-form for forward proxies, origin-form for HAProxy and the relays) with wrk, and
# keep-alive HTTP/1.1 inside CONNECT tunnels with `connect_bench` (HAProxy and the zero-logic
# relay do not CONNECT: connect_bench goes straight to them, the byte path a tunnel reduces to).
# Each proxy's CPU per request is its own utime + stime (/proc/<pid>/stat) over the requests it
# relayed, summed over the rounds.
#
# With BASELINE_BIN=/path/to/an/earlier/fleetgate-proxy the same rounds also drive that build as
# a second forward proxy (row "fleetgate baseline"), so a change on the hot path shows its ratio
# before and after in one run.
#
# The gate runs with its default listener threads (the machine's cores, at most two: two here,
# as HAProxy's). With ONE_WORKER=1 (the default) the same build also runs with `--workers 1`
# (row "fleetgate --workers 1": one event loop, no work stealing), in the same rounds;
# GATE_WORKERS=N gives the first gate `--workers N`.
#
# Usage: tests/bench/forward_proxy.sh   (env: CONNS=64 SECS=5 ROUNDS=3 TUNNELS=1000 GATE_LOG=info
# REFERENCES=1 SMOKESCREEN=1 ONE_WORKER=1 GATE_WORKERS= BASELINE_BIN= FLEETGATE_PROXY_BIN= BUILD=1; BUILD=0 takes the release
# binaries already in the target dir; the gate logs its one decision line per request at the default
# level, to a file)
# Bars (issue): requests/s ratio >= 0.6, added p50 < 0.3 ms, RSS < 64 MB.
set -euo pipefail

CONNS=${CONNS:-64}
SECS=${SECS:-5}
ROUNDS=${ROUNDS:-3}
TUNNELS=${TUNNELS:-1000}
REFERENCES=${REFERENCES:-1}
SMOKESCREEN=${SMOKESCREEN:-1}
ONE_WORKER=${ONE_WORKER:-1}
GATE_WORKERS=${GATE_WORKERS:-}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
case "$TARGET" in /*) ;; *) TARGET=$ROOT/$TARGET ;; esac
REL=$TARGET/release
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

if ! command -v wrk >/dev/null; then
  apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }
fi
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

if [ "${BUILD:-1}" = 1 ]; then
  echo "building release binaries..." >&2
  (cd "$ROOT" && cargo build -q --release -p fleetgate-proxy --bin fleetgate-proxy \
    && cargo build -q --release -p fleetgate-e2e --example bench_origin --example connect_bench --example bench_relay \
       --example bench_hyper_relay)
fi
# Private copies: a shared target dir may be rebuilt by someone else while this runs.
cp "${FLEETGATE_PROXY_BIN:-$REL/fleetgate-proxy}" "$WORK/fleetgate-proxy"
cp "$REL/examples/bench_origin" "$REL/examples/connect_bench" "$REL/examples/bench_relay" \
  "$REL/examples/bench_hyper_relay" "$WORK/"
GATE_BIN=$WORK/fleetgate-proxy
REL=$WORK

# Wait for the `{"listening": ...}` line a process prints on stdout into $1.
first_line() {
  for _ in $(seq 100); do [ -s "$1" ] && { head -n1 "$1"; return; }; sleep 0.1; done
  echo "no listening line in $1" >&2; cat "$WORK"/*.err >&2 2>/dev/null; exit 1
}

"$REL/bench_origin" >"$WORK/origin.out" & PIDS+=($!)
ORIGIN=$(first_line "$WORK/origin.out" | sed -E 's/.*"listening": "([^"]+)".*/\1/')
OPORT=${ORIGIN##*:}
"$REL/bench_relay" "$ORIGIN" >"$WORK/relay.out" & RELAY_PID=$!; PIDS+=($!)
RELAY=$(first_line "$WORK/relay.out" | sed -E 's/.*"listening": "([^"]+)".*/\1/')

# Reference proxies: "name|url|lua|pid|connect" lines, one wrk target each (lua empty:
# origin-form); connect is "tunnel" (connect_bench opens CONNECT tunnels through it), "direct"
# (connect_bench sends its requests straight to it) or empty (no CONNECT row).
# First hyper's server and client as a relay (re-framing by construction, no gates): what the
# gate's hand-written HTTP/1.1 is weighed against.
"$REL/bench_hyper_relay" "$ORIGIN" >"$WORK/hyper.out" & HYPER_PID=$!; PIDS+=($!)
HYPER=$(first_line "$WORK/hyper.out" | sed -E 's/.*"listening": "([^"]+)".*/\1/')
REFS=("hyper relay, no gates|http://$HYPER/|absolute|$HYPER_PID|")
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() {
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
  return 1
}
ref_install() {
  command -v "$1" >/dev/null || [ -x "/usr/sbin/$1" ] && return 0
  apt-get install -y "$2" >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y "$2" >/dev/null 2>&1; }
}
if [ "$REFERENCES" = 1 ]; then
  export PATH=$PATH:/usr/sbin
  if ref_install haproxy haproxy; then
    port=$(free_port)
    cat >"$WORK/haproxy.cfg" <<CFG
global
  maxconn 4000
  nbthread 2
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  http-reuse always
frontend bench
  bind 127.0.0.1:$port
  default_backend origin
backend origin
  server origin $ORIGIN
CFG
    haproxy -db -f "$WORK/haproxy.cfg" >"$WORK/haproxy.err" 2>&1 & pid=$!; PIDS+=($pid)
    if wait_port "$port"; then REFS+=("HAProxy $(haproxy -v | awk 'NR==1{print $3}' | cut -d- -f1) reverse proxy|http://127.0.0.1:$port/||$pid|direct")
    else echo "haproxy did not start: $(head -c 300 "$WORK/haproxy.err")" >&2; fi
    # The same HAProxy with one log line per request (its default HTTP log format, to a
    # file through stdout), as the gate and smokescreen each write one.
    port=$(free_port)
    sed -e "s/^  nbthread 2$/  nbthread 2\n  log stdout format raw local0 info/" \
      -e "s/^  mode http$/  mode http\n  log global\n  option httplog/" \
      -e "s/^  bind 127.0.0.1:[0-9]*$/  bind 127.0.0.1:$port/" "$WORK/haproxy.cfg" >"$WORK/haproxy-log.cfg"
    haproxy -db -f "$WORK/haproxy-log.cfg" >"$WORK/haproxy-log.out" 2>"$WORK/haproxy-log.err" & pid=$!; PIDS+=($pid)
    if wait_port "$port"; then REFS+=("HAProxy $(haproxy -v | awk 'NR==1{print $3}' | cut -d- -f1), a log line per request|http://127.0.0.1:$port/||$pid|direct")
    else echo "haproxy (logging) did not start: $(head -c 300 "$WORK/haproxy-log.err")" >&2; fi
  else echo "haproxy not installed: skipped" >&2; fi
  if ref_install squid squid; then
    port=$(free_port)
    mkdir -p "$WORK/squid" && chown proxy: "$WORK/squid" 2>/dev/null || true
    chmod 755 "$WORK"
    cat >"$WORK/squid/squid.conf" <<CFG
http_port 127.0.0.1:$port
http_access allow all
cache deny all
cache_mem 0 MB
access_log none
cache_log $WORK/squid/cache.log
pid_filename $WORK/squid/squid.pid
coredump_dir $WORK/squid
max_filedescriptors 8192
shutdown_lifetime 1 second
CFG
    squid -N -f "$WORK/squid/squid.conf" >"$WORK/squid.err" 2>&1 & pid=$!; PIDS+=($pid)
    if wait_port "$port"; then REFS+=("squid $(squid -v | awk 'NR==1{print $4}') forward proxy|http://127.0.0.1:$port/|absolute|$pid|")
    else echo "squid did not start: $(tail -c 300 "$WORK/squid/cache.log" 2>/dev/null)" >&2; fi
  else echo "squid not installed: skipped" >&2; fi
  if ref_install tinyproxy tinyproxy; then
    port=$(free_port)
    cat >"$WORK/tinyproxy.conf" <<CFG
User nobody
Group nogroup
Port $port
Listen 127.0.0.1
Timeout 600
MaxClients 4096
LogLevel Critical
DisableViaHeader Yes
CFG
    tinyproxy -d -c "$WORK/tinyproxy.conf" >"$WORK/tinyproxy.err" 2>&1 & pid=$!; PIDS+=($pid)
    if wait_port "$port"; then REFS+=("tinyproxy $(tinyproxy -v | awk '{print $2}') forward proxy|http://127.0.0.1:$port/|absolute|$pid|")
    else echo "tinyproxy did not start: $(head -c 300 "$WORK/tinyproxy.err")" >&2; fi
  else echo "tinyproxy not installed: skipped" >&2; fi
fi

cat >"$WORK/policy.yaml" <<YAML
version: v1
store:
  root: $WORK/store
listen:
  api: 127.0.0.1:0
  admin: 127.0.0.1:0
  forwardProxy: 127.0.0.1:0
egress:
  allowCIDRs: ["127.0.0.1/32"]
  ports: [$OPORT]
YAML
RUST_LOG=${GATE_LOG:-info} "$GATE_BIN" serve --policy "$WORK/policy.yaml" --max-tunnels $((TUNNELS + 100)) \
  ${GATE_WORKERS:+--workers "$GATE_WORKERS"} >"$WORK/gate.out" 2>"$WORK/gate.err" & GATE_PID=$!; PIDS+=($GATE_PID)
PROXY=$(first_line "$WORK/gate.out" | sed -E 's/.*"forward_proxy": ?"([^"]+)".*/\1/')

ROWS=("fleetgate forward proxy|http://$PROXY/|absolute|$GATE_PID|tunnel")
if [ "$ONE_WORKER" = 1 ]; then
  RUST_LOG=${GATE_LOG:-info} "$GATE_BIN" serve --policy "$WORK/policy.yaml" --workers 1 \
    >"$WORK/one.out" 2>"$WORK/one.err" & pid=$!; PIDS+=($pid)
  ONE_PROXY=$(first_line "$WORK/one.out" | sed -E 's/.*"forward_proxy": ?"([^"]+)".*/\1/')
  ROWS+=("fleetgate --workers 1|http://$ONE_PROXY/|absolute|$pid|tunnel")
fi
if [ -n "${BASELINE_BIN:-}" ]; then
  cp "$BASELINE_BIN" "$WORK/fleetgate-baseline"
  RUST_LOG=${GATE_LOG:-info} "$WORK/fleetgate-baseline" serve --policy "$WORK/policy.yaml" \
    >"$WORK/baseline.out" 2>"$WORK/baseline.err" & pid=$!; PIDS+=($pid)
  BASE_PROXY=$(first_line "$WORK/baseline.out" | sed -E 's/.*"forward_proxy": ?"([^"]+)".*/\1/')
  ROWS+=("fleetgate baseline (BASELINE_BIN)|http://$BASE_PROXY/|absolute|$pid|tunnel")
fi

SMOKE_PID=
if [ "$SMOKESCREEN" = 1 ]; then
  if SMOKE_BIN=$("$ROOT/tests/bench/smokescreen/build.sh" | tail -n1); then
    port=$(free_port)
    # The gate's policy in smokescreen's terms: see the header.
    cat >"$WORK/smokescreen-acl.yaml" <<YAML
version: v1
services: []
default:
  project: fleetgate-bench
  action: enforce
  allowed_domains:
    - 127.0.0.1
YAML
    cat >"$WORK/smokescreen.yaml" <<YAML
ip: 127.0.0.1
port: $port
allow_missing_role: true
acl_file: $WORK/smokescreen-acl.yaml
allow_addresses: ["127.0.0.1:$OPORT"]
transport_max_idle_conns: 1024
transport_max_idle_conns_per_host: 1024
YAML
    "$SMOKE_BIN" --config-file "$WORK/smokescreen.yaml" >"$WORK/smokescreen.log" 2>&1 & SMOKE_PID=$!; PIDS+=($SMOKE_PID)
    if wait_port "$port"; then
      # The config must allow the origin and refuse its neighbours, or the rows measure refusals.
      code() { curl -s -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$port" "$1"; }
      if [ "$(code "http://$ORIGIN/")" != 200 ] || [ "$(code "http://127.0.0.2:$OPORT/")" = 200 ] \
        || [ "$(code "http://127.0.0.1:$port/")" = 200 ]; then
        echo "smokescreen's config does not match the gate's policy" >&2; exit 1
      fi
      ROWS+=("smokescreen v0.1.0 egress proxy|http://127.0.0.1:$port/|absolute|$SMOKE_PID|tunnel")
    else
      echo "smokescreen did not start: $(head -c 300 "$WORK/smokescreen.log")" >&2; SMOKE_PID=
    fi
  else echo "smokescreen could not be built: skipped" >&2; fi
fi
ROWS+=("zero-logic relay (ceiling)|http://$RELAY/||$RELAY_PID|direct")
for ref in "${REFS[@]}"; do
  case "$ref" in HAProxy*) ROWS+=("$ref") ;; esac
done
for ref in "${REFS[@]}"; do
  case "$ref" in HAProxy*) ;; *) ROWS+=("$ref") ;; esac
done

# wrk --latency output → "rps p50_ms p99_ms requests failed" (failed: non-2xx/3xx answers).
wrk_stats() {
  awk '
    function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0; if (v ~ /s$/) return v*1000; return v }
    /^ +50%/ { p50 = ms($2) } /^ +99%/ { p99 = ms($2) } /^Requests\/sec:/ { rps = $2 }
    / requests in / { n = $1 } /Non-2xx or 3xx responses:/ { bad += $NF }
    END { printf "%.0f %.3f %.3f %d %d\n", rps, p50, p99, n, bad }'
}
json_field() { sed -E "s/.*\"$1\": ([0-9.]+).*/\1/"; }
echo 'wrk.path = "http://'"$ORIGIN"'/"' >"$WORK/absolute.lua"
# A process's CPU time in clock ticks (user + system): unlike req/s, CPU per request does not
# depend on how much of the machine other processes take.
cpu_ticks() { if [ -n "$1" ]; then awk '{ print $14 + $15 }' "/proc/$1/stat"; else echo 0; fi; }
TICK_US=$((1000000 / $(getconf CLK_TCK)))
declare -A RUNS=() REQS=() TICKS=()
record() { # key rps p50 p99 requests ticks failed
  RUNS[$1_rps]+=" $2"; RUNS[$1_50]+=" $3"; RUNS[$1_99]+=" $4"
  REQS[$1]=$((${REQS[$1]:-0} + $5)); TICKS[$1]=$((${TICKS[$1]:-0} + $6))
  [ "$7" = 0 ] || echo "warning: $1: $7 requests failed" >&2
}
# One wrk run: key conns url lua pid.
run_wrk() {
  local t0 t1 a b c n bad
  t0=$(cpu_ticks "$5")
  read -r a b c n bad < <(wrk -t1 -c"$2" -d"${SECS}s" --latency ${4:+-s "$WORK/absolute.lua"} "$3" | wrk_stats)
  t1=$(cpu_ticks "$5")
  record "$1" "$a" "$b" "$c" "$n" $((t1 - t0)) "$bad"
}
# One connect_bench run: key conns mode addr pid; mode "tunnel" opens CONNECT tunnels through
# addr to the origin, "direct" sends the requests straight to addr.
run_connect() {
  local t0 t1 out
  t0=$(cpu_ticks "$5")
  case "$3" in
    tunnel) out=$("$REL/connect_bench" load "$ORIGIN" "$2" "$SECS" "$4") ;;
    *) out=$("$REL/connect_bench" load "$4" "$2" "$SECS") ;;
  esac
  t1=$(cpu_ticks "$5")
  record "$1" "$(echo "$out" | json_field rps)" "$(echo "$out" | json_field p50_ms)" \
    "$(echo "$out" | json_field p99_ms)" "$(echo "$out" | json_field requests)" $((t1 - t0)) \
    "$(echo "$out" | json_field errors)"
}
echo "wrk and connect_bench: $CONNS and 1 connections, ${SECS}s each, $ROUNDS rounds, ${#ROWS[@]} proxies" >&2
# ROUNDS rounds, each running every proxy back to back on each path, so a burst of load from
# elsewhere hits every proxy alike; each figure is the median over the rounds.
for round in $(seq "$ROUNDS"); do
  echo "round $round/$ROUNDS" >&2
  for c in "$CONNS" 1; do
    run_wrk "h${c}_d" "$c" "http://$ORIGIN/" "" ""
    for i in "${!ROWS[@]}"; do
      IFS='|' read -r _ url lua pid _ <<<"${ROWS[$i]}"
      run_wrk "h${c}_$i" "$c" "$url" "$lua" "$pid"
    done
    run_connect "c${c}_d" "$c" direct "$ORIGIN" ""
    for i in "${!ROWS[@]}"; do
      IFS='|' read -r _ url _ pid mode <<<"${ROWS[$i]}"
      [ -n "$mode" ] || continue
      addr=${url#http://}; addr=${addr%/}
      run_connect "c${c}_$i" "$c" "$mode" "$addr" "$pid"
    done
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
m() { echo "${RUNS[$1]:-}" | median; }
echo "per round (req/s, HTTP at $CONNS): direct${RUNS[h${CONNS}_d_rps]}$(for i in "${!ROWS[@]}"; do printf '; %s%s' "${ROWS[$i]%%|*}" "${RUNS[h${CONNS}_${i}_rps]}"; done)" >&2

# RSS idle and with TUNNELS idle CONNECT tunnels open: the gate, and smokescreen when it runs.
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
hold_tunnels() { # pid proxy-addr → "rss_before_kb rss_with_tunnels_kb"
  local before with idle_pid
  before=$(rss_kb "$1")
  rm -f "$WORK/hold" "$WORK/idle.out"; mkfifo "$WORK/hold"
  "$REL/connect_bench" idle "$ORIGIN" "$TUNNELS" "$2" <"$WORK/hold" >"$WORK/idle.out" & idle_pid=$!
  exec 9>"$WORK/hold"
  for _ in $(seq 300); do [ -s "$WORK/idle.out" ] && break; sleep 0.1; done
  sleep 1
  with=$(rss_kb "$1")
  exec 9>&-
  wait "$idle_pid" 2>/dev/null || true
  echo "$before $with"
}
read -r RSS_BEFORE RSS_IDLE < <(hold_tunnels "$GATE_PID" "$PROXY")
SMOKE_RSS=""
if [ -n "$SMOKE_PID" ]; then
  for i in "${!ROWS[@]}"; do
    case "${ROWS[$i]}" in smokescreen*)
      IFS='|' read -r _ url _ _ _ <<<"${ROWS[$i]}"; addr=${url#http://}; addr=${addr%/}
      SMOKE_RSS=$(hold_tunnels "$SMOKE_PID" "$addr") ;;
    esac
  done
fi

# The tables: one per path and connection count, every proxy against the same direct run.
table() { # prefix conns title
  local p=$1 c=$2 i name d_rps d50 rps cpu
  d_rps=$(m "${p}${c}_d_rps"); d50=$(m "${p}${c}_d_50")
  printf '\n%s, %s conns\n' "$3" "$c"
  printf '%-40s %9s %6s %8s %8s %8s %10s\n' proxy req/s ratio "p50 ms" "p99 ms" "+p50 ms" "CPU us/req"
  printf '%-40s %9d %6s %8.3f %8.3f %8s %10s\n' "direct (no proxy)" "$d_rps" 1.00 "$d50" "$(m "${p}${c}_d_99")" - -
  for i in "${!ROWS[@]}"; do
    [ -n "${RUNS[${p}${c}_${i}_rps]:-}" ] || continue
    name=${ROWS[$i]%%|*}; rps=$(m "${p}${c}_${i}_rps")
    IFS='|' read -r _ _ _ pid _ <<<"${ROWS[$i]}"
    cpu=-; [ -n "$pid" ] && [ "${REQS[${p}${c}_$i]}" -gt 0 ] && \
      cpu=$(awk -v t="${TICKS[${p}${c}_$i]}" -v n="${REQS[${p}${c}_$i]}" -v u="$TICK_US" 'BEGIN { printf "%.1f", t * u / n }')
    awk -v name="$name" -v rps="$rps" -v d="$d_rps" -v p50="$(m "${p}${c}_${i}_50")" -v p99="$(m "${p}${c}_${i}_99")" \
      -v d50="$d50" -v cpu="$cpu" 'BEGIN { printf "%-40s %9d %6.2f %8.3f %8.3f %8.3f %10s\n", name, rps, rps / d, p50, p99, p50 - d50, cpu }'
  done
}
for c in "$CONNS" 1; do
  table h "$c" "HTTP: absolute-form through forward proxies, origin-form through HAProxy and the relays"
done
for c in "$CONNS" 1; do
  table c "$c" "CONNECT: keep-alive HTTP/1.1 inside tunnels (HAProxy and the relay: straight to them)"
done
# The gate against each peer, same runs: req/s ratio and CPU per request ratio.
peer_line() { # row-index-of-peer label [row-index-of-the-gate]
  local out="" p c k rg rp cg cp g=${3:-0}
  for p in h c; do
    for c in "$CONNS" 1; do
      [ -n "${RUNS[${p}${c}_$1_rps]:-}" ] || continue
      k=${p}${c}; rg=$(m "${k}_${g}_rps"); rp=$(m "${k}_$1_rps")
      cg=$(awk -v t="${TICKS[${k}_${g}]}" -v n="${REQS[${k}_${g}]}" 'BEGIN { print (n ? t / n : 0) }')
      cp=$(awk -v t="${TICKS[${k}_$1]}" -v n="${REQS[${k}_$1]}" 'BEGIN { print (n ? t / n : 0) }')
      out+=$(awk -v l="$([ $p = h ] && echo HTTP || echo CONNECT) $c" -v rg="$rg" -v rp="$rp" -v cg="$cg" -v cp="$cp" \
        'BEGIN { printf "; %s: %.2fx req/s, %.2fx CPU/req", l, rg / rp, (cp ? cg / cp : 0) }')
    done
  done
  echo "${ROWS[$g]%%|*} / $2${out}"
}
echo
GATES=(0)
for i in "${!ROWS[@]}"; do
  case "${ROWS[$i]%%|*}" in "fleetgate --workers 1") GATES+=("$i") ;; esac
done
for g in "${GATES[@]}"; do
  for i in "${!ROWS[@]}"; do
    [ "$i" = "$g" ] && continue
    name=${ROWS[$i]%%|*}
    case "$name" in
      "fleetgate forward proxy") [ "$g" != 0 ] && peer_line "$i" "$name" "$g" ;;
      smokescreen*|HAProxy*|zero-logic*|"fleetgate baseline"*) peer_line "$i" "$name" "$g" ;;
    esac
  done
done
printf 'gate RSS: %.1f MB idle, %.1f MB with %d idle tunnels\n' "$(echo "$RSS_BEFORE / 1024" | bc -l)" \
  "$(echo "$RSS_IDLE / 1024" | bc -l)" "$TUNNELS"
if [ -n "$SMOKE_RSS" ]; then
  read -r a b <<<"$SMOKE_RSS"
  printf 'smokescreen RSS: %.1f MB idle, %.1f MB with %d idle tunnels\n' "$(echo "$a / 1024" | bc -l)" \
    "$(echo "$b / 1024" | bc -l)" "$TUNNELS"
fi
