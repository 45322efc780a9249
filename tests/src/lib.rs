//! fleetgate-e2e: harness shared by the cross-component tests (spawning the gate, loopback
//! origins, the stub DNS server, the Python venv with Hermes).
