//! Unit tests of gate E1: spec vectors, per-family boundaries, query names, the gate.

use proptest::prelude::*;

use super::*;

const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const ALNUM_US: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_";
const ALNUM_DASH: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-";
const WORD: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
const UPPER_DIGIT: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// One family of the spec's §2.4 list: literal prefix, body alphabet (word characters only),
/// minimum body length, whether the length is exact, and extra body characters the family
/// accepts beyond the word class (`.` or `=`).
struct Spec {
    prefix: &'static str,
    alphabet: &'static str,
    min: usize,
    exact: bool,
    extra: &'static str,
}

const fn spec(prefix: &'static str, alphabet: &'static str, min: usize) -> Spec {
    Spec {
        prefix,
        alphabet,
        min,
        exact: false,
        extra: "",
    }
}

/// The 56 families of the spec (§2.4), in its order; `xox[baprs]-` shown by its `xoxb-` member
/// (the others are covered in `slack_user_tokens_accept_each_type_letter`).
const SPECS: [Spec; 56] = [
    Spec {
        extra: ".",
        ..spec("sk-", WORD, 10)
    },
    spec("ghp_", ALNUM, 10),
    spec("github_pat_", ALNUM_US, 10),
    spec("gho_", ALNUM, 10),
    spec("ghu_", ALNUM, 10),
    spec("ghs_", ALNUM, 10),
    spec("ghr_", ALNUM, 10),
    spec("xapp-1-", ALNUM_DASH, 10),
    spec("xoxb-", ALNUM_DASH, 10),
    spec("AIza", WORD, 30),
    spec("pplx-", ALNUM, 10),
    spec("fal_", WORD, 10),
    spec("fc-", ALNUM, 10),
    spec("bb_live_", WORD, 10),
    Spec {
        extra: "=",
        ..spec("gAAAA", WORD, 20)
    },
    Spec {
        exact: true,
        ..spec("AKIA", UPPER_DIGIT, 16)
    },
    spec("sk_live_", ALNUM, 10),
    spec("sk_test_", ALNUM, 10),
    spec("rk_live_", ALNUM, 10),
    spec("SG.", WORD, 10),
    spec("hf_", ALNUM, 10),
    spec("r8_", ALNUM, 10),
    spec("npm_", ALNUM, 10),
    spec("pypi-", WORD, 10),
    spec("dop_v1_", ALNUM, 10),
    spec("doo_v1_", ALNUM, 10),
    spec("am_", ALNUM, 20),
    spec("sk_", ALNUM_US, 10),
    spec("tvly-", ALNUM, 10),
    spec("exa_", ALNUM, 10),
    spec("gsk_", ALNUM, 10),
    spec("syt_", ALNUM, 10),
    spec("retaindb_", ALNUM, 10),
    spec("hsk-", ALNUM, 10),
    spec("mem0_", ALNUM, 10),
    spec("brv_", ALNUM, 10),
    spec("xai-", ALNUM, 30),
    spec("ntn_", ALNUM, 10),
    spec("fw-", ALNUM, 30),
    spec("fw_", ALNUM, 30),
    spec("fpk_", ALNUM, 30),
    spec("glpat-", WORD, 10),
    spec("gloas-", WORD, 10),
    spec("gldt-", WORD, 10),
    Spec {
        extra: ".",
        ..spec("glrt-", WORD, 10)
    },
    Spec {
        extra: ".",
        ..spec("glrtr-", WORD, 10)
    },
    spec("glcbt-", WORD, 10),
    spec("glptt-", WORD, 10),
    spec("glft-", WORD, 10),
    spec("glimt-", WORD, 10),
    spec("glagent-", WORD, 10),
    spec("glsoat-", WORD, 10),
    spec("glffct-", WORD, 10),
    spec("glwt-", WORD, 10),
    spec("GR1348941", WORD, 10),
    spec("pk-lf-", ALNUM_DASH, 8),
];

/// A body of `len` characters cycling through the family alphabet, starting at `seed`.
fn body(spec: &Spec, len: usize, seed: usize) -> String {
    let chars: Vec<char> = spec.alphabet.chars().collect();
    (0..len)
        .map(|i| chars[(seed + i * 7) % chars.len()])
        .collect()
}

/// `sk_live_` and `sk_test_` are also matched by the broader `sk_[A-Za-z0-9_]{10,}` family
/// (the spec notes it subsumes them), so their own body limits do not end the match.
fn subsumed_by_sk_underscore(spec: &Spec) -> bool {
    spec.prefix.starts_with("sk_") && spec.prefix != "sk_"
}

