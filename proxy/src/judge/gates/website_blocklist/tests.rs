use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::glob::Glob;
use super::rule::{Normalised, normalise_rule};
use super::*;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn config_list(domains: &[&str]) -> Blocklist {
    let (list, warnings) = Blocklist::load(true, &strings(domains), &[], Path::new("/"));
    assert!(
        warnings.is_empty(),
        "config rules must load cleanly: {warnings:?}"
    );
    list
}

// --- rule normalisation (§5.2) ---

#[test]
fn rules_normalise_like_hermes_plus_idna() {
    let p = |xs: &[&str]| Normalised::Patterns(strings(xs));
    let cases: Vec<(&str, Normalised)> = vec![
        ("Example.COM", p(&["example.com"])),
        ("  example.com \t", p(&["example.com"])),
        ("www.example.com", p(&["example.com"])),
        ("WWW.Example.com.", p(&["example.com"])),
        ("example.com...", p(&["example.com"])),
        ("www.www.example.com", p(&["www.example.com"])),
        ("www.", p(&["www"])),
        ("https://www.example.com/path?q=1", p(&["example.com"])),
        ("https://WWW.Example.com./", p(&["example.com"])),
        ("http://example.com:8080/", p(&["example.com"])),
        (
            "https://user:pw@blocked.example.com/",
            p(&["blocked.example.com"]),
        ),
        ("example.com/path", p(&["example.com"])),
        ("example.com:8080", p(&["example.com"])),
        ("user:pw@example.com", p(&["example.com"])),
        ("2001:db8::1", p(&["2001:db8::1"])),
        ("2001:DB8:0:0::1", p(&["2001:db8::1"])),
        ("::1", p(&["::1"])),
        ("http://[2001:db8::1]/", p(&["2001:db8::1"])),
        ("[::1]:8080", p(&["::1"])),
        ("*.Ads.Example.com", p(&["*.ads.example.com"])),
        ("1http://x.com", p(&["1http:"])),
        ("bücher.de", p(&["xn--bcher-kva.de"])),
        ("*.Bücher.de", p(&["*.xn--bcher-kva.de"])),
        ("straße.de", p(&["xn--strae-oqa.de", "strasse.de"])),
        ("ｗｗｗ.example.com", p(&["example.com"])),
        ("", Normalised::Skip),
        ("   ", Normalised::Skip),
        ("# a comment", Normalised::Skip),
        ("/path-only", Normalised::Skip),
        (
            "user@",
            Normalised::Dropped("it still holds '@' after reduction and cannot be matched"),
        ),
        (
            "http://[zz]/",
            Normalised::Dropped("the URL in it does not parse"),
        ),
        (
            "*.bü?cher.de",
            Normalised::Dropped("its Unicode host has no punycode form"),
        ),
    ];
    for (raw, want) in cases {
        assert_eq!(
            normalise_rule(raw),
            want,
            "rule {raw:?} must normalise as shown"
        );
    }
}

// --- glob semantics (expected values taken from Python's fnmatch) ---

