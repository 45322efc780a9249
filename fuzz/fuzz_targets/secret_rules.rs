//! The secret detector of gate E1 and the gitleaks rule-file parser on arbitrary input:
//! neither may panic; a parsed rule set must answer on any text; a refusal's rule id never
//! contains the text it matched, and the redacted form never holds a span the detector still
//! flags.
#![no_main]

use fleetgate_proxy::judge::gates::Gate;
use fleetgate_proxy::judge::gates::secret_url::rules::{RuleSet, find_jwt};
use fleetgate_proxy::judge::gates::secret_url::{
    SecretUrlGate, check_host_secret, redact_secrets, secret_span,
};
use fleetgate_proxy::base::target_url::TargetUrl;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // The detector on every entry point.
    let _ = SecretUrlGate::default().check(&TargetUrl::new(&text));
    let _ = check_host_secret(&text);
    let _ = find_jwt(&text);
    let redacted = redact_secrets(&text);
    if !redacted.starts_with('[') && !redacted.contains("://[redacted:") {
        // Span-redacted text: nothing the detector flags may remain.
        assert!(
            secret_span(&redacted).is_none(),
            "redaction left a secret in {redacted:?}"
        );
    }
    // The rule-file parser: the input as a file, and the input under a rule of its own.
    if let Ok(set) = RuleSet::parse(&text, "fuzz") {
        let _ = set.find(&text);
    }
    let pattern: String = text.chars().take(64).collect();
    let file = format!("[[rules]]\nid = \"f\"\nregex = '''{}'''\nentropy = 1.0\n", pattern.replace("'''", ""));
    if let Ok(set) = RuleSet::parse(&file, "fuzz") {
        let _ = set.find(&text);
    }
});
