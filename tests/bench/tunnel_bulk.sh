#!/usr/bin/env bash
# Bulk TLS through CONNECT tunnels (issue 46), side by side in one run on this machine (client,
# origin and proxy share it): an agent's real traffic is TLS inside a tunnel with pages of 10 KB
# to 10 MB, where the gate, once it has judged the ClientHello, only copies bytes. This measures
# that copy: throughput and the proxy's CPU per megabyte moved. Release builds.
#
# The origin (`tunnel_bulk_origin`) is keep-alive HTTP/1.1 over TLS (rustls) on loopback with a
# certificate made at start for `origin.test`, answering `GET /bytes/<n>` with n body bytes. The
# client (`tunnel_bulk_client`) opens C connections, each a CONNECT tunnel to origin.test:<port>
# through a forward proxy or a TCP connection straight to a TCP relay, does the TLS handshake
# (server name origin.test, only the bench's CA trusted) and one warm-up request, then sends
# `GET /bytes/<size>` back to back for the run's seconds, reading whole bodies; a request in
# flight at the end is read to its end, so the bytes a proxy moved are the bytes counted. Every
# response must be 200 with exactly <size> body bytes (TLS authenticates every record, so a whole
# body is an intact one); anything else counts as an error, reported per row and as a warning.
#
# Rows, in the same rounds (each round runs every row back to back on every cell, so a burst of
# load from elsewhere hits every row alike; figures are medians over the rounds):
# - direct (no proxy): the client straight to the origin, the machine's ceiling;
# - fleetgate (FLEETGATE_PROXY_BIN, default this tree's release build) with the policy of
#   tests/bench/forward_proxy.sh: loopback allowed, only the origin's port, and its own resolver
#   pointed at tests/bench/stub_dns.py, which answers origin.test with 127.0.0.1. The tunnel
#   carries a real ClientHello naming origin.test, so the gate judges it as TLS (the script
#   checks the decision line's server name) and then copies it as bytes;
# - fleetgate baseline, with BASELINE_BIN=/path/to/an/earlier/fleetgate-proxy, the same way;
# - smokescreen (SMOKESCREEN=1, the default), built as forward_proxy.sh builds it
#   (tests/bench/smokescreen/build.sh, machine cache) and configured as there, with its resolver
#   pointed at the same stub and an ACL allowing only origin.test; skipped with a note when it
#   cannot be built;
# - HAProxy in `mode tcp` with `option splice-auto` and `nbthread 2`, and the same HAProxy
#   without splice (NOSPLICE=1, the default): the production TCP relay with and without
#   splice(2), installed with apt when missing;
# - the zero-logic relay (`bench_relay --copy`: tokio's copy_bidirectional each way, no gates).
# HAProxy and the relay do not CONNECT: the client goes straight to them, the byte path a tunnel
# reduces to once it is open.
#
# Cells: body sizes SIZES (default 1 KB, 100 KB and 10 MB, decimal) at CONNS connections (default
# 64 and 1). A cell runs SECS seconds (default 3), a 10 MB cell BIG_SECS (default 6): at 64
# connections a 10 MB body takes about a second per connection on two shared cores, so 3 s
# would count two or three requests per connection. MB/s counts every body byte received in the
# window, partial bodies included, so it does not depend on how requests fall on the window's
# edges; req/s counts the requests finished in it. CPU per MB is the proxy process's utime +
# stime (/proc/<pid>/stat) over every body byte it moved (warm-up and drain included), summed
# over the rounds. From 100 KB up, TLS records and HTTP heads add under 1% to those bytes; at
# 1 KB they add about a sixth, and the figure is in effect a cost per request.
#
# Defaults take about 6 minutes on the 2-core build machine (2 rounds; 7 with BASELINE_BIN).
# Output: a markdown table per row and cell, then the gate's ratios to each peer (MB/s and CPU
# per MB), on stdout; JSON=<file> also writes one JSON line per row and cell there.
#
# Usage: tests/bench/tunnel_bulk.sh   (env: SECS=3 BIG_SECS=6 ROUNDS=2 SIZES="1000 100000 10000000"
# CONNS="64 1" SMOKESCREEN=1 HAPROXY=1 NOSPLICE=1 BASELINE_BIN= FLEETGATE_PROXY_BIN= BUILD=1 JSON=;
# BUILD=0 takes the release binaries already in the target dir)
set -euo pipefail