#[test]
fn globs_follow_python_fnmatch() {
    let cases: &[(&str, &str, bool)] = &[
        ("*.example.com", "a.example.com", true),
        ("*.example.com", "example.com", false),
        ("*.example.com", "a.b.example.com", true),
        ("*.ex?mple.com", "a.exbmple.com", true),
        ("*.ex?mple.com", "a.exmple.com", false),
        ("*.[a-c]x.com", "a.bx.com", true),
        ("*.[a-c]x.com", "a.dx.com", false),
        ("*.[!a-c]x.com", "a.bx.com", false),
        ("*.[!a-c]x.com", "a.dx.com", true),
        ("*.[z-a]x.com", "a.zx.com", false),
        ("*.[z-a]x.com", "a.ax.com", false),
        ("*.[]]x.com", "a.]x.com", true),
        ("*.[!]]x.com", "a.]x.com", false),
        ("*.[!]]x.com", "a.bx.com", true),
        ("*.[abc", "a.[abc", true),
        ("*.[abc", "a.b", false),
        ("*.a[-]b", "x.a-b", true),
        ("*.a[b-]c", "x.a-c", true),
        ("*.a[b-]c", "x.abc", true),
        ("*.[z-a-c]", "x.-", true),
        ("*.[z-a-c]", "x.c", true),
        ("*.[z-a-c]", "x.b", false),
        ("*.[!-a]", "x.-", false),
        ("*.[!-a]", "x.b", true),
        ("*.[\\]", "x.\\", true),
        ("*.[&~|]", "x.~", true),
        ("*.[^a]", "x.^", true),
        ("*.[^a]", "x.b", false),
        ("*.*.com", "a.b.com", true),
        ("*.*.com", "a.com", false),
        ("*.**.com", "x.y.com", true),
        ("*.a*b*c", "x.aXbYc", true),
        ("*.a*b*c", "x.acb", false),
        ("*.[a-c-e]", "x.-", true),
        ("*.[a-c-e]", "x.d", false),
        ("*.[a-c-e]", "x.e", true),
        ("*.[!]", "x.!", false),
        ("*.[!]", "x.[!]", true),
        ("*.[--0]", "x./", true),
        ("*.[b-a-z]", "x.m", false),
        ("*.[b-a-z]", "x.-", true),
        ("*.[b-a-z]", "x.z", true),
        ("*.é?", "x.éa", true),
    ];
    for (pattern, text, want) in cases {
        let glob = Glob::compile(pattern).expect("pattern must compile");
        assert_eq!(
            glob.matches(text),
            *want,
            "{pattern} vs {text} must be {want}"
        );
    }
}

// --- matching (§5.3) ---

#[test]
fn hosts_match_equal_suffix_and_glob_rules() {
    let list = config_list(&[
        "https://www.example.com/x",
        "*.ads.io",
        "*.tr?cker.net",
        "10.0.0.1",
        "bücher.de",
        "2001:db8::1",
    ]);
    let cases: &[(&str, Option<&str>)] = &[
        ("example.com", Some("example.com")),
        ("www.example.com", Some("example.com")),
        ("a.b.example.com", Some("example.com")),
        ("Example.COM.", Some("example.com")),
        ("notexample.com", None),
        ("example.com.evil.io", None),
        ("ads.io", None),
        ("x.ads.io", Some("*.ads.io")),
        ("a.b.ads.io", Some("*.ads.io")),
        ("a.tracker.net", Some("*.tr?cker.net")),
        ("a.trcker.net", None),
        ("10.0.0.1", Some("10.0.0.1")),
        ("10.0.0.10", None),
        ("xn--bcher-kva.de", Some("xn--bcher-kva.de")),
        ("shop.xn--bcher-kva.de", Some("xn--bcher-kva.de")),
        ("2001:db8::1", Some("2001:db8::1")),
        ("", None),
    ];
    for (host, want) in cases {
        let got = list.check_host(host);
        assert_eq!(
            got.as_ref().map(|m| m.rule.as_str()),
            *want,
            "{host:?} must match {want:?}"
        );
        if let Some(m) = got {
            assert_eq!(
                m.source, CONFIG_SOURCE,
                "config rules must carry the config label"
            );
            assert_eq!(
                m.host,
                host.trim_end_matches('.').to_lowercase(),
                "host must be canonical"
            );
        }
    }
}

#[test]
fn the_first_rule_in_list_order_wins() {
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["*.example.com", "example.com"],
            "a.example.com",
            "*.example.com",
        ),
        (
            &["example.com", "*.example.com"],
            "a.example.com",
            "example.com",
        ),
        (
            &["sub.example.com", "example.com"],
            "x.sub.example.com",
            "sub.example.com",
        ),
        (
            &["example.com", "sub.example.com"],
            "x.sub.example.com",
            "example.com",
        ),
        (&["*.b.io", "*.io"], "a.b.io", "*.b.io"),
        (&["*.io", "*.b.io"], "a.b.io", "*.io"),
        (&["other.org", "*.a.io", "a.io"], "x.a.io", "*.a.io"),
    ];
    for (rules, host, want) in cases {
        let got = config_list(rules).check_host(host).map(|m| m.rule);
        assert_eq!(
            got.as_deref(),
            Some(*want),
            "{rules:?} on {host} must report {want}"
        );
    }
}

