#!/usr/bin/env bash
# tests/run bench extract: the content-extraction benchmark (see tests/bench/extract/README.md).
# Fetches the data into the machine cache if needed (fetch_data.sh), installs the pinned tools
# (.tools/extract-venv, .tools/extract-node), builds this tree's release fleetgate-proxy (or uses
# $FLEETGATE_PROXY_BIN), then runs every extractor on the same pages and scores them:
# target/extract-bench.md (tables), target/extract-bench-pages.jsonl (per page).
# Arguments go to bench.py: --datasets a,b  --only fleetgate-main,trafilatura  --rescore ...
# --candidates (or a candidate named in --only) also builds and runs the Rust candidate
# extractors of candidates/ (dom_smoothie, rs-trafilatura, readability ports); never by default.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=env.sh
source "$here/env.sh"

"$here/fetch_data.sh" >&2
ensure_extract_venv
ensure_extract_node
ensure_extract_lcs
if [ -z "${FLEETGATE_PROXY_BIN:-}" ]; then
  (cd "$extract_root" && cargo build --release --locked -p fleetgate-proxy)
  export FLEETGATE_PROXY_BIN="${CARGO_TARGET_DIR:-$extract_root/target}/release/fleetgate-proxy"
fi
case " $* " in
  *" --candidates "* | *dom_smoothie* | *rs_trafilatura* | *readability_rs* | *readability_kumabook*)
    case " $* " in
      *" --rescore "*) ;;
      *) [ -n "${FLEETGATE_CANDIDATES_BIN:-}" ] || ensure_extract_candidates ;;
    esac
    ;;
esac
"$EXTRACT_PY" "$here/bench.py" --out "${CARGO_TARGET_DIR:-$extract_root/target}" "$@"
