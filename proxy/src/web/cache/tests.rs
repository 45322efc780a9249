//! Tests of the cache codes and settings.

use std::collections::HashSet;

use super::*;

#[test]
fn outcome_and_reason_codes_are_unique_snake_case() {
    let mut outcomes: Vec<CacheOutcome> =
        vec![CacheOutcome::Hit, CacheOutcome::Miss, CacheOutcome::Stale];
    outcomes.extend(NoCacheReason::ALL.iter().copied().map(CacheOutcome::Bypass));
    let mut seen = HashSet::new();
    for outcome in &outcomes {
        let code = outcome.code();
        assert!(
            seen.insert(code),
            "code {code} must be unique across outcomes and reasons"
        );
        assert!(
            !code.is_empty()
                && code
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "code {code} must match ^[a-z0-9_]+$"
        );
    }
    assert_eq!(
        seen.len(),
        3 + NoCacheReason::ALL.len(),
        "every reason must be listed in ALL"
    );
}

#[test]
fn settings_follow_the_policy() {
    let policy = CachePolicy {
        enabled: false,
        ttl: Duration::from_secs(90 * 60),
        exempt_hosts: vec!["x.com".into()],
        max_entries: 7,
        max_bytes: 4096,
    };
    let settings = CacheSettings::from(&policy);
    assert!(!settings.enabled, "enabled must come from the policy");
    assert_eq!(
        settings.ttl,
        Duration::from_secs(5400),
        "the ttl must come from the policy"
    );
    assert_eq!(
        settings.exempt_hosts,
        vec!["x.com".to_string()],
        "exempt hosts must come from the policy"
    );
    assert_eq!(
        (settings.max_entries, settings.max_bytes),
        (7, 4096),
        "the bounds must come from the policy"
    );
}