SECS=${SECS:-3}
BIG_SECS=${BIG_SECS:-6}
ROUNDS=${ROUNDS:-2}
SIZES=${SIZES:-1000 100000 10000000}
CONNS=${CONNS:-64 1}
SMOKESCREEN=${SMOKESCREEN:-1}
HAPROXY=${HAPROXY:-1}
NOSPLICE=${NOSPLICE:-1}
JSON=${JSON:-}
SNI=origin.test
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
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

if [ "${BUILD:-1}" = 1 ]; then
  echo "building release binaries..." >&2
  (cd "$ROOT" && cargo build -q --release -p fleetgate-proxy --bin fleetgate-proxy \
    && cargo build -q --release -p fleetgate-e2e --example tunnel_bulk_origin --example tunnel_bulk_client \
       --example bench_relay)
fi
# Private copies: a shared target dir may be rebuilt by someone else while this runs.
cp "${FLEETGATE_PROXY_BIN:-$REL/fleetgate-proxy}" "$WORK/fleetgate-proxy"
cp "$REL/examples/tunnel_bulk_origin" "$REL/examples/tunnel_bulk_client" "$REL/examples/bench_relay" "$WORK/"
[ -z "${BASELINE_BIN:-}" ] || cp "$BASELINE_BIN" "$WORK/fleetgate-baseline"

