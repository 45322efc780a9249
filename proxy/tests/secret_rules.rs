//! Gate E1 at leak-scanner breadth: token formats outside Hermes' 56 prefixes, URLs that are
//! themselves the credential, credential parameter names in other spellings, tokens in host
//! labels written upper-case or fullwidth, secrets encoded twice; the refusal names the rule
//! and no log form repeats the secret; 100+ real-world URLs that must pass; the gitleaks
//! rule-file parser.

// A test crate: its helpers report failures by panicking.
#![allow(clippy::expect_used)]

use fleetgate_proxy::base::target_url::TargetUrl;
use fleetgate_proxy::judge::gates::secret_url::rules::{RuleError, RuleSet, shannon_entropy};
use fleetgate_proxy::judge::gates::secret_url::{
    SecretUrlGate, check_host_secret, redact_secrets, secret_in_text,
};
use fleetgate_proxy::judge::gates::{DenyReason, Gate, Verdict};
use fleetgate_proxy::judge::telemetry::redact_url;

mod support_secrets;
use support_secrets::*;

fn decide(url: &str) -> Verdict {
    SecretUrlGate::default().check(&TargetUrl::new(url))
}

fn rule_of(url: &str) -> Option<String> {
    match decide(url) {
        Verdict::Deny(DenyReason::SecretInUrl { rule }) => Some(rule),
        _ => None,
    }
}

#[test]
fn token_formats_outside_hermes_prefixes_are_refused_with_their_rule() {
    for (token, rule) in leak_material() {
        assert_eq!(
            secret_in_text(&token, &[]).as_deref(),
            Some(rule),
            "{rule} must match its own format"
        );
        for url in [
            format!("https://api.example.com/v1/items?key={token}"),
            format!("https://example.com/download/{token}/file.zip"),
            format!("https://example.com/page#{token}"),
        ] {
            assert_eq!(rule_of(&url).as_deref(), Some(rule), "{url}");
        }
    }
}

#[test]
fn jwts_are_refused_anywhere_in_the_url() {
    let token = jwt(21);
    for url in [
        format!("https://app.example.com/cb?state={token}"),
        format!("https://app.example.com/cb?id_token={token}"),
        format!("https://app.example.com/session/{token}/view"),
        format!("https://app.example.com/#/done/{token}"),
    ] {
        let verdict = decide(&url);
        assert!(
            matches!(&verdict, Verdict::Deny(DenyReason::SecretInUrl { rule }) if rule == "jwt")
                || matches!(
                    &verdict,
                    Verdict::Deny(DenyReason::SensitiveQueryParam { .. })
                ),
            "{url}: {verdict:?}"
        );
    }
    // Three base64url parts whose header is not JSON with `alg`: not a JWT.
    assert_eq!(
        rule_of("https://example.com/eyJub3RhIjoiand0In0.abcdabcd.abcdabcdabcd"),
        None
    );
}

#[test]
fn urls_that_are_themselves_the_credential_are_refused() {
    let cases = [
        (
            format!(
                "https://hooks.slack.com/services/T{}/B{}/{}",
                random(UPPER_DIGIT, 8, 31),
                random(UPPER_DIGIT, 10, 32),
                random(ALNUM, 24, 33)
            ),
            "slack-webhook-url",
        ),
        (
            format!(
                "https://discord.com/api/webhooks/{}/{}",
                "1234567890123456789",
                random(B64URL, 68, 34)
            ),
            "discord-webhook-url",
        ),
        (
            format!(
                "https://api.telegram.org/bot{}:AA{}/sendMessage",
                "7123456789",
                random(B64URL, 33, 35)
            ),
            "telegram-bot-token",
        ),
    ];
    for (url, rule) in cases {
        assert_eq!(rule_of(&url).as_deref(), Some(rule), "{url}");
    }
}

