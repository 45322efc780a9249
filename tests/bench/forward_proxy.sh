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
# reverse proxy to the origin (keep-alive reuse, two threads, no logs), squid and tinyproxy as
# forward proxies (absolute-form, no cache, no access log). None of them runs gates; they show
# where a production proxy lands on the same two cores.
# A hyper-based relay (`bench_hyper_relay`: hyper's server and client, re-framing by
# construction, no gates) runs in the same rounds as the reference for the gate's own HTTP/1.1.
#
# With BASELINE_BIN=/path/to/an/earlier/fleetgate-proxy the same rounds also drive that build as
# a second forward proxy (row "fleetgate baseline"), so a change on the hot path shows its ratio
# before and after in one run.
#
# Usage: tests/bench/forward_proxy.sh   (env: CONNS=64 SECS=5 ROUNDS=3 TUNNELS=1000 GATE_LOG=info
# REFERENCES=1 BASELINE_BIN=; the gate logs its one decision line per request at the default
# level, to a file)
# Bars (issue): requests/s ratio >= 0.6, added p50 < 0.3 ms, RSS < 64 MB.
set -euo pipefail

CONNS=${CONNS:-64}
SECS=${SECS:-5}
ROUNDS=${ROUNDS:-3}
TUNNELS=${TUNNELS:-1000}
REFERENCES=${REFERENCES:-1}
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

echo "building release binaries..." >&2
(cd "$ROOT" && cargo build -q --release -p fleetgate-proxy --bin fleetgate-proxy \
  && cargo build -q --release -p fleetgate-e2e --example bench_origin --example connect_bench --example bench_relay \
     --example bench_hyper_relay)
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
"$REL/bench_relay" "$ORIGIN" >"$WORK/relay.out" & PIDS+=($!)
RELAY=$(first_line "$WORK/relay.out" | sed -E 's/.*"listening": "([^"]+)".*/\1/')

# Reference proxies: "name|url|lua" lines, one wrk target each (lua empty: origin-form).
# First hyper's server and client as a relay (re-framing by construction, no gates): what the
# gate's hand-written HTTP/1.1 is weighed against.
"$REL/bench_hyper_relay" "$ORIGIN" >"$WORK/hyper.out" & PIDS+=($!)
HYPER=$(first_line "$WORK/hyper.out" | sed -E 's/.*"listening": "([^"]+)".*/\1/')
REFS=("hyper relay, no gates|http://$HYPER/|absolute")
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
    haproxy -db -f "$WORK/haproxy.cfg" >"$WORK/haproxy.err" 2>&1 & PIDS+=($!)
    if wait_port "$port"; then REFS+=("HAProxy $(haproxy -v | awk 'NR==1{print $3}' | cut -d- -f1) reverse proxy|http://127.0.0.1:$port/|")
    else echo "haproxy did not start: $(head -c 300 "$WORK/haproxy.err")" >&2; fi
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
    squid -N -f "$WORK/squid/squid.conf" >"$WORK/squid.err" 2>&1 & PIDS+=($!)
    if wait_port "$port"; then REFS+=("squid $(squid -v | awk 'NR==1{print $4}') forward proxy|http://127.0.0.1:$port/|absolute")
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
    tinyproxy -d -c "$WORK/tinyproxy.conf" >"$WORK/tinyproxy.err" 2>&1 & PIDS+=($!)
    if wait_port "$port"; then REFS+=("tinyproxy $(tinyproxy -v | awk '{print $2}') forward proxy|http://127.0.0.1:$port/|absolute")
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
  >"$WORK/gate.out" 2>"$WORK/gate.err" & GATE_PID=$!; PIDS+=($GATE_PID)
PROXY=$(first_line "$WORK/gate.out" | sed -E 's/.*"forward_proxy": ?"([^"]+)".*/\1/')

if [ -n "${BASELINE_BIN:-}" ]; then
  cp "$BASELINE_BIN" "$WORK/fleetgate-baseline"
  RUST_LOG=${GATE_LOG:-info} "$WORK/fleetgate-baseline" serve --policy "$WORK/policy.yaml" \
    >"$WORK/baseline.out" 2>"$WORK/baseline.err" & PIDS+=($!)
  BASE_PROXY=$(first_line "$WORK/baseline.out" | sed -E 's/.*"forward_proxy": ?"([^"]+)".*/\1/')
  REFS=("fleetgate baseline (BASELINE_BIN)|http://$BASE_PROXY/|absolute" "${REFS[@]}")
fi

