//! Differential conformance against the real Hermes in the test venv: the website blocklist
//! (gate E4) and the address table (gate E2) on IP literals.
//!
//! One Python process answers every case: `tools.website_policy.check_website_access` against a
//! temp `HERMES_HOME` per generated rule list, and `tools.url_safety.is_safe_url` per address.
//!
//! Deliberate differences, kept out of the generated corpus and covered by unit tests instead:
//! - Unicode (IDN) rules: fleetgate converts them to punycode so they match the canonical host;
//!   Hermes compares the Unicode text with an already-punycoded host and never matches.
//! - Rules with `user@` or `:port`: fleetgate reduces them to the host (reference §5.2); the
//!   Hermes 0.19.0 in the venv keeps the netloc, which can never match.
//! - A BOM in a shared file: fleetgate strips it; Hermes 0.19.0 keeps it in the first rule.
//! - Non-canonical IPv6 rules (`2001:DB8:0::1`): fleetgate rewrites them to canonical text.
//! - Glob sets Python's regex compiler rejects: fleetgate drops the rule at load; Hermes raises
//!   on every check that reaches it.
//!
//! For addresses the contract is inclusion: everything Hermes refuses, fleetgate refuses. The
//! classes where fleetgate is stricter are listed in `STRICTER_THAN_HERMES` and checked exactly.

// Helpers outside `#[test]` functions are test code too; clippy's test allowances do not see them.
#![allow(clippy::expect_used, clippy::print_stdout)]

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::Command;

use fleetgate_proxy::base::target_url::TargetUrl;
use fleetgate_proxy::judge::gates::ip_guard::{AddrPolicy, classify_addr};
use fleetgate_proxy::judge::gates::website_blocklist::Blocklist;
use serde_json::{Value, json};

/// Address classes fleetgate refuses where Hermes (CPython 3.11 `ipaddress`) lets some or all
/// of the class through.
const STRICTER_THAN_HERMES: &[&str] = &[
    "amt",               // 192.52.193.0/24
    "as112",             // 192.31.196.0/24, 192.175.48.0/24, 2620:4f:8000::/48
    "documentation",     // 3fff::/20
    "ietf_protocol",     // 192.0.0.0/24 outside 192.0.0.0/29 and 192.0.0.170/31
    "ipv6_site_local",   // fec0::/10
    "metadata",          // 168.63.129.16 (Azure WireServer), 192.0.0.192 (OCI)
    "six_to_four",       // 2002::/16
    "six_to_four_relay", // 192.88.99.0/24
];

const DRIVER: &str = r#"
import json, logging, os, sys
logging.disable(logging.CRITICAL)
req = json.load(open(sys.argv[1], encoding="utf-8"))
from tools import website_policy as wp
from tools import url_safety as us
out = {"policy": [], "ip": []}
for case in req["policy_cases"]:
    os.environ["HERMES_HOME"] = case["home"]
    wp.invalidate_cache()
    got = []
    for url in case["urls"]:
        r = wp.check_website_access(url)
        got.append(None if r is None else [r["host"], r["rule"], r["source"]])
    out["policy"].append(got)
for url in req["ip_urls"]:
    out["ip"].append(bool(us.is_safe_url(url)))
json.dump(out, sys.stdout)
"#;

/// The venv, or `None` (test skipped) when it is not configured.
fn venv() -> Option<PathBuf> {
    match std::env::var_os("FLEETGATE_VENV").filter(|v| !v.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => {
            assert!(
                std::env::var("FLEETGATE_REQUIRE_VENV").as_deref() != Ok("1"),
                "FLEETGATE_VENV must be set when FLEETGATE_REQUIRE_VENV=1"
            );
            println!("skipped: FLEETGATE_VENV not set (run tests/run)");
            None
        }
    }
}