# Wait for the `{"listening": ...}` line a process prints on stdout into $1.
first_line() {
  for _ in $(seq 100); do [ -s "$1" ] && { head -n1 "$1"; return; }; sleep 0.1; done
  echo "no listening line in $1" >&2; cat "$WORK"/*.err >&2 2>/dev/null; exit 1
}
listening() { first_line "$1" | sed -E 's/.*"listening": "([^"]+)".*/\1/'; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
free_udp_port() { python3 -c 'import socket; s = socket.socket(type=socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() {
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# The origin, and the stub name server that answers origin.test (every A query) with 127.0.0.1.
"$WORK/tunnel_bulk_origin" "$WORK/ca.pem" >"$WORK/origin.out" 2>"$WORK/origin.err" & PIDS+=($!)
ORIGIN=$(listening "$WORK/origin.out")
OPORT=${ORIGIN##*:}
DNS_PORT=$(free_udp_port)
python3 "$ROOT/tests/bench/stub_dns.py" "$DNS_PORT" 127.0.0.1 >"$WORK/dns.out" 2>"$WORK/dns.err" & PIDS+=($!)
first_line "$WORK/dns.out" >/dev/null
"$WORK/bench_relay" "$ORIGIN" --copy >"$WORK/relay.out" 2>"$WORK/relay.err" & RELAY_PID=$!; PIDS+=($!)
RELAY=$(listening "$WORK/relay.out")

# Rows: "name|mode|addr|pid"; mode "tunnel" (CONNECT origin.test:<port> through addr) or
# "direct" (TLS straight to addr); pid empty: no proxy process to charge CPU to.
ROWS=("direct (no proxy)|direct|$ORIGIN|")

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
  resolver: {nameservers: ["127.0.0.1:$DNS_PORT"]}
YAML
gate() { # row-name file-name binary
  local pid addr
  RUST_LOG=info "$3" serve --policy "$WORK/policy.yaml" >"$WORK/$2.out" 2>"$WORK/$2.err" & pid=$!; PIDS+=($pid)
  addr=$(first_line "$WORK/$2.out" | sed -E 's/.*"forward_proxy": ?"([^"]+)".*/\1/')
  ROWS+=("$1|tunnel|$addr|$pid")
}
gate fleetgate gate "$WORK/fleetgate-proxy"
[ -z "${BASELINE_BIN:-}" ] || gate "fleetgate baseline" baseline "$WORK/fleetgate-baseline"

if [ "$SMOKESCREEN" = 1 ]; then
  if SMOKE_BIN=$("$ROOT/tests/bench/smokescreen/build.sh" | tail -n1); then
    port=$(free_port)
    # forward_proxy.sh's configuration (the origin's one address and port allowed, an ACL
    # enforcing an allow-list of the origin's host, no role, an upstream pool as large as the
    # load), with the stub as its resolver.
    cat >"$WORK/smokescreen-acl.yaml" <<YAML
version: v1
services: []
default:
  project: fleetgate-bench
  action: enforce
  allowed_domains:
    - $SNI
YAML
    cat >"$WORK/smokescreen.yaml" <<YAML
ip: 127.0.0.1
port: $port
allow_missing_role: true
acl_file: $WORK/smokescreen-acl.yaml
allow_addresses: ["127.0.0.1:$OPORT"]
resolver_addresses: ["127.0.0.1:$DNS_PORT"]
transport_max_idle_conns: 1024
transport_max_idle_conns_per_host: 1024
YAML
    "$SMOKE_BIN" --config-file "$WORK/smokescreen.yaml" >"$WORK/smokescreen.log" 2>&1 & pid=$!; PIDS+=($pid)
    if wait_port "$port"; then ROWS+=("smokescreen v0.1.0|tunnel|127.0.0.1:$port|$pid")
    else echo "smokescreen did not start: $(head -c 300 "$WORK/smokescreen.log"); skipped" >&2; fi
  else echo "smokescreen could not be built: skipped" >&2; fi
fi

if [ "$HAPROXY" = 1 ]; then
  export PATH=$PATH:/usr/sbin
  if command -v haproxy >/dev/null || { apt-get install -y haproxy >/dev/null 2>&1 \
    || { apt-get update >/dev/null 2>&1 && apt-get install -y haproxy >/dev/null 2>&1; }; }; then
    HA_VERSION=$(haproxy -v | awk 'NR==1{print $3}' | cut -d- -f1 | cut -d. -f1,2)
    haproxy_row() { # name splice-option
      local port pid
      port=$(free_port)
      cat >"$WORK/haproxy-$port.cfg" <<CFG
global
  maxconn 4000
  nbthread 2
defaults
  mode tcp
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  $2
frontend bulk
  bind 127.0.0.1:$port
  default_backend origin
backend origin
  server origin $ORIGIN
CFG
      haproxy -db -f "$WORK/haproxy-$port.cfg" >"$WORK/haproxy-$port.err" 2>&1 & pid=$!; PIDS+=($pid)
      if wait_port "$port"; then ROWS+=("$1|direct|127.0.0.1:$port|$pid")
      else echo "haproxy did not start: $(head -c 300 "$WORK/haproxy-$port.err")" >&2; fi
    }
    haproxy_row "HAProxy $HA_VERSION mode tcp, splice-auto" "option splice-auto"
    [ "$NOSPLICE" != 1 ] || haproxy_row "HAProxy $HA_VERSION mode tcp, no splice" "no option splice-auto"
  else echo "haproxy not installed: skipped" >&2; fi
fi
ROWS+=("zero-logic relay (copy)|direct|$RELAY|$RELAY_PID")

# Every row must carry a whole body before it is measured, and the gate must have judged its
# tunnel as TLS with the server name origin.test.
client() { # mode addr conns secs size
  case "$1" in
    tunnel) "$WORK/tunnel_bulk_client" "$SNI:$OPORT" "$3" "$4" "$5" "$WORK/ca.pem" "$SNI" "$2" ;;
    *) "$WORK/tunnel_bulk_client" "$2" "$3" "$4" "$5" "$WORK/ca.pem" "$SNI" ;;
  esac
}
json_field() { sed -E "s/.*\"$1\": ([0-9.]+).*/\1/"; }
for row in "${ROWS[@]}"; do
  IFS='|' read -r name mode addr _ <<<"$row"
  out=$(client "$mode" "$addr" 2 1 100000 2>"$WORK/check.err") || true
  if [ "$(echo "$out" | json_field errors)" != 0 ] || [ "$(echo "$out" | json_field requests)" = 0 ]; then
    echo "$name does not carry the bench's TLS: $out $(head -c 300 "$WORK/check.err")" >&2; exit 1
  fi
done
for g in gate baseline; do
  [ -f "$WORK/$g.err" ] || continue
  grep -qs "sni.\{0,4\}$SNI" "$WORK/$g.out" "$WORK/$g.err" || {
    echo "the $g's decision lines name no server name $SNI: the tunnels were not judged as TLS" >&2
    tail -n 3 "$WORK/$g.err" >&2; exit 1
  }
done
if [ -f "$WORK/smokescreen.log" ] && [ -n "$(printf '%s\n' "${ROWS[@]}" | grep '^smokescreen')" ]; then
  # Its ACL must refuse a name it does not list, or the row measures no gate at all.
  if curl -s -o /dev/null -x "http://$(printf '%s\n' "${ROWS[@]}" | awk -F'|' '/^smokescreen/ { print $3 }')" \
    --cacert "$WORK/ca.pem" "https://other.test:$OPORT/bytes/1"; then
    echo "smokescreen's ACL lets other.test through" >&2; exit 1
  fi
fi

cpu_ticks() { if [ -n "$1" ]; then awk '{ print $14 + $15 }' "/proc/$1/stat"; else echo 0; fi; }
TICK_MS=$(awk -v t="$(getconf CLK_TCK)" 'BEGIN { print 1000 / t }')
declare -A RUNS=() BYTES=() TICKS=() ERRS=()
# One run of the client: key mode addr pid conns secs size.
run() {
  local t0 t1 out
  t0=$(cpu_ticks "$4")
  out=$(client "$2" "$3" "$5" "$6" "$7" 2>"$WORK/run.err") || out='{"errors": -1}'
  t1=$(cpu_ticks "$4")
  local errors requests
  errors=$(echo "$out" | json_field errors)
  [ "$errors" != -1 ] || { echo "warning: $1: the client failed: $(head -c 300 "$WORK/run.err")" >&2; ERRS[$1]=$((${ERRS[$1]:-0} + 1)); return; }
  [ "$errors" = 0 ] || echo "warning: $1: $errors errors ($(head -c 200 "$WORK/run.err"))" >&2
  requests=$(echo "$out" | json_field requests)
  RUNS[$1_rps]+=" $(echo "$out" | json_field rps)"; RUNS[$1_mbps]+=" $(echo "$out" | json_field mbps)"
  RUNS[$1_50]+=" $(echo "$out" | json_field p50_ms)"; RUNS[$1_99]+=" $(echo "$out" | json_field p99_ms)"
  BYTES[$1]=$((${BYTES[$1]:-0} + $(echo "$out" | json_field total_bytes)))
  TICKS[$1]=$((${TICKS[$1]:-0} + t1 - t0)); ERRS[$1]=$((${ERRS[$1]:-0} + errors))
  [ "$requests" != 0 ] || echo "warning: $1: no request finished in the window" >&2
}

cells=0; for _ in $SIZES; do for _ in $CONNS; do cells=$((cells + 1)); done; done
echo "$ROUNDS rounds of ${#ROWS[@]} rows x $cells cells (${SECS}s, 10 MB and up ${BIG_SECS}s)" >&2
# Warm every row once (allocators, thread pools, the resolvers' caches); not recorded.
for i in "${!ROWS[@]}"; do
  IFS='|' read -r _ mode addr _ <<<"${ROWS[$i]}"
  client "$mode" "$addr" 16 1 100000 >/dev/null 2>&1 || true
done
for round in $(seq "$ROUNDS"); do
  echo "round $round/$ROUNDS" >&2
  for size in $SIZES; do
    secs=$SECS; [ "$size" -lt 10000000 ] || secs=$BIG_SECS
    for c in $CONNS; do
      for i in "${!ROWS[@]}"; do
        IFS='|' read -r _ mode addr pid <<<"${ROWS[$i]}"
        run "${size}_${c}_$i" "$mode" "$addr" "$pid" "$c" "$secs" "$size"
      done
    done
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "" }'; }
m() { echo "${RUNS[$1]:-}" | median; }
# CPU ms per MB (10^6 body bytes), or "-" without a process or bytes.
cpu_mb() { # key pid
  [ -n "$2" ] && [ "${BYTES[$1]:-0}" -gt 0 ] || { echo -; return; }
  awk -v t="${TICKS[$1]}" -v b="${BYTES[$1]}" -v ms="$TICK_MS" 'BEGIN { printf "%.2f", t * ms / (b / 1e6) }'
}
size_label() { awk -v s="$1" 'BEGIN { if (s >= 1e6) printf "%g MB", s / 1e6; else if (s >= 1e3) printf "%g KB", s / 1e3; else printf "%d B", s }'; }

