#!/usr/bin/env bash
# Every side-by-side benchmark, release builds, one after the other (2 cores: never in parallel).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
for bench in $(ls proxy/benches/*.rs | xargs -n1 basename | sed 's/\.rs$//'); do
  echo "== proxy bench: $bench"
  cargo bench --locked -p fleetgate-proxy --bench "$bench"
done
echo "== controller: the simulated fleet (2,000 and 10,000 gates; FLEETGATE_SIM_SIZES, FLEETGATE_SIM_POLICIES)"
cargo test --locked --release -p fleetgate-controller --lib reconcile::tests::fleet_sim -- --ignored --nocapture