fn find(s: &str) -> Option<(usize, usize)> {
    find_credential_prefix(s).map(|r| (r.start, r.end))
}

#[test]
fn spec_vectors_hit_and_miss_as_documented() {
    let cases: [(&str, bool); 11] = [
        ("https://x.com/?q=sk-abcdefghij", true),
        ("https://x.com/?q=sk-abcdefghi", false),
        ("https://x.com/a?k=sk-abc.def.ghij.klm", true),
        ("https://x.com/sk-abcdefghij.", true),
        ("https://x.com/%73k-abcdefghij", false),
        ("https://x.com/sk-abcdefghij", true),
        ("AKIAIOSFODNN7EXAMPLE", true),
        ("AKIAIOSFODNN7EXAMPLEX", false),
        ("/ask-abcdefghijk", false),
        ("risk-assessment-abcdefghij", false),
        ("?q=sk-abcdefghij&x=1", true),
    ];
    for (input, hit) in cases {
        assert_eq!(find(input).is_some(), hit, "{input:?} must be a hit: {hit}");
    }
    assert_eq!(
        find("https://x.com/sk-abcdefghij."),
        Some((14, 27)),
        "the trailing dot must stay out"
    );
    assert!(
        secret_in_url_forms(
            "https://x.com/%73k-abcdefghij",
            "https://x.com/%73k-abcdefghij"
        ),
        "the decoded form must reveal the escaped prefix"
    );
}

#[test]
fn every_family_matches_its_minimum_body_and_not_one_less() {
    for spec in &SPECS {
        let token = format!("{}{}", spec.prefix, body(spec, spec.min, 3));
        let short = format!("{}{}", spec.prefix, body(spec, spec.min - 1, 3));
        assert_eq!(
            find(&token),
            Some((0, token.len())),
            "{token} must be a whole match"
        );
        let want_short = subsumed_by_sk_underscore(spec).then_some((0, short.len()));
        assert_eq!(
            find(&short),
            want_short,
            "{short} (one short) must not match on its own"
        );
        let longer = format!("{}{}", spec.prefix, body(spec, spec.min + 1, 3));
        let want = if spec.exact {
            None
        } else {
            Some((0, longer.len()))
        };
        assert_eq!(
            find(&longer),
            want,
            "{longer} (one more) must match unless fixed-length"
        );
    }
}

#[test]
fn every_family_respects_the_leading_boundary_and_its_escape_reliefs() {
    let blocked = ["a", "Z", "0", "_", "-", "\\U0041", "\\x4", "\\u004"];
    let allowed = [
        "/", "=", " ", ".", "%", "é", "\\n", "\\t", "\\u0041", "\\x41", "\\uFFfe",
    ];
    for spec in &SPECS {
        let token = format!("{}{}", spec.prefix, body(spec, spec.min, 5));
        for lead in blocked {
            let s = format!("{lead}{token}");
            assert_eq!(
                find(&s),
                None,
                "{s:?} must not match: word character before the token"
            );
        }
        for lead in allowed {
            let s = format!("{lead}{token}");
            let want = Some((lead.len(), s.len()));
            assert_eq!(
                find(&s),
                want,
                "{s:?} must match after the boundary {lead:?}"
            );
        }
    }
}

#[test]
fn every_family_respects_the_trailing_boundary() {
    for spec in &SPECS {
        let token = format!("{}{}", spec.prefix, body(spec, spec.min, 9));
        for tail in ["a", "_", "-", "9"] {
            let s = format!("{token}{tail}");
            let want = if spec.exact { None } else { Some((0, s.len())) };
            if spec.alphabet.contains(tail) || (subsumed_by_sk_underscore(spec) && tail == "_") {
                assert_eq!(find(&s), want, "{s:?}: a body character extends the token");
            } else {
                assert_eq!(
                    find(&s),
                    None,
                    "{s:?}: a word character outside the body blocks"
                );
            }
        }
        let dotted = format!("{token}.");
        let want_end = if spec.extra == "." && spec.prefix != "sk-" {
            dotted.len()
        } else {
            token.len()
        };
        assert_eq!(
            find(&dotted),
            Some((0, want_end)),
            "{dotted:?}: a trailing dot ends the token"
        );
    }
}

#[test]
fn dotted_openai_style_bodies_follow_the_unit_rule() {
    let cases: [(&str, Option<(usize, usize)>); 6] = [
        ("sk-abc.def.ghij.klm", Some((0, 19))),
        ("sk-abcdefghij..x", Some((0, 13))),
        ("sk-abcd..efghijkl", None),
        ("sk-a.b.c.d.e.f.g.h.i.j", Some((0, 22))),
        ("sk-.abcdefghij", None),
        ("sk-sp-abc.def-ghi_jk", Some((0, 20))),
    ];
    for (input, want) in cases {
        assert_eq!(
            find(input),
            want,
            "{input:?} must follow the single-dot unit rule"
        );
    }
}