echo
echo "| size | conns | proxy | req/s | MB/s | p50 ms | p99 ms | CPU ms/MB | errors |"
echo "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for size in $SIZES; do
  for c in $CONNS; do
    for i in "${!ROWS[@]}"; do
      IFS='|' read -r name _ _ pid <<<"${ROWS[$i]}"
      k=${size}_${c}_$i
      [ -n "${RUNS[${k}_rps]:-}" ] || { echo "| $(size_label "$size") | $c | $name | failed | | | | | ${ERRS[$k]:-} |"; continue; }
      cpu=$(cpu_mb "$k" "$pid")
      awk -v s="$(size_label "$size")" -v c="$c" -v n="$name" -v rps="$(m "${k}_rps")" -v mbps="$(m "${k}_mbps")" \
        -v p50="$(m "${k}_50")" -v p99="$(m "${k}_99")" -v cpu="$cpu" -v e="${ERRS[$k]:-0}" \
        'BEGIN { printf "| %s | %d | %s | %.0f | %.1f | %.2f | %.2f | %s | %d |\n", s, c, n, rps, mbps, p50, p99, cpu, e }'
      if [ -n "$JSON" ]; then
        printf '{"size": %s, "conns": %s, "proxy": "%s", "rps": %s, "mbps": %s, "p50_ms": %s, "p99_ms": %s, "cpu_ms_per_mb": %s, "bytes": %s, "errors": %s, "rounds": %s}\n' \
          "$size" "$c" "$name" "$(m "${k}_rps")" "$(m "${k}_mbps")" "$(m "${k}_50")" "$(m "${k}_99")" \
          "$([ "$cpu" = - ] && echo null || echo "$cpu")" "${BYTES[$k]}" "${ERRS[$k]:-0}" "$ROUNDS" >>"$JSON"
      fi
    done
  done