#[test]
fn credential_parameter_names_in_other_spellings_are_refused() {
    for (url, key) in [
        ("https://e.com/api?accessToken=abc123", "accessToken"),
        ("https://e.com/api?access-token=abc123", "access-token"),
        ("https://e.com/api?api-key=abc123", "api-key"),
        ("https://e.com/api?refresh_token=abc123", "refresh_token"),
        ("https://e.com/api?access_token[]=abc123", "access_token[]"),
        ("https://e.com/api?q=1;access_token=abc123", "access_token"),
        (
            "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature=0a1b2c3d",
            "X-Goog-Signature",
        ),
        ("https://e.com/api?ACCESS%5FTOKEN=abc123", "ACCESS_TOKEN"),
    ] {
        assert_eq!(
            decide(url),
            Verdict::Deny(DenyReason::SensitiveQueryParam { key: key.into() }),
            "{url}"
        );
    }
    for url in [
        "https://e.com/api?accessToken=",
        "https://e.com/api?token_type=bearer",
        "https://e.com/api?code=abc&state=xyz",
        "https://e.com/api?sig=abc",
    ] {
        assert_eq!(decide(url), Verdict::Allow, "{url}");
    }
}

#[test]
fn a_slack_xoxe_token_in_a_short_query_parameter_is_refused() {
    // Shorter than the refresh-token rule's 146 characters: it used to pass under `?t=`.
    for token in [
        format!("xoxe-1-{}", random(ALNUM, 40, 61)),
        format!("xoxe-{}", random(ALNUM, 12, 62)),
    ] {
        for url in [
            format!("https://slack.example.com/api/check?t={token}"),
            format!("https://example.com/cb?a=1&t={token}&b=2"),
            format!("https://example.com/p/{token}"),
        ] {
            assert_eq!(rule_of(&url).as_deref(), Some("slack-e-token"), "{url}");
            let logged = redact_url(&url);
            assert!(!logged.contains(&token), "{logged} repeats the token");
        }
    }
    // The long refresh tokens keep their own rule; prose with `xoxe` passes.
    let long = format!("https://e.com/?t=xoxe-1-{}", random(ALNUM, 150, 63));
    assert_eq!(rule_of(&long).as_deref(), Some("slack-refresh-token"));
    for url in ["https://e.com/blog/xoxe-", "https://e.com/?t=xoxe-short"] {
        assert_eq!(decide(url), Verdict::Allow, "{url}");
    }
}

/// A V4 signed URL as `gcloud storage sign-url` writes it, with `signature` as the
/// `X-Goog-Signature` value.
fn gcs_signed_url(signature: &str) -> String {
    format!(
        "https://storage.googleapis.com/example-bucket/reports/2024/q1.pdf\
         ?X-Goog-Algorithm=GOOG4-RSA-SHA256\
         &X-Goog-Credential=signer%40example-project.iam.gserviceaccount.com%2F20240101%2Fauto%2Fstorage%2Fgoog4_request\
         &X-Goog-Date=20240101T000000Z&X-Goog-Expires=900&X-Goog-SignedHeaders=host\
         &X-Goog-Signature={signature}"
    )
}

#[test]
fn a_gcs_signed_url_with_an_ordinary_signature_passes_as_in_hermes() {
    // RSA-SHA256 (512 hex digits) and HMAC-SHA256 (64) signatures, any case.
    for signature in [
        random(HEX, 512, 71),
        random(HEX, 64, 72),
        random(HEX, 64, 73).to_uppercase(),
    ] {
        let url = gcs_signed_url(&signature);
        assert_eq!(decide(&url), Verdict::Allow, "{url}");
    }
    // Any other value under that name is still a credential parameter.
    for value in [
        "0a1b2c3d".to_string(),
        random(ALNUM, 64, 74),
        format!("{}%20", random(HEX, 64, 75)),
        random(HEX, 1026, 76),
    ] {
        let url = gcs_signed_url(&value);
        assert_eq!(
            decide(&url),
            Verdict::Deny(DenyReason::SensitiveQueryParam {
                key: "X-Goog-Signature".into()
            }),
            "{url}"
        );
    }
    // A secret in the value is still found by the rules.
    let url = gcs_signed_url(&format!("ghp_{}", random(ALNUM, 36, 77)));
    assert_eq!(rule_of(&url).as_deref(), Some("hermes-ghp"), "{url}");
}

#[test]
fn tokens_in_host_labels_are_found_in_upper_case_and_fullwidth_forms() {
    let hex = random(HEX, 40, 41);
    let upper = format!("https://GLPTT-{}.example.com/", hex.to_uppercase());
    assert!(rule_of(&upper).is_some(), "{upper}");
    let body = random(ALNUM, 36, 42);
    let fullwidth: String = format!("ghp_{body}")
        .chars()
        .map(|c| match c {
            '!'..='~' => char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap_or(c),
            c => c,
        })
        .collect();
    let url = format!("https://{fullwidth}.example.com/");
    assert_eq!(rule_of(&url).as_deref(), Some("hermes-ghp"), "{url}");
    // The host checks of CONNECT and transparent capture see the same.
    for host in [
        format!("GLPTT-{}.example.com", hex.to_uppercase()),
        format!("{fullwidth}.example.com"),
    ] {
        assert!(
            matches!(
                check_host_secret(&host),
                Verdict::Deny(DenyReason::SecretInHost { .. })
            ),
            "{host}"
        );
    }
}

