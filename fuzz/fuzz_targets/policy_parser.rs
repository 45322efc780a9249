//! The policy parser on arbitrary bytes: never panics; an accepted policy round-trips its
//! invariants (char limit in range, ports non-zero).
#![no_main]

use std::path::Path;

use fleetgate_proxy::policy::Policy;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Policy::parse(data, Path::new(".")) {
        assert!((2000..=500_000).contains(&p.web.char_limit));
        assert!(!p.egress.ports.is_empty() && !p.egress.ports.contains(&0));
    }
});