# wrk --latency output → "rps p50_ms p99_ms".
wrk_stats() {
  awk '
    function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0; if (v ~ /s$/) return v*1000; return v }
    /^ +50%/ { p50 = ms($2) } /^ +99%/ { p99 = ms($2) } /^Requests\/sec:/ { rps = $2 }
    END { printf "%.0f %.3f %.3f\n", rps, p50, p99 }'
}
echo 'wrk.path = "http://'"$ORIGIN"'/"' >"$WORK/absolute.lua"
echo "wrk: $CONNS connections, 1 thread, ${SECS}s each, $ROUNDS rounds" >&2
# The gate's CPU time in clock ticks (user + system), for CPU per relayed request: unlike the
# ratio, it does not depend on how much of the machine other processes take.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$GATE_PID/stat"; }
TICK_US=$((1000000 / $(getconf CLK_TCK)))
# ROUNDS rounds, each running direct, proxy and relay back to back, so a burst of load from
# elsewhere hits every path alike; each figure is the median over the rounds.
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
declare -A RUNS=()
F_TICKS=0; F_REQS=0
for round in $(seq "$ROUNDS"); do
  echo "round $round/$ROUNDS" >&2
  read -r a b c < <(wrk -t1 -c"$CONNS" -d"${SECS}s" --latency "http://$ORIGIN/" | wrk_stats)
  RUNS[d_rps]+=" $a"; RUNS[d50]+=" $b"; RUNS[d99]+=" $c"
  T0=$(cpu_ticks)
  read -r a b c < <(wrk -t1 -c"$CONNS" -d"${SECS}s" --latency -s "$WORK/absolute.lua" "http://$PROXY/" | wrk_stats)
  T1=$(cpu_ticks)
  RUNS[f_rps]+=" $a"; RUNS[f50]+=" $b"; RUNS[f99]+=" $c"
  F_TICKS=$((F_TICKS + T1 - T0)); F_REQS=$((F_REQS + a * SECS))
  read -r a b c < <(wrk -t1 -c"$CONNS" -d"${SECS}s" --latency "http://$RELAY/" | wrk_stats)
  RUNS[r_rps]+=" $a"; RUNS[r50]+=" $b"; RUNS[r99]+=" $c"
  for i in "${!REFS[@]}"; do
    IFS='|' read -r _ url lua <<<"${REFS[$i]}"
    read -r a b c < <(wrk -t1 -c"$CONNS" -d"${SECS}s" --latency ${lua:+-s "$WORK/absolute.lua"} "$url" | wrk_stats)
    RUNS[x${i}_rps]+=" $a"; RUNS[x${i}50]+=" $b"; RUNS[x${i}99]+=" $c"
  done
  # Unqueued latency: one connection, direct vs through the gate.
  read -r _ b c < <(wrk -t1 -c1 -d"${SECS}s" --latency "http://$ORIGIN/" | wrk_stats)
  RUNS[ld50]+=" $b"; RUNS[ld99]+=" $c"
  read -r _ b c < <(wrk -t1 -c1 -d"${SECS}s" --latency -s "$WORK/absolute.lua" "http://$PROXY/" | wrk_stats)
  RUNS[lf50]+=" $b"; RUNS[lf99]+=" $c"
done
m() { echo "${RUNS[$1]}" | median; }
D_RPS=$(m d_rps); D_P50=$(m d50); D_P99=$(m d99)
F_RPS=$(m f_rps); F_P50=$(m f50); F_P99=$(m f99)
R_RPS=$(m r_rps); R_P50=$(m r50); R_P99=$(m r99)
L_D50=$(m ld50); L_D99=$(m ld99); L_F50=$(m lf50); L_F99=$(m lf99)
echo "per round (req/s): direct${RUNS[d_rps]}; proxy${RUNS[f_rps]}; relay${RUNS[r_rps]}$(for i in "${!REFS[@]}"; do printf '; %s%s' "${REFS[$i]%% *}" "${RUNS[x${i}_rps]}"; done)" >&2