/// Run the driver once over `request`, in a scrubbed environment.
fn run_hermes(venv: &Path, work: &Path, request: &Value) -> Value {
    let req_path = work.join("request.json");
    let script = work.join("driver.py");
    std::fs::write(&req_path, request.to_string()).expect("request must be written");
    std::fs::write(&script, DRIVER).expect("driver must be written");
    let mut cmd = Command::new(venv.join("bin/python"));
    cmd.arg(&script).arg(&req_path).current_dir(work);
    cmd.env("HERMES_HOME", work.join("home-default"))
        .env("HERMES_ALLOW_PRIVATE_URLS", "false")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("HOME", work);
    for var in [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd.output().expect("the venv python must start");
    assert!(
        out.status.success(),
        "the Hermes driver must succeed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the driver must print JSON")
}

/// splitmix64: a deterministic generator, so every run checks the same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const LABELS: &[&str] = &[
    "example", "com", "ads", "www", "a", "b", "cdn", "tracker", "io", "net", "co", "uk", "x-y",
    "shop", "api", "1", "ex", "bd", "ab",
];

fn domain(rng: &mut Rng, max_labels: usize) -> String {
    let n = 1 + rng.below(max_labels);
    (0..n)
        .map(|_| rng.pick(LABELS))
        .collect::<Vec<_>>()
        .join(".")
}

/// One rule in one of the shapes both implementations must treat alike.
fn rule(rng: &mut Rng) -> String {
    let d = domain(rng, 3);
    match rng.below(16) {
        0 => format!("www.{d}"),
        1 => d.to_uppercase(),
        2 => format!("{d}."),
        3 => format!("https://{d}/path"),
        4 => format!("http://www.{d}/"),
        5 => format!("{d}/a/b"),
        6 => format!("*.{d}"),
        7 => format!("*.{}", d.replacen('a', "?", 1)),
        8 => format!("*.[a-c]{d}"),
        9 => format!("*.[!a]{d}"),
        10 => format!("*.*.{d}"),
        11 => format!("*.{}*.{d}", rng.pick(LABELS)),
        12 => format!("# {d}"),
        13 => format!("  {d}\t"),
        14 => format!("*.{d}*"),
        _ => d,
    }
}

fn host(rng: &mut Rng, rules: &[String]) -> String {
    if !rules.is_empty() && rng.below(2) == 0 {
        let base = rules[rng.below(rules.len())]
            .trim()
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .trim_start_matches("*.")
            .trim_start_matches("www.")
            .split('/')
            .next()
            .unwrap_or_default()
            .replace(['*', '?', '[', ']', '!', '#', ' '], "")
            .to_lowercase();
        let prefix = domain(rng, 2);
        return match rng.below(3) {
            0 => base,
            _ => format!("{prefix}.{base}"),
        }
        .trim_matches('.')
        .to_string();
    }
    domain(rng, 4)
}

/// One generated rule list, written as a Hermes home, plus the URLs to ask about.
struct PolicyCase {
    home: PathBuf,
    enabled: bool,
    domains: Vec<String>,
    shared: Vec<PathBuf>,
    /// The generated hosts (lowercase), used when WHATWG refuses the URL.
    hosts: Vec<String>,
    urls: Vec<String>,
}

fn build_case(rng: &mut Rng, work: &Path, index: usize) -> PolicyCase {
    let home = work.join(format!("home-{index}"));
    std::fs::create_dir_all(home.join("lists")).expect("home must be created");
    let domains: Vec<String> = (0..2 + rng.below(10)).map(|_| rule(rng)).collect();
    let file_rules: Vec<String> = (0..rng.below(10)).map(|_| rule(rng)).collect();
    let body: String = file_rules
        .iter()
        .flat_map(|r| [r.clone(), ["", "# note", "   "][rng.below(3)].to_string()])
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(home.join("lists/shared.txt"), body).expect("shared list must be written");
    let mut shared = vec![
        PathBuf::from("lists/shared.txt"),
        PathBuf::from("lists/missing.txt"),
    ];
    if rng.below(2) == 0 {
        let abs = home.join("abs.txt");
        std::fs::write(&abs, rule(rng)).expect("absolute list must be written");
        shared.push(abs);
    }
    let enabled = index % 10 != 9;
    let config = json!({"security": {"website_blocklist": {
        "enabled": enabled,
        "domains": domains,
        "shared_files": shared.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
    }}});
    let yaml = serde_yaml::to_string(&config).expect("config must serialise");
    std::fs::write(home.join("config.yaml"), yaml).expect("config must be written");
    let all_rules: Vec<String> = domains.iter().chain(&file_rules).cloned().collect();
    let hosts: Vec<String> = (0..60).map(|_| host(rng, &all_rules)).collect();
    let urls = hosts
        .iter()
        .map(|h| match rng.below(5) {
            0 => format!("https://{}./p?q=1", h.to_uppercase()),
            _ => format!("https://{h}/p"),
        })
        .collect();
    PolicyCase {
        home,
        enabled,
        domains,
        shared,
        hosts,
        urls,
    }
}

