#!/usr/bin/env bash
# `check-url` per URL, before/after side by side in one run (hyperfine, 2-core machine):
# a batch of 4,000 IP-literal URLs (the gate-decision bench's corpus shapes: public and
# private literals, secrets, query names, metadata, IPv6, escapes; no DNS query) and a batch
# of one URL, each binary. Per URL = (batch of 4,000 - batch of 1) / 3,999, so process start
# and policy load are left out (`xargs -s` keeps the batch in one process: its default
# command-line size would split 4,000 URLs over two). A build with `check-url -` is also run with the
# batch on stdin (no argument parsing), and its output compared with the arguments' output.
# Usage: BASELINE_BIN=/path/to/before/fleetgate-proxy tests/bench/check_url.sh
#   (env: RUNS=10; without BASELINE_BIN only this tree's binary is measured)
set -euo pipefail
RUNS=${RUNS:-10}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
command -v hyperfine >/dev/null || { apt-get update >/dev/null && apt-get install -y hyperfine >/dev/null; }
(cd "$ROOT" && cargo build -q --release -p fleetgate-proxy --bin fleetgate-proxy)
cp "$TARGET/release/fleetgate-proxy" "$WORK/after"
BINS=(after)
if [ -n "${BASELINE_BIN:-}" ]; then cp "$BASELINE_BIN" "$WORK/before"; BINS=(before after); fi

python3 - "$WORK/urls.txt" <<'PY'
import sys
urls = []
for n in range(4000):
    a, b = 1 + n % 200, n % 250
    urls.append([
        f"https://93.184.{b}.{a}/articles/{n}/index.html?q=rust+proxy&page={n}",
        f"http://10.{b}.0.{a}/internal/{n}",
        f"https://8.8.{b}.{a}/search?q=sk-abcdefghij{n}klmnop",
        f"https://1.1.{b}.{a}/login?token=abc{n}&next=/home",
        "http://169.254.169.254/latest/meta-data/",
        f"http://[2606:4700:4700::{a:x}]/dns-query?name=example{n}",
        f"http://127.0.0.1:{8000 + n}/admin",
        f"https://203.0.{b}.{a}/doc",
        f"https://9.9.9.{a}/very/long/path/{'segment/' * 8}end",
        f"https://185.199.{b}.{a}/a%20b/%C3%A9?x=1#frag{n}",
    ][n % 10])
open(sys.argv[1], "w").write("\n".join(urls) + "\n")
PY
# The outputs must be identical across binaries (hyperfine discards them).
for bin in "${BINS[@]}"; do
  xargs -s 1900000 -a "$WORK/urls.txt" -d '\n' "$WORK/$bin" check-url > "$WORK/$bin.out" || true
done
if [ ${#BINS[@]} = 2 ]; then cmp "$WORK/before.out" "$WORK/after.out"; echo "outputs identical ($(wc -l < "$WORK/after.out") lines)"; fi

cmds=()
names=()
for bin in "${BINS[@]}"; do
  cmds+=("xargs -s 1900000 -a $WORK/urls.txt -d '\n' $WORK/$bin check-url" "$WORK/$bin check-url https://93.184.1.1/")
  names+=("$bin")
done
# `check-url -` (the URLs on stdin, no argument parsing), where the build has it; both runs go
# through `sh -c`, whose start cancels out in the difference.
if [ "$(echo https://93.184.1.1/ | "$WORK/after" check-url - | head -c 29)" = '{"url":"https://93.184.1.1/",' ]; then
  cmds+=("sh -c '$WORK/after check-url - < $WORK/urls.txt'" "sh -c 'echo https://93.184.1.1/ | $WORK/after check-url -'")
  names+=("stdin")
  "$WORK/after" check-url - < "$WORK/urls.txt" > "$WORK/stdin.out" || true
  cmp "$WORK/stdin.out" "$WORK/after.out"; echo "stdin and arguments give identical output"
fi
hyperfine -N -i -w 2 -r "$RUNS" --export-json "$WORK/h.json" "${cmds[@]}" 2>/dev/null | grep -E "Time|±" || true
python3 - "$WORK/h.json" "${names[@]}" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
per = {}
for i, name in enumerate(sys.argv[2:]):
    batch, one = res[2 * i]["median"], res[2 * i + 1]["median"]
    per[name] = (batch - one) / 3999 * 1e6
    label = "after, stdin" if name == "stdin" else name
    print(f"{label:>12}: batch of 4,000 {batch * 1e3:7.1f} ms, one URL {one * 1e3:6.2f} ms, per URL {per[name]:6.2f} µs (medians)")
if "before" in per:
    print(f"ratio before/after per URL: {per['before'] / per['after']:.1f}x")
if "stdin" in per:
    print(f"ratio arguments/stdin per URL (after): {per['after'] / per['stdin']:.2f}x")
PY