#[test]
fn a_secret_encoded_twice_is_decoded_and_refused() {
    for url in [
        "https://e.com/?q=%2573k-abcdefghijkl",
        "https://e.com/p/%252573k-abcdefghijkl",
    ] {
        assert_eq!(rule_of(url).as_deref(), Some("hermes-sk"), "{url}");
    }
}

#[test]
fn docs_paths_with_sk_words_pass_while_single_word_sk_tokens_stay_refused() {
    assert_eq!(
        decide("https://example.org/tutorials/sk-learn-basics/"),
        Verdict::Allow
    );
    assert_eq!(
        rule_of("https://e.com/?q=sk-abcdefghij").as_deref(),
        Some("hermes-sk")
    );
    assert_eq!(
        rule_of("https://e.com/k/sk-learn-basics-x7Kq9ZpL2mR4").as_deref(),
        Some("hermes-sk"),
        "a word followed by a random part is a key"
    );
}

#[test]
fn no_log_form_repeats_a_refused_secret() {
    let mut secrets: Vec<String> = leak_material().into_iter().map(|(t, _)| t).collect();
    secrets.push(jwt(51));
    secrets.push(format!("ghp_{}", random(ALNUM, 36, 52)));
    let mut checked = 0;
    for secret in &secrets {
        let in_host = secret.replace(['.', '_'], "-");
        for (url, token) in [
            (
                format!("https://example.com/a/{secret}/b?x=1"),
                secret.clone(),
            ),
            (format!("https://{in_host}.example.com/"), in_host.clone()),
        ] {
            if decide(&url) == Verdict::Allow {
                continue; // not refused (a format that does not survive `-` for `_`)
            }
            checked += 1;
            let shown = redact_url(&url).to_lowercase();
            assert!(
                !shown.contains(&token.to_lowercase()),
                "{shown} repeats the secret"
            );
        }
        let encoded: String = secret.bytes().map(|b| format!("%{b:02X}")).collect();
        let shown = redact_url(&format!("https://example.com/p/{encoded}"));
        assert!(
            !shown.contains(&encoded) && shown.contains("[redacted:"),
            "a percent-encoded secret must be redacted too: {shown}"
        );
    }
    assert!(checked >= 25, "only {checked} refused URLs were checked");
    assert_eq!(
        redact_url("https://example.com/docs/page?q=1"),
        "https://example.com/docs/page",
        "a URL without a secret is shown as before"
    );
    assert_eq!(redact_secrets("api.example.com:443"), "api.example.com:443");
}