/// fleetgate's answer for one URL. WHATWG refuses or rewrites some generated hosts before E4
/// (`a.b.1` does not parse: a numeric last label must be IPv4; `1` becomes `0.0.0.1`); for
/// those the generated host is checked directly, so the blocklist semantics are still compared.
fn fleetgate_verdict(list: &Blocklist, url: &str, generated_host: &str) -> (Value, bool) {
    let parsed = TargetUrl::new(url).host;
    let rewritten = parsed.as_deref() != Some(generated_host);
    let numeric_last = generated_host
        .rsplit('.')
        .next()
        .is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()));
    assert!(
        !rewritten || numeric_last,
        "{url}: WHATWG must keep a host without a numeric last label, got {parsed:?}"
    );
    let verdict = match list.check_host(generated_host) {
        Some(m) => json!([m.host, m.rule, m.source]),
        None => Value::Null,
    };
    (verdict, rewritten)
}

#[test]
fn website_blocklist_matches_hermes_on_generated_rule_lists() {
    let Some(venv) = venv() else { return };
    let work = tempfile::tempdir().expect("work dir must be created");
    let mut rng = Rng(0x00f1_ee76_a7e0_0004);
    let cases: Vec<PolicyCase> = (0..60)
        .map(|i| build_case(&mut rng, work.path(), i))
        .collect();
    let request = json!({
        "policy_cases": cases.iter().map(|c| json!({"home": c.home, "urls": c.urls})).collect::<Vec<_>>(),
        "ip_urls": [],
    });
    let answers = run_hermes(&venv, work.path(), &request);
    let (mut blocked, mut allowed, mut rule_checks, mut fallbacks) = (0, 0, 0, 0);
    for (case, hermes) in cases
        .iter()
        .zip(answers["policy"].as_array().expect("policy answers"))
    {
        let (list, _) = Blocklist::load(case.enabled, &case.domains, &case.shared, &case.home);
        let answers = hermes.as_array().expect("one answer per url");
        for ((url, host), want) in case.urls.iter().zip(&case.hosts).zip(answers) {
            let (got, fallback) = fleetgate_verdict(&list, url, host);
            fallbacks += usize::from(fallback);
            assert_eq!(
                &got, want,
                "{url} under {:?} + {:?}: fleetgate vs Hermes",
                case.domains, case.shared
            );
            if want.is_null() {
                allowed += 1
            } else {
                blocked += 1
            }
            rule_checks += list.len();
        }
    }
    println!(
        "website policy: {} urls ({fallbacks} refused or rewritten by WHATWG), {rule_checks} host x rule pairs, {blocked} blocked, {allowed} allowed",
        blocked + allowed
    );
    assert!(
        blocked > 500 && allowed > 500,
        "the corpus must exercise both outcomes"
    );
}