#[test]
fn a_disabled_or_empty_list_blocks_nothing() {
    let (off, _) = Blocklist::load(false, &strings(&["example.com"]), &[], Path::new("/"));
    assert!(!off.enabled(), "the switch must be reported");
    assert_eq!(off.len(), 1, "rules must load even when switched off");
    assert_eq!(
        off.check_host("example.com"),
        None,
        "a disabled list must not block"
    );
    let empty = Blocklist::default();
    assert!(
        empty.is_empty() && empty.check_host("example.com").is_none(),
        "empty must not block"
    );
}

#[test]
fn the_gate_denies_with_host_rule_and_source() {
    let list = config_list(&["example.com"]);
    let gate = WebsiteBlocklistGate { list: &list };
    let verdict = gate.check(&TargetUrl::new("https://Sub.Example.COM./page"));
    let Verdict::Deny(reason) = verdict else {
        panic!("a listed host must be denied, got {verdict:?}");
    };
    assert_eq!(
        reason.code(),
        "blocked_by_policy",
        "the code must be stable"
    );
    assert_eq!(
        reason.message(),
        "Blocked by website policy: 'sub.example.com' matched rule 'example.com' from config",
        "the message must be Hermes' text"
    );
    assert_eq!(
        gate.check(&TargetUrl::new("https://example.org/")),
        Verdict::Allow
    );
}

// --- shared files ---

struct SharedFixture {
    dir: tempfile::TempDir,
}

impl SharedFixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir must be created");
        std::fs::create_dir(dir.path().join("lists")).expect("lists dir must be created");
        let body = "\u{feff}# corp list\r\n\r\n  www.Tracker.io  \r\nads.example.com\ntracker.io\n#x.io\nuser@\n";
        std::fs::write(dir.path().join("lists/a.txt"), body).expect("list must be written");
        std::fs::write(dir.path().join("lists/b.txt"), "later.io\nexample.com\n").expect("write");
        std::fs::write(dir.path().join("bad.txt"), b"ok.io\n\xff\xfe\n").expect("write");
        std::fs::create_dir(dir.path().join("dir.txt")).expect("dir must be created");
        Self { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        std::fs::canonicalize(self.dir.path())
            .expect("temp dir must canonicalise")
            .join(rel)
    }
}

#[test]
fn shared_files_load_with_bom_comments_dedupe_and_fail_open() {
    let fx = SharedFixture::new();
    let files: Vec<PathBuf> = [
        "lists/../lists/a.txt",
        "missing.txt",
        "dir.txt",
        "bad.txt",
        "lists/a.txt",
    ]
    .iter()
    .map(PathBuf::from)
    .chain([fx.path("lists/b.txt")])
    .collect();
    let (list, warnings) = Blocklist::load(true, &strings(&["tracker.io"]), &files, fx.dir.path());
    let a = fx.path("lists/a.txt").display().to_string();
    let texts: Vec<String> = warnings.into_iter().map(|w| w.0).collect();
    let expected_prefixes = [
        format!("Dropped website blocklist rule \"user@\" from {a}:"),
        format!(
            "Shared blocklist file not found (skipping): {}",
            fx.path("missing.txt").display()
        ),
        format!(
            "Failed to read shared blocklist file {} (skipping):",
            fx.path("dir.txt").display()
        ),
        format!(
            "Failed to read shared blocklist file {} (skipping):",
            fx.path("bad.txt").display()
        ),
    ];
    assert_eq!(
        texts.len(),
        expected_prefixes.len(),
        "one warning per problem: {texts:?}"
    );
    for (text, prefix) in texts.iter().zip(&expected_prefixes) {
        assert!(
            text.starts_with(prefix.as_str()),
            "warning {text:?} must start with {prefix:?}"
        );
    }
    // config tracker.io, a.txt: tracker.io (deduped within a.txt), ads.example.com; b.txt: 2.
    assert_eq!(list.len(), 5, "rules must be deduped on (pattern, source)");
    let hit = |host: &str| list.check_host(host).map(|m| (m.rule, m.source));
    assert_eq!(
        hit("x.tracker.io"),
        Some(("tracker.io".into(), "config".into()))
    );
    assert_eq!(
        hit("ads.example.com"),
        Some(("ads.example.com".into(), a.clone()))
    );
    assert_eq!(
        hit("ok.io"),
        None,
        "an undecodable file must be skipped whole"
    );
    let b = fx.path("lists/b.txt").display().to_string();
    assert_eq!(
        hit("example.com"),
        Some(("example.com".into(), b)),
        "absolute paths keep their label"
    );
    let sources = list.shared_sources();
    assert_eq!(
        sources.len(),
        5,
        "each resolved path once, missing ones included: {sources:?}"
    );
    assert!(
        sources.contains(&fx.path("missing.txt")),
        "missing files must stay watchable"
    );
}