/// Real-world URLs of the kinds a leak scanner trips on: OAuth callbacks with `code=`, signed
/// CDN links with `sig=`, docs paths with `sk-`, `token` as a path word, commit ids.
const ALLOWED: &[&str] = &[
    "https://example.com/oauth/callback?code=4/0AY0e-g7abcdefghijklmnop&scope=email",
    "https://app.example.com/auth/callback?code=SplxlOBeZQQYbYS6WxSbIA&state=xyzABC123",
    "https://github.com/login/oauth/authorize?client_id=Iv1.8a61f9b3a7aba766&state=abc",
    "https://accounts.google.com/o/oauth2/v2/auth?response_type=code&client_id=123.apps.googleusercontent.com",
    "https://login.microsoftonline.com/common/oauth2/v2.0/authorize?client_id=6731de76-14a6-49ae-97bc-6eba6914391e",
    "https://cdn.example.net/video.mp4?sig=8f14e45fceea167a5a36dedd4bea2543&exp=1735689600",
    "https://media.example.org/img.png?Expires=1735689600&Key-Pair-Id=K2JCJMDEHXQW5F&sig=abc",
    "https://example.blob.core.windows.net/c/file.txt?sv=2022-11-02&se=2026-01-01&sr=b&sp=r",
    "https://i.ytimg.com/vi/dQw4w9WgXcQ/hqdefault.jpg?sqp=-oaymwEcCNACELwBSFXyq4qpAw4IARUAAIhCGAFwAcABBg",
    "https://scikit-learn.org/stable/tutorial/sk-learn-basics/index.html",
    "https://example.org/tutorials/sk-learn-basics/",
    "https://example.org/blog/sk-learn-vs-pytorch/",
    "https://docs.example.com/sk-hynix-memory-guide",
    "https://example.com/api/token",
    "https://example.com/docs/token-refresh",
    "https://example.com/auth/token/revoke",
    "https://jwt.io/introduction",
    "https://example.com/docs/api-keys/rotate",
    "https://example.com/settings/tokens/new",
    "https://github.com/rust-lang/rust/commit/2f5df8a9e8c1a3e4b7d6c5f4a3b2c1d0e9f8a7b6",
    "https://github.com/torvalds/linux/commit/0bb80ecc33a8fb5a682236443c1e740d5c917d1d",
    "https://gitlab.com/gitlab-org/gitlab/-/commit/9e6bb0a3f4c2d1e0b9a8c7d6e5f4a3b2c1d0e9f8",
    "https://github.com/python/cpython/tree/3.12/Lib",
    "https://github.com/NousResearch/hermes-agent/blob/main/README.md",
    "https://raw.githubusercontent.com/user/repo/a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0/file.py",
    "https://www.example.com/search?q=how+to+rotate+an+api+key",
    "https://stackoverflow.com/questions/12345678/what-is-a-bearer-token",
    "https://en.wikipedia.org/wiki/JSON_Web_Token",
    "https://en.wikipedia.org/wiki/Secret_sharing",
    "https://en.wikipedia.org/wiki/Password",
    "https://developer.mozilla.org/en-US/docs/Web/HTTP/Headers/Authorization",
    "https://docs.aws.amazon.com/IAM/latest/UserGuide/id_credentials_access-keys.html",
    "https://docs.github.com/en/authentication/keeping-your-account-and-data-secure/managing-your-personal-access-tokens",
    "https://platform.openai.com/docs/api-reference/authentication",
    "https://docs.anthropic.com/en/api/getting-started",
    "https://stripe.com/docs/keys",
    "https://www.npmjs.com/package/jsonwebtoken",
    "https://pypi.org/project/PyJWT/",
    "https://crates.io/crates/jsonwebtoken",
    "https://example.com/products?id=123456789&ref=homepage",
    "https://shop.example.com/cart?session=abc",
    "https://example.com/page?utm_source=newsletter&utm_medium=email&utm_campaign=spring",
    "https://news.ycombinator.com/item?id=40123456",
    "https://www.reddit.com/r/rust/comments/1abcdef/some_title/",
    "https://www.youtube.com/watch?v=dQw4w9WgXcQ&t=42s",
    "https://maps.google.com/?q=48.8584,2.2945",
    "https://arxiv.org/abs/2401.01234",
    "https://doi.org/10.1000/182",
    "https://example.com/files/2024-01-01_report_final.pdf",
    "https://example.com/uuid/550e8400-e29b-41d4-a716-446655440000",
    "https://example.com/assets/app.3f2a1b9c.js",
    "https://example.com/static/css/main.a1b2c3d4.chunk.css",
    "https://cdn.jsdelivr.net/npm/bootstrap@5.3.2/dist/css/bootstrap.min.css",
    "https://unpkg.com/react@18.2.0/umd/react.production.min.js",
    "https://fonts.googleapis.com/css2?family=Inter:wght@400;700&display=swap",
    "https://www.google.com/search?q=skip+the+line&hl=en",
    "https://example.com/en/sk/",
    "https://www.example.sk/produkty/",
    "https://example.com/sku/SK-12345",
    "https://example.com/skills/sk-8/overview",
    "https://example.com/path/AKIDO-martial-arts",
    "https://example.com/tasks/task-abcdefghij",
    "https://example.com/dapi/overview",
    "https://example.com/docs/hvs/intro",
    "https://example.com/pul-ups",
    "https://example.com/shpat",
    "https://example.com/SKU1234567890ABCDEF",
    "https://example.com/?page=2&sort=desc&limit=50",
    "https://example.com/?lang=en-US&currency=USD",
    "https://example.com/api/v2/users/42/repos?per_page=100",
    "https://api.github.com/repos/rust-lang/rust/pulls?state=open",
    "https://registry.npmjs.org/express",
    "https://hub.docker.com/_/postgres",
    "https://quay.io/repository/prometheus/node-exporter?tab=tags",
    "https://artifacthub.io/packages/helm/bitnami/nginx",
    "https://kubernetes.io/docs/concepts/configuration/secret/",
    "https://helm.sh/docs/chart_template_guide/",
    "https://www.terraform.io/docs/cloud/users-teams-organizations/api-tokens.html",
    "https://developer.hashicorp.com/vault/docs/concepts/tokens",
    "https://grafana.com/docs/grafana/latest/administration/service-accounts/",
    "https://docs.sentry.io/product/accounts/auth-tokens/",
    "https://www.twilio.com/docs/iam/api-keys",
    "https://shopify.dev/docs/apps/auth/access-token-types",
    "https://learning.postman.com/docs/developer/postman-api/authentication/",
    "https://linear.app/docs/api-and-webhooks",
    "https://api.slack.com/messaging/webhooks",
    "https://discord.com/developers/docs/resources/webhook",
    "https://core.telegram.org/bots/api",
    "https://hooks.slack.com/",
    "https://discord.com/api/webhooks",
    "https://example.com/feed.xml",
    "https://example.com/sitemap.xml",
    "https://example.com/robots.txt",
    "https://example.com/.well-known/openid-configuration",
    "https://example.com/.well-known/jwks.json",
    "https://example.com/blog/2024/05/understanding-oauth-state-parameters",
    "https://example.com/a/b/c/d/e/f/g",
    "https://sub.domain.example.co.uk/path?x=y",
    "https://xn--nxasmq6b.example/",
    "https://münchen.example/stadtplan",
    "https://example.com/%E2%9C%93/check",
    "https://example.com/search?q=%22exact+phrase%22",
    "https://example.com/wiki/Special:Random",
    "https://example.com/img/1x1.gif?cb=1700000000000",
    "https://example.com/track?event=pageview&ts=1700000000",
    "https://example.com/download?file=report.csv&format=csv",
    "http://localhost.example.com:8080/health",
    "https://example.com/ABCDEFGHIJKLMNOPQRST",
    "https://example.com/mail/key-facts-about-email",
];

