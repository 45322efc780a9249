//! Self-tests of the e2e harness: the stub DNS server against a real resolver, every origin
//! route kind against a real client, the gate runner against a fake gate script, and the venv
//! lookup. The harness is what the cross-component tests trust, so it is tested first.

// Helpers outside `#[test]` functions fail the test on broken setup, exactly as the tests do.
#![allow(clippy::expect_used)]

#[path = "harness/dns.rs"]
mod dns;
#[path = "harness/gate.rs"]
mod gate;
#[path = "harness/origin.rs"]
mod origin;
#[path = "harness/venv.rs"]
mod venv;