done

# The gate against each peer, same cells: MB/s ratio (above 1: the gate moves more) and CPU per
# MB ratio (below 1: the gate spends less).
GATE=1
PEERS=()
for i in "${!ROWS[@]}"; do
  case "${ROWS[$i]%%|*}" in "fleetgate baseline"|smokescreen*|HAProxy*|zero-logic*) PEERS+=("$i") ;; esac
done
ratio() { # gate-key peer-key gate-pid peer-pid
  local g p cg cp
  g=$(m "${1}_mbps"); p=$(m "${2}_mbps"); cg=$(cpu_mb "$1" "$3"); cp=$(cpu_mb "$2" "$4")
  [ -n "$g" ] && [ -n "$p" ] || { echo "-"; return; }
  awk -v g="$g" -v p="$p" -v cg="$cg" -v cp="$cp" 'BEGIN {
    out = (p > 0) ? sprintf("%.2fx", g / p) : "-"
    out = out " / " ((cg != "-" && cp != "-" && cp > 0) ? sprintf("%.2fx", cg / cp) : "-")
    print out }'
}
echo
printf '| fleetgate / peer: MB/s, CPU per MB | conns'
for p in "${PEERS[@]}"; do printf ' | %s' "${ROWS[$p]%%|*}"; done
printf ' |\n| --- | ---:'
for _ in "${PEERS[@]}"; do printf ' | ---'; done
printf ' |\n'
IFS='|' read -r _ _ _ gpid <<<"${ROWS[$GATE]}"
for size in $SIZES; do
  for c in $CONNS; do
    printf '| %s | %d' "$(size_label "$size")" "$c"
    for p in "${PEERS[@]}"; do
      IFS='|' read -r _ _ _ ppid <<<"${ROWS[$p]}"
      printf ' | %s' "$(ratio "${size}_${c}_$GATE" "${size}_${c}_$p" "$gpid" "$ppid")"
    done
    printf ' |\n'
  done
done
total_errors=0; for k in "${!ERRS[@]}"; do total_errors=$((total_errors + ${ERRS[$k]})); done
echo
echo "medians of $ROUNDS rounds, ${SECS}s per cell (10 MB and up: ${BIG_SECS}s); CPU per MB summed over the rounds; $total_errors errors"
