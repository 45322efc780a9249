use std::path::{Path, PathBuf};
use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/policy")
        .join(name)
}

fn fields(err: &PolicyError) -> Vec<&str> {
    err.errors.iter().map(|e| e.field.as_str()).collect()
}

#[test]
fn the_full_fixture_is_valid_and_every_field_is_read() {
    let p = Policy::load(&fixture("valid_full.yaml")).expect("valid_full must load");
    assert_eq!(p.web.extract_backend, "direct");
    assert_eq!(p.web.char_limit, 20_000);
    assert_eq!(p.web.cache.ttl, Duration::from_secs(30 * 60));
    assert_eq!(
        p.web.cache.exempt_hosts,
        vec!["internal.example", "wiki.example"]
    );
    assert_eq!(p.web.cache.max_entries, 1000);
    assert!(p.blocklist.enabled);
    assert_eq!(p.blocklist.mode, EnforcementMode::Enforce);
    assert_eq!(
        p.blocklist.shared_files,
        vec![fixture("blocklists/corp.txt")],
        "relative shared files resolve against the policy's directory"
    );
    assert_eq!(p.egress.ports, vec![80, 443, 8443]);
    assert!(
        p.egress.ports_explicit,
        "a listed egress.ports must also bind the gate's own fetches"
    );
    assert_eq!(
        p.egress.resolver.nameservers,
        vec![
            "127.0.0.1:5353".parse().unwrap(),
            "10.96.0.10:53".parse().unwrap()
        ]
    );
    assert_eq!(p.egress.resolver.timeout, Duration::from_millis(2000));
    assert_eq!(p.store.root, PathBuf::from("/var/cache/fleetgate"));
    assert_eq!(
        p.store.agent_visible_root,
        Some(PathBuf::from("/opt/data/cache/fleetgate"))
    );
    assert_eq!(
        p.listen.forward_proxy,
        Some("127.0.0.1:15181".parse().unwrap())
    );
    assert_eq!(p.listen.admin, "0.0.0.0:15190".parse().unwrap());
    assert_eq!(p.fetch.max_redirects, 3);
    assert_eq!(p.fetch.user_agent, "fleetgate-test");
    assert_eq!(p.report.days, 14);
    assert_eq!(p.sha256.len(), 64, "the policy hash must be a sha256 hex");
}

#[test]
fn the_minimal_fixture_gets_documented_defaults() {
    let p = Policy::load(&fixture("valid_minimal.yaml")).expect("valid_minimal must load");
    assert_eq!(p.web.extract_backend, "direct");
    assert_eq!(p.web.char_limit, 15_000);
    assert!(p.web.cache.enabled);
    assert_eq!(p.web.cache.ttl, Duration::from_secs(20 * 60));
    assert!(!p.blocklist.enabled, "no rules means no blocklist");
    assert_eq!(p.egress.ports, vec![80, 443]);
    assert!(
        !p.egress.ports_explicit,
        "the default ports must not bind the gate's own fetches"
    );
    assert!(
        p.egress.resolver.nameservers.is_empty(),
        "default is the system resolver"
    );
    assert_eq!(p.listen.api, "127.0.0.1:15180".parse().unwrap());
    assert_eq!(p.listen.admin, "127.0.0.1:15190".parse().unwrap());
    assert_eq!(p.fetch.max_redirects, 5);
}

#[test]
fn the_embedded_default_is_valid_and_keyless() {
    let p = Policy::embedded_default().expect("the embedded default must be valid");
    assert_eq!(p.web.extract_backend, "direct");
    assert_eq!(p.store.root, Path::new(".").join(".fleetgate"));
}

#[test]
fn invalid_fixtures_name_the_field_and_the_fix() {
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "invalid_char_limit.yaml",
            &["web.charLimit"],
            "between 2000 and 500000",
        ),
        ("invalid_unknown_field.yaml", &["policy"], "charLimt"),
        (
            "invalid_metadata_floor.yaml",
            &["egress.allowCIDRs[1]"],
            "metadata",
        ),
        (
            "invalid_backend.yaml",
            &["web.extractBackend"],
            "brave-free",
        ),
        ("invalid_version.yaml", &["version"], "version: v1"),
        (
            "invalid_many.yaml",
            &[
                "web.cache.ttlMinutes",
                "egress.allowCIDRs[0]",
                "egress.resolver.nameservers[0]",
                "listen.api",
            ],
            "",
        ),
    ];
    for (file, want_fields, want_text) in cases {
        let err = Policy::load(&fixture(file)).expect_err(&format!("{file} must be refused"));
        assert_eq!(fields(&err), *want_fields, "{file}: fields named");
        assert!(
            err.to_string().contains(want_text),
            "{file}: message must mention {want_text:?}: {err}"
        );
    }
}

