#!/usr/bin/env bash
# Cache-hit benchmark, side by side in one run (wrk, origin and gate share this 2-core machine):
#   1. the same 20 KB page served by a bare loopback origin (GET, keep-alive)
#   2. a cache-hit extract through the gate's Firecrawl front (POST /v2/scrape; every gate runs,
#      the page comes from the shared volume)
#   3. a cold `direct` extract (POST /v1/extract of a loopback page: internal targets are never
#      cached, so every request resolves, gates, fetches, converts and assembles)
# Reports requests/s and p50/p99 of each and the ratios. Bar (issue): cache hit >= 0.3x the bare
# origin, p99 < 10 ms.
# With BASELINE_BIN=<another fleetgate-proxy build> a second gate runs that binary on the same
# volume (the same cache entry), and ROUNDS rounds alternate origin / hit (this build) / hit
# (baseline), so a before/after comparison is measured in one run on the same machine state.
# HOLD=1 stops after warming and prints the gates' pids and addresses (for perf/strace), until ^C.
# Usage: tests/bench/cache_hit.sh   (env: CONNS=32 SECS=10 ROUNDS=1 BASELINE_BIN= HOLD=)
set -euo pipefail
CONNS=${CONNS:-32}
SECS=${SECS:-10}
ROUNDS=${ROUNDS:-1}
BASELINE_BIN=${BASELINE_BIN:-}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$(mktemp -d)
PIDS=()
cleanup() { # the gates start in $(...) subshells: their pids are in $WORK/*.pid
  for p in "${PIDS[@]}" $(cat "$WORK"/*.pid 2>/dev/null); do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
command -v wrk >/dev/null || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }
(cd "$ROOT" && cargo build -q --release -p fleetgate-proxy --bin fleetgate-proxy \
  && cargo build -q --release -p fleetgate-e2e --example bench_origin)
cp "$TARGET/release/fleetgate-proxy" "$TARGET/release/examples/bench_origin" "$WORK/"
if [ -n "$BASELINE_BIN" ]; then cp "$BASELINE_BIN" "$WORK/baseline-proxy"; fi

python3 -c "import sys; print('\n\n'.join('Paragraph %d of the benchmark page, long enough to matter. ' % i * 3 for i in range(120)))" > "$WORK/page.md"
DNS_PORT=$((20000 + RANDOM % 10000)); FC_PORT=$((DNS_PORT + 1))
python3 "$ROOT/tests/bench/stub_dns.py" "$DNS_PORT" 93.184.215.14 > "$WORK/dns.out" & PIDS+=($!)
python3 "$ROOT/tests/bench/stub_firecrawl.py" "$FC_PORT" "$WORK/page.md" > "$WORK/fc.out" & PIDS+=($!)
"$WORK/bench_origin" 127.0.0.1:0 "$WORK/page.md" > "$WORK/origin.out" & PIDS+=($!)
sleep 1
ORIGIN=$(head -n1 "$WORK/origin.out" | sed -E 's/.*"listening": "([^"]+)".*/\1/')

gate() { # $1 name, $2 extra policy, $3 binary (default: this build), $4 volume (default: own)
  cat > "$WORK/$1.yaml" <<YAML
version: v1
listen: {api: 127.0.0.1:0, admin: 127.0.0.1:0}
store: {root: $WORK/${4:-$1}-volume}
egress:
  allowCIDRs: ["127.0.0.1/32"]
  resolver: {nameservers: ["127.0.0.1:$DNS_PORT"]}
$2
YAML
  RUST_LOG=warn FIRECRAWL_API_KEY=bench "${3:-$WORK/fleetgate-proxy}" serve --policy "$WORK/$1.yaml" > "$WORK/$1.out" 2> "$WORK/$1.err" & PIDS+=($!)
  for _ in $(seq 100); do [ -s "$WORK/$1.out" ] && break; sleep 0.1; done
  echo "${PIDS[-1]}" > "$WORK/$1.pid"
  head -n1 "$WORK/$1.out" | sed -E 's/.*"api":"([^"]+)".*/\1/'
}
FC_GATE=$(gate fc "web: {extractBackend: firecrawl, rescue: [], vendors: {firecrawl: {baseUrl: \"http://127.0.0.1:$FC_PORT\"}}}")
DIRECT_GATE=$(gate direct "web: {extractBackend: direct, rescue: []}")
if [ -n "$BASELINE_BIN" ]; then
  BASE_GATE=$(gate base "web: {extractBackend: firecrawl, rescue: [], vendors: {firecrawl: {baseUrl: \"http://127.0.0.1:$FC_PORT\"}}}" "$WORK/baseline-proxy" fc)
fi

cat > "$WORK/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = os.getenv("BODY")
LUA
# Warm the cache (the write is in the background).
for _ in 1 2 3; do curl -s -o /dev/null -XPOST "http://$FC_GATE/v2/scrape" -d '{"url":"https://docs.example.test/page","formats":["markdown"]}'; sleep 0.3; done
for g in "$FC_GATE" ${BASE_GATE:-}; do
  curl -s -XPOST "http://$g/v2/scrape" -d '{"url":"https://docs.example.test/page"}' | grep -q '"cacheState":"hit"' || { echo "cache not warm at $g" >&2; exit 1; }
done
if [ -n "$BASELINE_BIN" ]; then
  # Same entry, same store: both builds must answer the hit with the same bytes.
  B='{"url":"https://docs.example.test/page","formats":["markdown"]}'
  cmp -s <(curl -s -XPOST "http://$FC_GATE/v2/scrape" -d "$B") <(curl -s -XPOST "http://$BASE_GATE/v2/scrape" -d "$B") \
    || { echo "the two builds answer the hit differently" >&2; exit 1; }
fi
if [ -n "${HOLD:-}" ]; then
  echo "gate $FC_GATE pid $(cat "$WORK/fc.pid")${BASE_GATE:+; baseline $BASE_GATE pid $(cat "$WORK/base.pid")}; origin $ORIGIN; work $WORK"
  echo "holding; ^C to stop"; sleep infinity
fi

run() { # $1 label, rest: wrk args
  local label=$1; shift
  wrk -t2 -c"$CONNS" -d"${SECS}s" --latency "$@" > "$WORK/wrk.txt"
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt")
  p50=$(awk '$1=="50%" {print $2}' "$WORK/wrk.txt")
  p99=$(awk '$1=="99%" {print $2}' "$WORK/wrk.txt")
  printf '%-34s %10s req/s   p50 %8s   p99 %8s\n' "$label" "$rps" "$p50" "$p99"
  echo "$rps" > "$WORK/$label.rps"
  echo "$rps" >> "$WORK/${label%_r[0-9]*}.all"
}
HIT='{"url":"https://docs.example.test/page","formats":["markdown"]}'
if [ -n "$BASELINE_BIN" ]; then
  echo "== before/after, $ROUNDS alternating rounds (wrk -t2 -c$CONNS -d${SECS}s, same machine, same cache entry)"
  for r in $(seq "$ROUNDS"); do
    run "bare_origin_r$r" "http://$ORIGIN/page"
    BODY=$HIT run "hit_after_r$r" -s "$WORK/post.lua" "http://$FC_GATE/v2/scrape"
    BODY=$HIT run "hit_before_r$r" -s "$WORK/post.lua" "http://$BASE_GATE/v2/scrape"
    awk -v o="$(cat "$WORK/bare_origin_r$r.rps")" -v a="$(cat "$WORK/hit_after_r$r.rps")" -v b="$(cat "$WORK/hit_before_r$r.rps")" \
      'BEGIN { printf "round %d ratios: hit after / origin %.2f   hit before / origin %.2f   after / before %.2f\n", '"$r"', a/o, b/o, a/b }'
  done
  awk '{ s[FILENAME] += $1; n[FILENAME]++ } END { for (f in s) { k = f; sub(/.*\//, "", k); sub(/\.all$/, "", k); m[k] = s[f] / n[f] }
    printf "mean req/s: origin %.0f   hit after %.0f   hit before %.0f\n", m["bare_origin"], m["hit_after"], m["hit_before"]
    printf "mean ratios: hit after / origin %.2f   hit before / origin %.2f   after / before %.2f\n", m["hit_after"] / m["bare_origin"], m["hit_before"] / m["bare_origin"], m["hit_after"] / m["hit_before"] }' \
    "$WORK/bare_origin.all" "$WORK/hit_after.all" "$WORK/hit_before.all"
  exit 0
fi
echo "== cache hit vs bare origin (wrk -t2 -c$CONNS -d${SECS}s, same machine)"
run bare_origin "http://$ORIGIN/page"
BODY=$HIT run cache_hit_v2_scrape -s "$WORK/post.lua" "http://$FC_GATE/v2/scrape"
BODY='{"url":"https://docs.example.test/page","fleetgate_char_limit":500000}' run cache_hit_untruncated -s "$WORK/post.lua" "http://$FC_GATE/v2/scrape"
BODY="{\"urls\":[\"http://local.page.test:${ORIGIN##*:}/page\"]}" run cold_direct_extract -s "$WORK/post.lua" "http://$DIRECT_GATE/v1/extract"
awk -v a="$(cat "$WORK/cache_hit_v2_scrape.rps")" -v b="$(cat "$WORK/bare_origin.rps")" -v c="$(cat "$WORK/cold_direct_extract.rps")" \
  'BEGIN { printf "ratio cache hit / bare origin: %.2f   cold direct / bare origin: %.2f\n", a/b, c/b }'
