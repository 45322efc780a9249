#!/usr/bin/env bash
# The extraction regression floor: fleetgate's direct backend (main content) on the fixed subset
# of subset.txt (60 pages, 12 per dataset, named and hashed there), scored with the benchmark's
# metric; fails when its F1 (as returned, or words read) falls more than the tolerance (0.01)
# below the value recorded in floor.json.
#
# Runs only when the benchmark data is in the machine cache (tests/bench/extract/fetch_data.sh);
# without it, it says so and exits 0 -- or 1 when FLEETGATE_REQUIRE_EXTRACT_DATA=1.
# The binary: $FLEETGATE_PROXY_BIN, else this tree's debug build (cargo build -p fleetgate-proxy).
#   tests/bench/extract/floor.sh              check
#   tests/bench/extract/floor.sh --record     run and write floor.json from this build
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=env.sh
source "$here/env.sh"

if ! ls "$FLEETGATE_EXTRACT_DATA"/*/truth.jsonl >/dev/null 2>&1; then
  echo "extract floor: NOT RUN: no benchmark data in $FLEETGATE_EXTRACT_DATA" \
    "(get it with tests/bench/extract/fetch_data.sh; see tests/bench/extract/README.md)"
  [ "${FLEETGATE_REQUIRE_EXTRACT_DATA:-0}" = 1 ] && exit 1
  exit 0
fi
ensure_extract_venv
ensure_extract_lcs
if [ -z "${FLEETGATE_PROXY_BIN:-}" ]; then
  (cd "$extract_root" && cargo build --quiet --locked -p fleetgate-proxy)
  export FLEETGATE_PROXY_BIN="${CARGO_TARGET_DIR:-$extract_root/target}/debug/fleetgate-proxy"
fi
mode=(--floor "$here/floor.json")
[ "${1:-}" = --record ] && mode=(--write-floor "$here/floor.json")
"$EXTRACT_PY" "$here/bench.py" --subset "$here/subset.txt" --only fleetgate-main --name extract-floor \
  --out "${CARGO_TARGET_DIR:-$extract_root/target}" "${mode[@]}" >/dev/null