#[test]
fn special_families_follow_their_body_shape() {
    let cases: [(&str, Option<(usize, usize)>); 10] = [
        ("xapp-12-abcdefghij", Some((0, 18))),
        ("xapp--abcdefghij", None),
        ("xapp-\u{661}\u{662}-abcdefghij", Some((0, 20))),
        ("am_org_abcdefghijklmnopqrst", Some((0, 27))),
        ("am_abcdefghijklmnopqrst", Some((0, 23))),
        ("am_example_identifier_123", None),
        ("am_abcdefghij", None),
        ("gAAAAabcdefghijklmnopq==rs=", Some((0, 27))),
        ("AKIAiOSFODNN7EXAMPLE", None),
        ("sk_live_abcdefghij_x", Some((0, 20))),
    ];
    for (input, want) in cases {
        assert_eq!(
            find(input),
            want,
            "{input:?} must follow its family's body shape"
        );
    }
}

#[test]
fn slack_user_tokens_accept_each_type_letter() {
    for letter in ["b", "a", "p", "r", "s"] {
        let token = format!("xox{letter}-1234567890");
        assert_eq!(find(&token), Some((0, 15)), "{token} must match");
    }
    assert_eq!(find("xoxz-1234567890"), None, "xoxz- must not match");
}

#[test]
fn prefixes_are_case_sensitive() {
    for input in [
        "SK-abcdefghij",
        "Ghp_abcdefghij",
        "akia0123456789ABCDEF",
        "sg.abcdefghij",
    ] {
        assert_eq!(find(input), None, "{input:?} must not match: wrong case");
    }
}

#[test]
fn sensitive_query_names_follow_the_spec_vectors() {
    let cases: [(&str, Option<&str>); 14] = [
        ("https://x.com/?token=abc", Some("token")),
        ("https://x.com/?token=", None),
        ("https://x.com/?TOKEN=x", Some("TOKEN")),
        ("https://x.com/?%2574oken=x", Some("%74oken")),
        ("https://x.com/?code=x&key=y", None),
        ("https://x.com/?X-Amz-Signature=z", Some("X-Amz-Signature")),
        ("https://x.com/#token=x", None),
        ("https://x.com/?a=1&api_key=k&token=t", Some("api_key")),
        ("https://x.com/?token", None),
        ("https://x.com/?token=+", Some("token")),
        (
            "https://x.com/?to+ken=1&session+id=2&x_amz_signature=3",
            Some("x_amz_signature"),
        ),
        ("https://x.com/?to\u{212a}en=1", Some("to\u{212a}en")),
        ("ftp://x.com/?token=1", None),
        ("  HTTPS://x.com/?Password=1  ", Some("Password")),
    ];
    for (url, want) in cases {
        assert_eq!(sensitive_query_param_name(url).as_deref(), want, "{url:?}");
    }
}

fn gate(url: &str) -> Verdict {
    SecretUrlGate::default().check(&TargetUrl::new(url))
}

#[test]
fn the_gate_refuses_the_conformance_seeds() {
    let cases = [
        (
            "https://e.com/?q=sk-abcdefghij",
            Verdict::Deny(DenyReason::SecretInUrl {
                rule: "hermes-sk".into(),
            }),
        ),
        (
            "https://e.com/%73k-abcdefghij",
            Verdict::Deny(DenyReason::SecretInUrl {
                rule: "hermes-sk".into(),
            }),
        ),
        (
            "https://e.com/?token=x",
            Verdict::Deny(DenyReason::SensitiveQueryParam {
                key: "token".into(),
            }),
        ),
        ("https://e.com/?token=", Verdict::Allow),
        ("https://e.com/?q=sk-abcdefghi", Verdict::Allow),
    ];
    for (url, want) in cases {
        assert_eq!(gate(url), want, "{url}");
    }
    assert_eq!(
        SecretUrlGate::default().name(),
        "secret_url",
        "the gate name is the metric label"
    );
}

