use super::*;

const GH: &str = "ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c";
const AWS: &str = "AKIAZ7Q2M4N6P8R3T5V9";

fn policy() -> SecretsPolicy {
    SecretsPolicy::default()
}

#[test]
fn a_prompt_without_secrets_is_clean() {
    let body = r#"{"model":"m","messages":[{"role":"user","content":"the api key rotation guide says: rotate every 90 days; token budgets are per minute"}]}"#;
    assert_eq!(scan(body, &policy()), Finding::Clean);
}

#[test]
fn secrets_anywhere_in_the_body_are_found_and_redacted_in_place() {
    let body = format!(
        r#"{{"model":"m","system":"ops bot","messages":[{{"role":"user","content":"deploy with {GH} please"}},{{"role":"tool","content":"aws_access_key_id = {AWS}\nok"}}]}}"#
    );
    let Finding::Secrets {
        rules,
        report_only,
        redacted,
    } = scan(&body, &policy())
    else {
        panic!("secrets must be found");
    };
    assert_eq!(rules.len(), 2, "{rules:?}");
    assert!(!report_only);
    let redacted = redacted.expect("both can be replaced in place");
    assert!(
        !redacted.contains(GH) && !redacted.contains(AWS),
        "{redacted}"
    );
    let v: serde_json::Value = serde_json::from_str(&redacted).expect("still JSON");
    let content = v["messages"][0]["content"].as_str().unwrap();
    assert!(
        content.starts_with("deploy with [redacted:") && content.ends_with("] please"),
        "{content}"
    );
    assert_eq!(v["system"], "ops bot", "the rest is byte for byte");
    assert_eq!(scan(&redacted, &policy()), Finding::Clean, "nothing left");
}

#[test]
fn a_secret_behind_json_escapes_is_found_and_refused_not_redacted() {
    let escaped: String = GH.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
    let body = format!(r#"{{"messages":[{{"role":"user","content":"{escaped}"}}]}}"#);
    match scan(&body, &policy()) {
        Finding::Secrets {
            rules, redacted, ..
        } => {
            assert!(!rules.is_empty());
            assert_eq!(redacted, None, "cannot be replaced in place");
        }
        Finding::Clean => panic!("a \\u-escaped token must be found"),
    }
    let slashed = r#"{"content":"https:\/\/hooks.slack.com\/services\/T0123ABCD\/B0123456789\/AbCdEfGhIjKlMnOpQrStUvWx"}"#;
    assert!(
        matches!(scan(slashed, &policy()), Finding::Secrets { .. }),
        "\\/ escapes"
    );
}

#[test]
fn unescape_joins_surrogates_and_keeps_other_escapes() {
    assert_eq!(unescape(r#"a\u0041\/b"#), "aA/b");
    assert_eq!(unescape(r#"\ud83d\ude00"#), "\u{1F600}");
    assert_eq!(unescape(r#"\ud83d x \/"#), "\u{FFFD} x /");
    assert_eq!(
        unescape(r#"\\u0041 \n \/"#),
        r#"\\u0041 \n /"#,
        "an escaped backslash is not an escape"
    );
    assert!(matches!(unescape("plain"), Cow::Borrowed(_)));
}

#[test]
fn the_policy_exemptions_and_report_mode_rule_files_apply() {
    let body = format!(r#"{{"content":"{GH}"}}"#);
    let Finding::Secrets { rules, .. } = scan(&body, &policy()) else {
        panic!("found");
    };
    let mut allow = policy();
    allow.allow_rules = rules.clone();
    // Hermes' families cannot be exempted; a built-in rule can.
    let exempt = scan(&body, &allow);
    if rules.iter().all(|r| !r.starts_with("hermes-")) {
        assert_eq!(exempt, Finding::Clean);
    } else {
        assert!(
            matches!(exempt, Finding::Secrets { .. }),
            "Hermes' floor holds"
        );
    }
    let file = r#"
[[rules]]
id = "corp-token"
regex = '''corp_live_[a-f0-9]{8}'''
keywords = ["corp_live_"]
"#;
    let set = crate::judge::gates::secret_url::rules::RuleSet::parse(file, "corp.toml").unwrap();
    let mut report = policy();
    report.rules = vec![std::sync::Arc::new(set)];
    report.mode = crate::policy::EnforcementMode::Report;
    let body = r#"{"content":"corp_live_abcdef12"}"#;
    assert_eq!(
        scan(body, &report),
        Finding::Secrets {
            rules: vec!["corp-token".into()],
            report_only: true,
            redacted: Some(r#"{"content":"[redacted:corp-token]"}"#.into()),
        }
    );
}

/// The escape windows as found by looking at every backslash.
fn windows_at_every_backslash(text: &str) -> Vec<Range<usize>> {
    let mut windows: Vec<Range<usize>> = Vec::new();
    for at in (0..text.len()).filter(|&i| text.as_bytes()[i] == b'\\') {
        add_window(text, at, &mut windows);
    }
    windows
}

const ESCAPE_PIECES: [&str; 9] = [
    r"\u0041", r"\/", r"\\", r#"\""#, r"\u00e9", r"\\u0041", "é", "a", r"\n",
];

#[test]
fn escape_windows_cover_slash_and_ascii_unicode_escapes_in_order() {
    let far = "x".repeat(3 * WINDOW);
    let text = format!(r#"{far}\/{far}\u0041{far}\"\u00e9\\u0041{far}\/"#);
    let windows = escaped_windows(&text);
    assert_eq!(windows.len(), 3, "{windows:?}");
    assert_eq!(windows, windows_at_every_backslash(&text));
}

proptest::proptest! {
    #[test]
    fn escape_windows_are_those_of_every_backslash(
        picks in proptest::collection::vec((0usize..ESCAPE_PIECES.len() + 1, 0usize..1500), 0..20),
    ) {
        let text: String = picks
            .iter()
            .map(|&(p, n)| ESCAPE_PIECES.get(p).map_or_else(|| "y".repeat(n), |s| s.to_string()))
            .collect();
        proptest::prop_assert_eq!(escaped_windows(&text), windows_at_every_backslash(&text));
    }
}
