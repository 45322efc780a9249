#!/usr/bin/env bash
# Runs every cargo-fuzz target for $1 seconds (default 600). Installs cargo-fuzz from crates.io
# when missing. The project builds on stable Rust; cargo-fuzz needs nightly-only compiler flags,
# which RUSTC_BOOTSTRAP=1 enables on the stable toolchain for this build only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-600}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1
for target in $(cargo fuzz list --fuzz-dir fuzz); do
  echo "== fuzz target $target for ${seconds}s"
  mkdir -p "fuzz/corpus/$target"
  cargo fuzz run --fuzz-dir fuzz "$target" "fuzz/corpus/$target" -- -max_total_time="$seconds" -rss_limit_mb=4096
done