json_field() { sed -E "s/.*\"$1\": ([0-9.]+).*/\1/"; }
CD=$("$REL/connect_bench" load "$ORIGIN" "$CONNS" "$SECS")
T2=$(cpu_ticks)
CT=$("$REL/connect_bench" load "$ORIGIN" "$CONNS" "$SECS" "$PROXY")
T3=$(cpu_ticks)
C_D_RPS=$(echo "$CD" | json_field rps); C_D_P50=$(echo "$CD" | json_field p50_ms); C_D_P99=$(echo "$CD" | json_field p99_ms)
C_T_N=$(echo "$CT" | json_field requests)
C_T_RPS=$(echo "$CT" | json_field rps); C_T_P50=$(echo "$CT" | json_field p50_ms); C_T_P99=$(echo "$CT" | json_field p99_ms)
CD1=$("$REL/connect_bench" load "$ORIGIN" 1 "$SECS")
CT1=$("$REL/connect_bench" load "$ORIGIN" 1 "$SECS" "$PROXY")
L_CD50=$(echo "$CD1" | json_field p50_ms); L_CD99=$(echo "$CD1" | json_field p99_ms)
L_CT50=$(echo "$CT1" | json_field p50_ms); L_CT99=$(echo "$CT1" | json_field p99_ms)

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$GATE_PID/status"; }
RSS_BEFORE=$(rss_kb)
mkfifo "$WORK/hold"
"$REL/connect_bench" idle "$ORIGIN" "$TUNNELS" "$PROXY" <"$WORK/hold" >"$WORK/idle.out" & IDLE_PID=$!; PIDS+=($IDLE_PID)
exec 9>"$WORK/hold"
for _ in $(seq 300); do [ -s "$WORK/idle.out" ] && break; sleep 0.1; done
sleep 1
RSS_IDLE=$(rss_kb)
exec 9>&-
wait "$IDLE_PID" 2>/dev/null || true

REF_ROWS=""
for i in "${!REFS[@]}"; do
  REF_ROWS+="${REF_ROWS:+;}${REFS[$i]%%|*}|$(m "x${i}_rps")|$(m "x${i}50")|$(m "x${i}99")"
done

awk -v d_rps="$D_RPS" -v d50="$D_P50" -v d99="$D_P99" -v f_rps="$F_RPS" -v f50="$F_P50" -v f99="$F_P99" \
    -v cd_rps="$C_D_RPS" -v cd50="$C_D_P50" -v cd99="$C_D_P99" -v ct_rps="$C_T_RPS" -v ct50="$C_T_P50" -v ct99="$C_T_P99" \
    -v r_rps="$R_RPS" -v r50="$R_P50" -v r99="$R_P99" \
    -v ld50="$L_D50" -v ld99="$L_D99" -v lf50="$L_F50" -v lf99="$L_F99" \
    -v lcd50="$L_CD50" -v lcd99="$L_CD99" -v lct50="$L_CT50" -v lct99="$L_CT99" \
    -v refs="$REF_ROWS" -v rss0="$RSS_BEFORE" -v rss="$RSS_IDLE" -v tunnels="$TUNNELS" -v conns="$CONNS" \
    -v f_cpu=$((F_TICKS * TICK_US)) -v c_cpu=$(((T3 - T2) * TICK_US)) -v secs="$SECS" -v f_reqs="$F_REQS" -v c_n="$C_T_N" 'BEGIN {
  printf "%-34s %10s %9s %9s %7s %10s %10s\n", "path (" conns " conns)", "req/s", "p50 ms", "p99 ms", "ratio", "+p50 ms", "+p99 ms"
  printf "%-34s %10d %9.3f %9.3f %7s %10s %10s\n", "wrk direct", d_rps, d50, d99, "1.00", "-", "-"
  printf "%-34s %10d %9.3f %9.3f %7.2f %10.3f %10.3f\n", "wrk via forward proxy (absolute)", f_rps, f50, f99, f_rps/d_rps, f50-d50, f99-d99
  printf "%-34s %10d %9.3f %9.3f %7.2f %10.3f %10.3f\n", "wrk via zero-logic relay (ceiling)", r_rps, r50, r99, r_rps/d_rps, r50-d50, r99-d99
  if (refs != "") {
    n = split(refs, ref, ";")
    for (i = 1; i <= n; i++) {
      split(ref[i], x, "|")
      printf "%-34s %10d %9.3f %9.3f %7.2f %10.3f %10.3f\n", x[1], x[2], x[3], x[4], x[2]/d_rps, x[3]-d50, x[4]-d99
    }
  }
  printf "%-34s %10d %9.3f %9.3f %7s %10s %10s\n", "connect_bench direct", cd_rps, cd50, cd99, "1.00", "-", "-"
  printf "%-34s %10d %9.3f %9.3f %7.2f %10.3f %10.3f\n", "connect_bench via CONNECT tunnel", ct_rps, ct50, ct99, ct_rps/cd_rps, ct50-cd50, ct99-cd99
  printf "forward proxy / zero-logic relay: %.2f of the ceiling\n", f_rps/r_rps
  printf "one connection, added latency: absolute-form +%.3f ms p50, +%.3f ms p99; CONNECT tunnel +%.3f ms p50, +%.3f ms p99\n", lf50-ld50, lf99-ld99, lct50-lcd50, lct99-lcd99
  printf "gate CPU per relayed request: %.1f us absolute-form, %.1f us in a CONNECT tunnel\n", f_cpu/f_reqs, c_cpu/c_n
  printf "gate RSS: %.1f MB before, %.1f MB with %d idle tunnels\n", rss0/1024, rss/1024, tunnels
}'