#[test]
fn over_a_hundred_real_world_urls_pass() {
    assert!(
        ALLOWED.len() >= 100,
        "the corpus has {} URLs",
        ALLOWED.len()
    );
    let refused: Vec<String> = ALLOWED
        .iter()
        .filter_map(|url| match decide(url) {
            Verdict::Allow => None,
            other => Some(format!("{url}: {other:?}")),
        })
        .collect();
    assert!(
        refused.is_empty(),
        "false positives:\n{}",
        refused.join("\n")
    );
}

#[test]
fn a_gitleaks_rule_file_loads_with_its_allowlists_and_a_bad_one_names_the_rule() {
    let file = r#"
title = "corp rules"
[extend]
useDefault = true

[[rules]]
id = "corp-internal-token"
description = "Corp service token"
regex = '''corp_([a-z0-9]{24})'''
keywords = ["corp_"]
entropy = 3.0
tags = ["internal"]
[[rules.allowlists]]
stopwords = ["example"]

[[rules]]
id = "corp-files"
path = '''\.pem$'''

[allowlist]
regexes = ['''corp_0{24}''']
"#;
    let set = RuleSet::parse(file, "corp.toml").expect("the file must load");
    assert_eq!(set.ids().collect::<Vec<_>>(), vec!["corp-internal-token"]);
    let token = format!(
        "corp_{}",
        random("abcdefghijklmnopqrstuvwxyz0123456789", 24, 61)
    );
    let hit = set
        .find(&format!("https://x.example/?t={token}"))
        .expect("a hit");
    assert_eq!(hit.rule, "corp-internal-token");
    assert!(
        set.find("https://x.example/?t=corp_000000000000000000000000")
            .is_none()
    );
    assert!(
        set.find("https://x.example/?t=corp_aaaaaaaaaaaaaaaaaaaaaaaa")
            .is_none(),
        "under the entropy floor"
    );
    assert!(
        set.find("https://x.example/?t=corp_example0000000000000000")
            .is_none(),
        "stopword"
    );
    assert_eq!(
        secret_in_text(&format!("https://x.example/{token}"), &[&set]).as_deref(),
        Some("corp-internal-token")
    );

    let bad = r#"
[[rules]]
id = "broken"
regex = '''corp_([a-z'''
"#;
    match RuleSet::parse(bad, "bad.toml") {
        Err(RuleError::Rule {
            id,
            origin,
            message,
        }) => {
            assert_eq!((id.as_str(), origin.as_str()), ("broken", "bad.toml"));
            assert!(message.contains("invalid regex"), "{message}");
        }
        other => panic!("a broken regex must be refused naming the rule: {other:?}"),
    }
    for (text, says) in [
        ("[[rules]]\nregex = 'x'\n", "has no id"),
        (
            "[[rules]]\nid = 'a'\nregex = 'x'\n[[rules]]\nid = 'a'\nregex = 'y'\n",
            "defined twice",
        ),
        ("[[rules]]\nid = 'a'\n", "has no regex"),
        (
            "[[rules]]\nid = 'a'\nregex = '(x)'\nsecretGroup = 3\n",
            "secretGroup 3",
        ),
        ("rules = 3", "failed to parse"),
    ] {
        let err = RuleSet::parse(text, "t.toml").expect_err(text).to_string();
        assert!(err.contains(says), "{text:?}: {err}");
    }
}