#[test]
fn empty_and_non_utf8_files_are_refused_clearly() {
    let empty = Policy::parse(b"  \n", Path::new(".")).expect_err("empty must be refused");
    assert!(empty.to_string().contains("empty"), "{empty}");
    let binary =
        Policy::parse(b"version: v1\n\xff\xfe", Path::new(".")).expect_err("non-UTF-8 refused");
    assert!(binary.to_string().contains("UTF-8"), "{binary}");
    let missing = Policy::load(Path::new("/nonexistent/policy.yaml")).expect_err("missing refused");
    assert!(missing.to_string().contains("failed to read"), "{missing}");
}

#[test]
fn a_blocklist_with_rules_and_no_enabled_flag_is_on_and_report_mode_parses() {
    let p = Policy::parse(
        b"version: v1\nwebsiteBlocklist:\n  mode: report\n  domains: [a.example]\n",
        Path::new("."),
    )
    .expect("must parse");
    assert!(p.blocklist.enabled, "listing rules turns the blocklist on");
    assert_eq!(p.blocklist.mode, EnforcementMode::Report);
    let off = Policy::parse(
        b"version: v1\nwebsiteBlocklist:\n  enabled: false\n  domains: [a.example]\n",
        Path::new("."),
    )
    .expect("must parse");
    assert!(!off.blocklist.enabled, "an explicit false wins");
}

