//! E0 + E1 + the synchronous part of E2 + E4 on arbitrary input: never panics, and a refused
//! URL is refused consistently by the secret gate and `check_host_secret` on its host.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use fleetgate_proxy::judge::gates::secret_url::{self, SecretUrlGate};
use fleetgate_proxy::judge::gates::ssrf::precheck_url;
use fleetgate_proxy::judge::gates::website_blocklist::{Blocklist, WebsiteBlocklistGate};
use fleetgate_proxy::judge::gates::{Gate, parse_items};
use fleetgate_proxy::policy::Policy;
use fleetgate_proxy::base::target_url::TargetUrl;
use fleetgate_proxy::base::url_form;
use libfuzzer_sys::fuzz_target;

fn fixtures() -> &'static (Policy, Blocklist) {
    static F: OnceLock<(Policy, Blocklist)> = OnceLock::new();
    F.get_or_init(|| {
        let policy = Policy::parse(b"version: v1\negress:\n  allowCIDRs: [\"10.1.0.0/16\"]\n", Path::new("."))
            .expect("fuzz policy");
        let rules = vec!["ads.example".to_string(), "*.tracker.example".into(), "1.2.3.4".into()];
        let (list, _) = Blocklist::load(true, &rules, &[], Path::new("."));
        (policy, list)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let (policy, list) = fixtures();
    let _ = url_form::unquote(s);
    let normalized = url_form::normalize_url_for_request(s);
    let _ = url_form::normalize_url_for_request(&normalized);
    if let Some(range) = secret_url::find_credential_prefix(s) {
        assert!(s.is_char_boundary(range.start) && s.is_char_boundary(range.end));
    }
    let _ = secret_url::sensitive_query_param_name(s);
    let target = TargetUrl::new(s);
    let _ = SecretUrlGate::default().check(&target);
    let _ = precheck_url(&target, &policy.egress);
    let _ = WebsiteBlocklistGate { list }.check(&target);
    if let Some(host) = &target.host {
        let _ = secret_url::check_host_secret(host);
        let _ = list.check_host(host);
    }
    let _ = parse_items::parse_items(&serde_json::json!([s, {"url": s}, {"href": s}]));
});
