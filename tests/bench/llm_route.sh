#!/usr/bin/env bash
# LLM route benchmark, side by side in one run on this machine: the same client streams from
# the stub provider directly and through the gate's /llm/main/ route (release builds). Prints
# one JSON line: median time to the first SSE byte (direct, gate, added, ratio) and 1 MiB
# streamed throughput in MB/s (direct, gate, ratio).
#
# Usage: tests/bench/llm_route.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
case "$TARGET" in /*) ;; *) TARGET=$ROOT/$TARGET ;; esac
cd "$ROOT"
cargo build --release -p fleetgate-proxy --bin fleetgate-proxy
FLEETGATE_PROXY_BIN=$TARGET/release/fleetgate-proxy \
  cargo test --release -p fleetgate-e2e --test llm_route bench_llm_route -- --ignored --nocapture 2>&1 \
  | grep '^{"ttfb'