#[test]
fn the_gate_is_stricter_than_hermes_on_userinfo_and_fragments() {
    let token = |k: &str| Verdict::Deny(DenyReason::SensitiveQueryParam { key: k.into() });
    let cases = [
        (
            "https://user:pw@e.com/",
            Verdict::Deny(DenyReason::CredentialsInUserinfo),
        ),
        (
            "https://user@e.com/",
            Verdict::Deny(DenyReason::CredentialsInUserinfo),
        ),
        (
            "https://:pw@e.com/",
            Verdict::Deny(DenyReason::CredentialsInUserinfo),
        ),
        ("https://@e.com/", Verdict::Allow),
        (
            "https://e.com/cb#access_token=abc&token_type=bearer",
            token("access_token"),
        ),
        ("https://e.com/#/cb?Token=abc", token("Token")),
        ("https://e.com/#token=", Verdict::Allow),
        ("https://e.com/#section-2", Verdict::Allow),
        ("https://e.com/?q=1#code=abc", Verdict::Allow),
        ("https://u:p@e.com/?token=1", token("token")),
    ];
    for (url, want) in cases {
        assert_eq!(gate(url), want, "{url}");
    }
}

#[test]
fn host_checks_find_tokens_in_labels_and_escapes() {
    let cases = [
        (
            "sk-abcdefghij.evil.example",
            Verdict::Deny(DenyReason::SecretInHost {
                rule: "hermes-sk".into(),
            }),
        ),
        (
            "%73k-abcdefghij.evil.example",
            Verdict::Deny(DenyReason::SecretInHost {
                rule: "hermes-sk".into(),
            }),
        ),
        (
            "ghp_abcdefghij.example",
            Verdict::Deny(DenyReason::SecretInHost {
                rule: "hermes-ghp".into(),
            }),
        ),
        ("task-abcdefghij.example", Verdict::Allow),
        ("example.com", Verdict::Allow),
    ];
    for (host, want) in cases {
        assert_eq!(check_host_secret(host), want, "{host}");
    }
}

/// Boundary characters that are outside every body class, so the token ends exactly there.
const LEADS: [&str; 14] = [
    "", " ", "/", "=", "?q=", "&", "#", ".", "%", "é", "(", "\\n", "\\u00e9", "\\x41",
];
const TAILS: [&str; 12] = ["", " ", "/", "&", "#", "?", "\"", "é", ")", ",", ";", "%"];
/// Word characters to glue in front. `g` and `h` are left out: glued to `sk_…` / `sk-…` they
/// spell the `gsk_` and `hsk-` families, a real match rather than a boundary failure.
const GLUE: &str = "abcdefijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";

fn family_token() -> impl Strategy<Value = String> {
    (0..SPECS.len(), 0usize..24, any::<u64>()).prop_map(|(f, extra, seed)| {
        let spec = &SPECS[f];
        let len = if spec.exact {
            spec.min
        } else {
            spec.min + extra
        };
        let chars: Vec<char> = spec.alphabet.chars().collect();
        let mut state = seed;
        let body: String = (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                chars[usize::try_from(state >> 33).unwrap_or(0) % chars.len()]
            })
            .collect();
        format!("{}{body}", spec.prefix)
    })
}

proptest! {
    #[test]
    fn the_scanner_returns_char_boundary_ranges_on_any_input(s in ".*") {
        if let Some(r) = find_credential_prefix(&s) {
            prop_assert!(r.start < r.end && r.end <= s.len(), "range {:?} must be inside", r);
            prop_assert!(s.is_char_boundary(r.start) && s.is_char_boundary(r.end), "char boundaries");
        }
    }

    #[test]
    fn the_scanner_survives_token_shaped_noise(
        parts in prop::collection::vec(prop::sample::select(vec![
            "sk-", "sk_", "am_org_", "xapp-", "\u{661}", "-", ".", "..", "=", "\\", "\\u00", "\\x",
            "a", "Z", "9", "_", "/", "%73", "é", "gAAAA", "glrt-", "AKIA", "ghp_", "\u{0}",
        ]), 0..40),
    ) {
        let s: String = parts.concat();
        if let Some(r) = find_credential_prefix(&s) {
            prop_assert!(s.is_char_boundary(r.start) && s.is_char_boundary(r.end), "char boundaries");
            prop_assert!(r.end - r.start >= 11, "every family needs at least 11 bytes: {:?}", &s[r]);
        }
    }

    #[test]
    fn a_token_between_boundaries_is_found_exactly(
        token in family_token(),
        lead in prop::sample::select(LEADS.to_vec()),
        tail in prop::sample::select(TAILS.to_vec()),
    ) {
        let s = format!("{lead}{token}{tail}");
        let want = lead.len()..lead.len() + token.len();
        prop_assert_eq!(find_credential_prefix(&s), Some(want), "{:?} must be found exactly", s);
    }

    #[test]
    fn a_token_glued_to_a_word_character_is_not_found(
        token in family_token(),
        glue in prop::sample::select(GLUE.chars().collect::<Vec<_>>()),
        lead in prop::sample::select(vec!["", "/", "?q="]),
    ) {
        let s = format!("{lead}{glue}{token}/");
        prop_assert_eq!(find_credential_prefix(&s), None, "{:?} must not be found", s);
    }
}

