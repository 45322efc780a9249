//! `fleetgate-proxy`: the sidecar binary.

fn main() {}