/// Interesting prefixes: the §3.2 table, the floor, and CPython's own private blocks.
const PREFIXES: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.0.0/29",
    "192.0.0.170/31",
    "192.0.2.0/24",
    "192.31.196.0/24",
    "192.52.193.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "192.175.48.0/24",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "100.100.100.200/32",
    "168.63.129.16/32",
    "192.0.0.192/32",
    "::/128",
    "::1/128",
    "::/96",
    "::ffff:0:0:0/96",
    "64:ff9b::/96",
    "64:ff9b:1::/48",
    "100::/64",
    "fc00::/7",
    "fd00:ec2::254/128",
    "fd00:ec2::23/128",
    "fe80::/10",
    "fec0::/10",
    "ff00::/8",
    "2001::/32",
    "2001:2::/48",
    "2001:3::/32",
    "2001:4:112::/48",
    "2001:10::/28",
    "2001:20::/28",
    "2001::/23",
    "2001:db8::/32",
    "2002::/16",
    "2620:4f:8000::/48",
    "3fff::/20",
    "2000::/3",
    "8.0.0.0/7",
];

fn address_corpus(rng: &mut Rng) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for p in PREFIXES {
        let net: ipnet::IpNet = p.parse().expect("prefix must parse");
        let (first, last) = match net {
            ipnet::IpNet::V4(n) => (
                u128::from(u32::from(n.network())),
                u128::from(u32::from(n.broadcast())),
            ),
            ipnet::IpNet::V6(n) => (u128::from(n.network()), u128::from(n.broadcast())),
        };
        let span = last - first;
        let mut picks = vec![first, last, first.wrapping_sub(1), last.wrapping_add(1)];
        picks.extend((0..3).map(|_| {
            first
                + (u128::from(rng.next()) << 64 | u128::from(rng.next()))
                    % span.saturating_add(1).max(1)
        }));
        for v in picks {
            out.push(match net {
                ipnet::IpNet::V4(_) => IpAddr::V4(Ipv4Addr::from(v as u32)),
                ipnet::IpNet::V6(_) => IpAddr::V6(Ipv6Addr::from(v)),
            });
        }
    }
    out.extend((0..400).map(|_| IpAddr::V4(Ipv4Addr::from(rng.next() as u32))));
    out.extend((0..200).map(|_| {
        IpAddr::V6(Ipv6Addr::from(
            u128::from(rng.next()) << 64 | u128::from(rng.next()),
        ))
    }));
    let mapped: Vec<IpAddr> = out
        .iter()
        .filter_map(|a| match a {
            IpAddr::V4(v4) => Some(IpAddr::V6(v4.to_ipv6_mapped())),
            IpAddr::V6(_) => None,
        })
        .collect();
    out.extend(mapped);
    out
}

#[test]
fn everything_hermes_refuses_fleetgate_refuses_and_the_stricter_classes_are_listed() {
    let Some(venv) = venv() else { return };
    let work = tempfile::tempdir().expect("work dir must be created");
    let addrs = address_corpus(&mut Rng(0x0a11_0c0d_e5ad_d400));
    let urls: Vec<String> = addrs
        .iter()
        .map(|a| match a {
            IpAddr::V4(v4) => format!("http://{v4}/"),
            IpAddr::V6(v6) => format!("http://[{v6}]/"),
        })
        .collect();
    let request = json!({"policy_cases": [], "ip_urls": urls});
    let answers = run_hermes(&venv, work.path(), &request);
    let hermes_safe = answers["ip"].as_array().expect("one answer per address");
    let policy = AddrPolicy::default();
    let mut stricter = BTreeSet::new();
    let mut both_allow = 0;
    for (addr, safe) in addrs.iter().zip(hermes_safe) {
        let hermes_allows = safe.as_bool().expect("a boolean answer");
        let fleetgate_allows = policy.check(*addr).is_ok();
        assert!(
            hermes_allows || !fleetgate_allows,
            "{addr}: Hermes refuses it, so fleetgate must"
        );
        if hermes_allows && !fleetgate_allows {
            stricter.insert(classify_addr(*addr).code());
        }
        both_allow += usize::from(hermes_allows && fleetgate_allows);
    }
    println!(
        "addresses: {} checked, {both_allow} allowed by both, stricter classes {stricter:?}",
        addrs.len()
    );
    let listed: BTreeSet<&str> = STRICTER_THAN_HERMES.iter().copied().collect();
    assert_eq!(
        stricter, listed,
        "the stricter-than-Hermes list must be exact"
    );
    assert!(
        both_allow > 200,
        "the corpus must include public addresses both allow"
    );
}