#[test]
fn a_trailing_dot_host_is_matched_in_canonical_form() {
    // Found by the glob-walk property: `.-.` is `.-` once its trailing dot is trimmed.
    let list = config_list(&["*.-"]);
    assert!(
        list.check_host(".-.").is_some(),
        "`.-.` must be matched as `.-` by `*.-`"
    );
    assert!(
        list.check_host("a.example.com.").is_none(),
        "an unrelated absolute host must pass"
    );
}

// --- properties ---

fn domain() -> impl Strategy<Value = String> {
    "[a-z0-9-]{1,8}(\\.[a-z0-9-]{1,8}){0,3}".prop_filter("www. is stripped from rules", |d| {
        !d.starts_with("www.") && d != "www"
    })
}

proptest! {
    #[test]
    fn a_host_equal_to_or_under_a_rule_is_blocked(rule in domain(), prefix in "([a-z0-9]{1,6}\\.){0,3}") {
        let list = config_list(&[rule.as_str()]);
        let host = format!("{prefix}{rule}");
        let got = list.check_host(&host);
        prop_assert_eq!(got.map(|m| m.rule), Some(rule));
    }

    #[test]
    fn a_star_dot_rule_never_matches_its_own_base(base in domain()) {
        let list = config_list(&[format!("*.{base}").as_str()]);
        prop_assert_eq!(list.check_host(&base), None);
    }

    #[test]
    fn wildcard_free_star_rules_agree_with_the_glob_walk(base in domain(), host in "([a-z0-9-]{1,4}\\.){0,3}[a-z0-9.-]{0,12}") {
        let pattern = format!("*.{base}");
        let list = config_list(&[pattern.as_str()]);
        // Hosts are matched in canonical form: trailing dots trimmed, as Hermes does.
        let canonical = host.trim_end_matches('.');
        let walk = Glob::compile(&pattern).expect("pattern must compile").matches(canonical);
        prop_assert_eq!(list.check_host(&host).is_some(), walk && !canonical.is_empty());
    }

    #[test]
    fn arbitrary_rules_and_hosts_never_panic(rules in proptest::collection::vec("\\PC{0,24}", 0..8), host in "\\PC{0,40}") {
        let (list, _) = Blocklist::load(true, &rules, &[], Path::new("/"));
        let _ = list.check_host(&host);
        let _ = config_list(&["*.[a-", "*.*?[!x-]z", "example.com"]).check_host(&host);
    }
}

/// Timing probe for the report: `cargo test --release -- --ignored --nocapture large_list`.
#[test]
#[ignore = "timing probe, run by hand"]
fn large_list_check_cost() {
    let domains: Vec<String> = (0..20_000)
        .map(|i| format!("site{i}.example{}.com", i % 97))
        .collect();
    let mut with_globs = domains.clone();
    with_globs.extend((0..2_000).map(|i| format!("*.cdn{i}.example.org")));
    with_globs.extend((0..200).map(|i| format!("*.ads{i}.*.net")));
    for (name, list) in [
        ("plain", &domains),
        ("plain + 2000 *.x + 200 globs", &with_globs),
    ] {
        let (list, _) = Blocklist::load(true, list, &[], Path::new("/"));
        let hosts = [
            "a.b.c.nothing.org",
            "x.site19999.example15.com",
            "deep.a.b.c.d.e.f.g.com",
            "img.cdn1999.example.org",
            "x.ads5.y.net",
        ];
        for host in hosts {
            let start = tokio::time::Instant::now();
            let rounds = 20_000;
            for _ in 0..rounds {
                std::hint::black_box(list.check_host(std::hint::black_box(host)));
            }
            println!("{name}: {host}: {:?} per check", start.elapsed() / rounds);
        }
    }
}