#[test]
fn entropy_is_measured_in_bits_per_byte() {
    assert_eq!(shannon_entropy(b""), 0.0);
    assert_eq!(shannon_entropy(b"aaaa"), 0.0);
    assert!((shannon_entropy(b"abcd") - 2.0).abs() < 1e-9);
}

#[test]
fn policy_rule_files_enforce_or_report_and_exemptions_never_reach_hermes_families() {
    use fleetgate_proxy::policy::Policy;
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(
        dir.path().join("corp.toml"),
        "[[rules]]\nid = \"corp-token\"\nregex = '''corp_[a-z0-9]{24}'''\nkeywords = [\"corp_\"]\n",
    )
    .expect("write");
    let policy = |yaml: &str| {
        Policy::parse(format!("version: v1\n{yaml}").as_bytes(), dir.path())
            .expect("the policy must parse")
    };
    let token = format!(
        "corp_{}",
        random("abcdefghijklmnopqrstuvwxyz0123456789", 24, 71)
    );
    let url = TargetUrl::new(&format!("https://x.example/{token}"));
    let shop = format!("shpat_{}", random(HEX, 32, 72));
    let docs = TargetUrl::new(&format!("https://docs.example.com/guide/{shop}"));

    let enforce = policy("secrets:\n  rulesFiles: [corp.toml]\n");
    let gate = SecretUrlGate {
        secrets: Some(&enforce.secrets),
    };
    assert_eq!(
        gate.check(&url),
        Verdict::Deny(DenyReason::SecretInUrl {
            rule: "corp-token".into()
        })
    );
    assert_eq!(
        SecretUrlGate::default().check(&url),
        Verdict::Allow,
        "without the file the token is unknown"
    );

    let report = policy("secrets:\n  mode: report\n  rulesFiles: [corp.toml]\n");
    let shadow = SecretUrlGate {
        secrets: Some(&report.secrets),
    };
    assert_eq!(
        shadow.check(&url),
        Verdict::Report(DenyReason::SecretInUrl {
            rule: "corp-token".into()
        }),
        "report mode lets the URL pass and says which rule would refuse it"
    );
    assert!(
        matches!(shadow.check(&docs), Verdict::Deny(_)),
        "report mode covers the files' rules only, not the built-in ones"
    );

    let allowing = policy(
        "secrets:\n  allow: [shopify-shpat, 'https://docs.example.com/']\n  rulesFiles: [corp.toml]\n",
    );
    let exempt = SecretUrlGate {
        secrets: Some(&allowing.secrets),
    };
    assert_eq!(exempt.check(&docs), Verdict::Allow, "an exempt prefix");
    assert_eq!(
        exempt.check(&TargetUrl::new(&format!("https://other.example/{shop}"))),
        Verdict::Allow,
        "an exempt rule id"
    );
    assert_eq!(
        exempt.check(&TargetUrl::new(
            "https://docs.example.com/guide/?q=sk-abcdefghijkl"
        )),
        Verdict::Deny(DenyReason::SecretInUrl {
            rule: "hermes-sk".into()
        }),
        "Hermes' families are never exempt, not even under an allowed prefix"
    );
}