/// Hermes' families first, over the whole text, then the built-in rules and JWTs: the two
/// passes [`Scan::hit`] joins into one.
fn two_passes(text: &str, skip: &[String]) -> Option<(std::ops::Range<usize>, String)> {
    hermes_hit(text).or_else(|| {
        RuleSet::builtin()
            .find_except(text, skip)
            .or_else(|| {
                (!skip.iter().any(|id| id == rules::JWT_RULE))
                    .then(|| rules::find_jwt(text))
                    .flatten()
            })
            .map(|h| (h.span, h.rule))
    })
}

fn one_pass(text: &str, skip: &[String]) -> Option<(std::ops::Range<usize>, String)> {
    Scan {
        exempt: false,
        skip,
        extra: &[],
    }
    .hit(text)
}

/// Pieces of texts for the one-pass scan: families, `sk-` prose, rule tokens, keywords that
/// lead nowhere, escapes and word glue.
const PIECES: [&str; 24] = [
    "ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c",
    "sk-learn-basics",
    "sk-proj-abcdefghijklmnop",
    "AKIAIOSFODNN7EXAMPLA",
    "xoxb-1234567890-abcdefghij",
    "glpat-abcdefghij1234567890",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlX19f",
    "npm_abcdefghij0123456789abcdefghij012345",
    "api key ",
    "path ",
    "secret ",
    "Key",
    " ",
    ".",
    "-",
    "_",
    "\\u0041",
    "\\n",
    "a",
    "Z",
    "9",
    "é",
    "\"",
    "The token stays out of the logs; rotate the password. ",
];

#[test]
fn one_pass_finds_what_hermes_then_the_rules_find() {
    let cases = [
        // Prose `sk-` before a real family, and inside a longer text (past one block).
        format!(
            "{} sk-learn-basics then ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c",
            "x".repeat(70)
        ),
        // A rule token before a Hermes family: Hermes wins, wherever it is.
        format!(
            "AKIAIOSFODNN7EXAMPLA {} xoxb-1234567890-abcdefghij",
            "y ".repeat(50)
        ),
        "prose with an api key and a path, nothing else".repeat(3),
        "MissingKey: key=ab".to_string(),
        String::new(),
    ];
    for text in &cases {
        assert_eq!(one_pass(text, &[]), two_passes(text, &[]), "{text}");
    }
    // The cases find what they were written for.
    assert_eq!(
        one_pass(&cases[0], &[]).map(|(_, r)| r),
        Some("hermes-ghp".to_string())
    );
    assert_eq!(
        one_pass(&cases[1], &[]).map(|(_, r)| r),
        Some("hermes-akia".to_string())
    );
    assert_eq!(one_pass(&cases[2], &[]), None);
}

proptest! {
    #[test]
    fn one_pass_finds_what_two_passes_find_on_any_mix(
        picks in prop::collection::vec(0usize..PIECES.len(), 0..60),
        skip_jwt in any::<bool>(),
    ) {
        let text: String = picks.iter().map(|&p| PIECES[p]).collect();
        let skip = if skip_jwt { vec![rules::JWT_RULE.to_string()] } else { Vec::new() };
        prop_assert_eq!(one_pass(&text, &skip), two_passes(&text, &skip), "{:?}", text);
    }
}

#[test]
fn an_inline_rule_refuses_its_token_unless_its_id_is_exempted() {
    let good = "version: v1\nsecrets:\n  inlineRules:\n  - |\n    [[rules]]\n    id = \"corp-api-token\"\n    regex = '''corp_live_[a-z0-9]{32}'''\n    keywords = [\"corp_live_\"]\n  allow: [corp-api-token]\n";
    let ok = crate::policy::Policy::parse(good.as_bytes(), std::path::Path::new("/"))
        .expect("an inline rule must compile");
    let target = TargetUrl::new(&format!(
        "https://api.example.com/?x=corp_live_{}",
        "a1".repeat(16)
    ));
    let found = find_secret(&target, Some(&ok.secrets));
    assert!(found.is_none(), "the exempted rule refuses nothing");
    let enforced = crate::policy::Policy::parse(
        good.replace("  allow: [corp-api-token]\n", "").as_bytes(),
        std::path::Path::new("/"),
    )
    .expect("an inline rule must compile");
    let found = find_secret(&target, Some(&enforced.secrets));
    assert_eq!(found.map(|f| f.rule), Some("corp-api-token".to_string()));
}