proptest! {
    #[test]
    fn char_limits_are_accepted_exactly_inside_the_range(n in -10_000i64..600_000) {
        let yaml = format!("version: v1\nweb:\n  charLimit: {n}\n");
        let got = Policy::parse(yaml.as_bytes(), Path::new("."));
        if (2000..=500_000).contains(&n) {
            prop_assert_eq!(got.expect("in range must parse").web.char_limit, n as usize);
        } else {
            let err = got.expect_err("out of range must be refused");
            prop_assert_eq!(fields(&err), vec!["web.charLimit"]);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_parser(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = Policy::parse(&bytes, Path::new("."));
    }

    #[test]
    fn arbitrary_yaml_mappings_are_refused_or_valid_never_panicking(
        key in "[a-zA-Z]{1,12}", value in "[ -~]{0,20}"
    ) {
        let yaml = format!("version: v1\n{key}: {value:?}\n");
        if let Err(e) = Policy::parse(yaml.as_bytes(), Path::new(".")) {
            prop_assert!(!e.errors.is_empty());
        }
    }
}

#[test]
fn secret_rule_files_load_and_a_bad_file_or_exemption_is_refused_with_the_rule_id() {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(
        dir.path().join("corp.toml"),
        "[[rules]]\nid = \"corp-token\"\nregex = '''corp_[a-z0-9]{24}'''\nkeywords = [\"corp_\"]\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("broken.toml"),
        "[[rules]]\nid = \"corp-broken\"\nregex = '''corp_([a-z'''\n",
    )
    .expect("write");
    let ok = Policy::parse(
        b"version: v1\nsecrets:\n  mode: report\n  rulesFiles: [corp.toml]\n  allow: [corp-token, twilio-api-key, 'https://docs.example.com/']\n",
        dir.path(),
    )
    .expect("a good rule file must load");
    assert_eq!(ok.secrets.mode, EnforcementMode::Report);
    assert_eq!(ok.secrets.rules.len(), 1);
    assert_eq!(ok.secrets.rules_files, vec![dir.path().join("corp.toml")]);
    assert_eq!(ok.secrets.allow_rules, vec!["corp-token", "twilio-api-key"]);
    assert_eq!(ok.secrets.allow_prefixes, vec!["https://docs.example.com/"]);

    for (yaml, field, says) in [
        (
            "secrets:\n  rulesFiles: [broken.toml]\n",
            "secrets.rulesFiles[0]",
            "\"corp-broken\"",
        ),
        (
            "secrets:\n  rulesFiles: [missing.toml]\n",
            "secrets.rulesFiles[0]",
            "failed to read",
        ),
        ("secrets:\n  mode: shadow\n", "secrets.mode", "unknown mode"),
        (
            "secrets:\n  allow: [hermes-sk]\n",
            "secrets.allow[0]",
            "no policy can exempt",
        ),
        (
            "secrets:\n  allow: [no-such-rule]\n",
            "secrets.allow[0]",
            "no secret rule has the id",
        ),
        (
            "secrets:\n  allow: ['ftp://x/']\n",
            "secrets.allow[0]",
            "not an http(s) URL prefix",
        ),
    ] {
        let text = format!("version: v1\n{yaml}");
        let err = Policy::parse(text.as_bytes(), dir.path()).expect_err(yaml);
        assert!(fields(&err).contains(&field), "{yaml}: {err}");
        assert!(err.to_string().contains(says), "{yaml}: {err}");
    }
}

#[test]
fn inline_secret_rules_compile_with_the_policy_and_a_bad_one_is_refused_naming_it() {
    let good = "version: v1\nsecrets:\n  inlineRules:\n  - |\n    [[rules]]\n    id = \"corp-api-token\"\n    regex = '''corp_live_[a-z0-9]{32}'''\n    keywords = [\"corp_live_\"]\n  allow: [corp-api-token]\n";
    let ok = Policy::parse(good.as_bytes(), Path::new("/")).expect("an inline rule must compile");
    assert_eq!(ok.secrets.rules.len(), 1);
    assert_eq!(
        ok.secrets.allow_rules,
        vec!["corp-api-token"],
        "its id is known"
    );
    let bad =
        "version: v1\nsecrets:\n  inlineRules:\n  - \"[[rules]]\\nid = 'x'\\nregex = '(['\\n\"\n";
    let err = Policy::parse(bad.as_bytes(), Path::new("/")).expect_err("a broken rule");
    assert!(fields(&err).contains(&"secrets.inlineRules[0]"), "{err}");
}

#[test]
fn a_vendor_tier_is_free_paid_or_auto_and_free_only_where_there_is_a_keyless_tier() {
    let parse = |vendors: &str| {
        let text = format!("version: v1\nweb:\n  vendors:\n{vendors}");
        Policy::parse(text.as_bytes(), Path::new("/"))
    };
    let tier_of = |policy: &Policy, name: &str| {
        policy
            .web
            .vendors
            .iter()
            .find(|v| v.name == name)
            .map(|v| v.tier)
    };
    let ok = parse("    keenable:\n      tier: FREE\n    exa:\n      tier: paid\n    tavily: {}\n")
        .expect("known tiers must load");
    assert_eq!(tier_of(&ok, "keenable"), Some(VendorTier::Free));
    assert_eq!(tier_of(&ok, "exa"), Some(VendorTier::Paid));
    assert_eq!(
        tier_of(&ok, "tavily"),
        Some(VendorTier::Auto),
        "auto by default"
    );
    let err = parse("    keenable:\n      tier: sometimes\n").expect_err("an unknown tier");
    assert!(fields(&err).contains(&"web.vendors.keenable.tier"), "{err}");
    assert!(err.to_string().contains("use free, paid or auto"), "{err}");
    let err = parse("    brave-free:\n      tier: free\n").expect_err("no keyless brave");
    assert!(
        fields(&err).contains(&"web.vendors.brave-free.tier"),
        "{err}"
    );
    assert!(err.to_string().contains("has no keyless tier"), "{err}");
}

#[test]
fn a_keyless_endpoint_belongs_to_a_ring_member_and_the_ring_is_not_a_vendor() {
    let parse = |web: &str| {
        let text = format!("version: v1\nweb:\n{web}");
        Policy::parse(text.as_bytes(), Path::new("/"))
    };
    let ok = parse(
        "  searchBackend: keyless\n  rescue: [direct, keyless]\n  vendors:\n    exa:\n      tier: free\n      keylessUrl: http://127.0.0.1:9/mcp\n",
    )
    .expect("the ring and a keyless endpoint must load");
    assert_eq!(ok.web.search_backend.as_deref(), Some("keyless"));
    assert_eq!(ok.web.rescue, ["direct", "keyless"]);
    let exa = ok.web.vendors.iter().find(|v| v.name == "exa").unwrap();
    assert_eq!(
        exa.keyless_url.as_ref().map(url::Url::as_str),
        Some("http://127.0.0.1:9/mcp")
    );
    let cases = [
        (
            "  vendors:\n    tavily:\n      keylessUrl: https://t.example/\n",
            "web.vendors.tavily.keylessUrl",
            "has no keyless tier",
        ),
        (
            "  vendors:\n    exa:\n      keylessUrl: mcp.exa.ai\n",
            "web.vendors.exa.keylessUrl",
            "absolute http(s) URL",
        ),
        (
            "  vendors:\n    keyless:\n      tier: free\n",
            "web.vendors.keyless",
            "no configurable backend named 'keyless'",
        ),
    ];
    for (web, field, words) in cases {
        let err = parse(web).expect_err(web);
        assert!(fields(&err).contains(&field), "{web}: {err}");
        assert!(err.to_string().contains(words), "{web}: {err}");
    }
}
