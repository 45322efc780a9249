# Sourced by tests/bench/extract/*.sh: the pinned tools of the extraction benchmark, installed
# idempotently under .tools/ (git-ignored) from the package registries only.
#   ensure_extract_venv  .tools/extract-venv: requirements.txt (trafilatura, Resiliparse, rouge-score)
#   ensure_extract_node  .tools/extract-node: package.json + package-lock.json (Readability.js, jsdom)
#   ensure_extract_lcs   the scorer's C helper (lcs.c), built with cc into the venv
#   ensure_extract_candidates  candidates/ (the Rust candidate extractors), built in release
#                        with its own target dir (~/.cache/fleetgate/extract-candidates-target);
#                        only `run.sh --candidates` (or a candidate named in --only) calls it
# Each is rebuilt when its pin file changes (a stamp names the file's hash).

extract_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
extract_root=$(cd "$extract_dir/../../.." && pwd)
extract_tools="$extract_root/.tools"
export FLEETGATE_EXTRACT_DATA="${FLEETGATE_EXTRACT_DATA:-$HOME/.cache/fleetgate/extract-data}"

extract_log() { printf '==> %s\n' "$*" >&2; }

ensure_extract_venv() {
  local venv="$extract_tools/extract-venv" req="$extract_dir/requirements.txt" stamp
  stamp=$(sha256sum "$req" | cut -c1-16)
  if [ ! -f "$venv/.stamp-$stamp" ]; then
    extract_log "creating the extraction venv (tests/bench/extract/requirements.txt)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
    touch "$venv/.stamp-$stamp"
  fi
  export EXTRACT_PY="$venv/bin/python"
}

ensure_extract_node() {
  local dest="$extract_tools/extract-node" stamp
  stamp=$(cat "$extract_dir/package.json" "$extract_dir/package-lock.json" | sha256sum | cut -c1-16)
  if [ ! -f "$dest/.stamp-$stamp" ]; then
    command -v npm >/dev/null || { echo "extract bench: npm is required for Readability.js" >&2; return 1; }
    extract_log "installing Readability.js and jsdom (tests/bench/extract/package-lock.json)"
    rm -rf "$dest"
    mkdir -p "$dest"
    cp "$extract_dir/package.json" "$extract_dir/package-lock.json" "$dest/"
    (cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
    touch "$dest/.stamp-$stamp"
  fi
  export EXTRACT_NODE_MODULES="$dest/node_modules"
}

ensure_extract_lcs() {
  ensure_extract_venv
  local stamp so
  stamp=$(sha256sum "$extract_dir/lcs.c" | cut -c1-16)
  so="$extract_tools/extract-venv/lcs-$stamp.so"
  if [ ! -f "$so" ] && command -v cc >/dev/null; then
    cc -O2 -shared -fPIC -o "$so.tmp" "$extract_dir/lcs.c" && mv "$so.tmp" "$so"
  fi
  # Without a C compiler score.py falls back to the same algorithm in Python (slower).
  [ -f "$so" ] && export FLEETGATE_EXTRACT_LCS="$so"
  return 0
}

ensure_extract_candidates() {
  local target="${FLEETGATE_CANDIDATES_TARGET:-$HOME/.cache/fleetgate/extract-candidates-target}"
  extract_log "building the Rust candidate extractors (tests/bench/extract/candidates, release)"
  (cd "$extract_dir/candidates" && CARGO_TARGET_DIR="$target" cargo build --release --locked --quiet)
  export FLEETGATE_CANDIDATES_BIN="$target/release/fleetgate-extract-candidates"
}
