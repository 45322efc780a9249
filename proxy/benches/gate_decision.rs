//! Gate decision per URL (E1 + E2 on IP literals + E4), side by side with Hermes' own Python
//! functions on the same corpus in the same run. `cargo bench -p fleetgate-proxy --bench
//! gate_decision`; the Python side runs when `FLEETGATE_VENV` points at the test venv.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use fleetgate_proxy::base::target_url::TargetUrl;
use fleetgate_proxy::judge::gates::secret_url::{
    SecretUrlGate, secret_in_url_forms, sensitive_fragment_param_name, sensitive_query_param_name,
};
use fleetgate_proxy::judge::gates::ssrf::{Precheck, precheck_url};
use fleetgate_proxy::judge::gates::website_blocklist::{Blocklist, WebsiteBlocklistGate};
use fleetgate_proxy::judge::gates::{Gate, Verdict};
use fleetgate_proxy::policy::{EgressPolicy, Policy};
use tokio::time::Instant;

const RULES: usize = 200;
const ITERATIONS_RUST: usize = 200;
/// Rounds over the corpus on the Python side (the best one is its figure, as on the Rust side).
const ITERATIONS_PY: usize = 5;

/// A deterministic corpus: public and private literals, secrets, query names, blocklisted IPs.
fn corpus() -> Vec<String> {
    let mut urls = Vec::new();
    for n in 0..400u32 {
        let a = 1 + n % 200;
        let b = n % 250;
        urls.push(match n % 10 {
            0 => format!("https://93.184.{b}.{a}/articles/{n}/index.html?q=rust+proxy&page={n}"),
            1 => format!("http://10.{b}.0.{a}/internal/{n}"),
            2 => format!("https://8.8.{b}.{a}/search?q=sk-abcdefghij{n}klmnop"),
            3 => format!("https://1.1.{b}.{a}/login?token=abc{n}&next=/home"),
            4 => "http://169.254.169.254/latest/meta-data/".to_string(),
            5 => format!("http://[2606:4700:4700::{a:x}]/dns-query?name=example{n}"),
            6 => format!("http://127.0.0.1:{}/admin", 8000 + n),
            7 => format!("https://203.0.{b}.{a}/doc"),
            8 => format!(
                "https://9.9.9.{a}/very/long/path/{}/end",
                "segment/".repeat(8)
            ),
            _ => format!("https://185.199.{b}.{a}/a%20b/%C3%A9?x=1#frag{n}"),
        });
    }
    urls
}

fn rules() -> Vec<String> {
    let mut rules: Vec<String> = (0..RULES - 3)
        .map(|i| format!("ads{i}.tracker{}.example", i % 17))
        .collect();
    rules.push("9.9.9.9".into());
    rules.push("*.doubleclick.example".into());
    rules.push("185.199.1.2".into());
    rules
}

/// Which E1 the decision runs: the full rule set, or Hermes' 56 prefixes and 20 names only
/// (E1 as it was before the rule set, kept for the same-run before/after ratio).
#[derive(Clone, Copy)]
enum E1 {
    Rules,
    HermesOnly,
}

fn hermes_only_refuses(target: &TargetUrl) -> bool {
    secret_in_url_forms(&target.raw, &target.normalized)
        || sensitive_query_param_name(&target.normalized).is_some()
        || target.has_userinfo()
        || sensitive_fragment_param_name(&target.normalized).is_some()
}

fn decide(raw: &str, egress: &EgressPolicy, list: &Blocklist) -> bool {
    decide_with(E1::Rules, raw, egress, list)
}

fn decide_with(e1: E1, raw: &str, egress: &EgressPolicy, list: &Blocklist) -> bool {
    let target = TargetUrl::new(raw);
    let refused = match e1 {
        E1::Rules => matches!(SecretUrlGate::default().check(&target), Verdict::Deny(_)),
        E1::HermesOnly => hermes_only_refuses(&target),
    };
    if refused {
        return false;
    }
    match precheck_url(&target, egress) {
        Ok(Precheck::Literal(_)) => {}
        _ => return false,
    }
    !matches!(
        WebsiteBlocklistGate { list }.check(&target),
        Verdict::Deny(_)
    )
}

fn main() {
    let corpus = corpus();
    let rules = rules();
    let policy = Policy::parse(b"version: v1\n", Path::new(".")).expect("policy");
    let (list, _) = Blocklist::load(true, &rules, &[], Path::new("."));
    let denied = corpus
        .iter()
        .filter(|u| !decide(u, &policy.egress, &list))
        .count();

    let time = |e1: E1| {
        let mut best = f64::INFINITY;
        let mut sink = 0usize;
        // Best of five rounds: a noisy 2-core machine's preemptions stay out of the figure.
        for _ in 0..5 {
            let start = Instant::now();
            for _ in 0..ITERATIONS_RUST / 5 {
                for u in &corpus {
                    sink += decide_with(e1, u, &policy.egress, &list) as usize;
                }
            }
            let ns =
                start.elapsed().as_nanos() as f64 / (ITERATIONS_RUST / 5 * corpus.len()) as f64;
            best = best.min(ns);
        }
        (best, sink)
    };
    let (before_ns, _) = time(E1::HermesOnly);
    let (rust_ns, sink) = time(E1::Rules);
    let secret_rules = fleetgate_proxy::judge::gates::secret_url::rules::RuleSet::builtin().len();
    println!(
        "gate decision (E1 + E2 literal + E4, {RULES} blocklist rules), {} URLs",
        corpus.len()
    );
    println!(
        "  fleetgate (Rust)      {rust_ns:>10.0} ns/URL   denied {denied}  (sink {sink}; E1 with Hermes' 56 prefixes + {secret_rules} rules + JWT)"
    );
    println!(
        "  fleetgate, E1 as Hermes' 56 prefixes only {before_ns:>6.0} ns/URL   (after/before {:.2}x)",
        rust_ns / before_ns
    );

    components(&corpus, &policy.egress, &list);

    let Some(venv) = std::env::var_os("FLEETGATE_VENV") else {
        println!(
            "  Hermes (Python)       skipped: FLEETGATE_VENV not set (tests/run bench sets it)"
        );
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus_file = dir.path().join("corpus.txt");
    let rules_file = dir.path().join("rules.txt");
    std::fs::write(&corpus_file, corpus.join("\n")).expect("write corpus");
    std::fs::write(&rules_file, rules.join("\n")).expect("write rules");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/bench/gate_decision.py");
    let out = Command::new(Path::new(&venv).join("bin/python"))
        .arg(&script)
        .arg(&corpus_file)
        .arg(&rules_file)
        .arg(ITERATIONS_PY.to_string())
        .env("HERMES_HOME", dir.path().join("hermes"))
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("python json");
    let py_ns = v["per_url_ns"].as_f64().expect("per_url_ns");
    println!(
        "  Hermes 0.19.0 (Python) {py_ns:>9.0} ns/URL   denied {}  (best of {ITERATIONS_PY} rounds; mean {:.0})",
        v["denied"],
        v["mean_per_url_ns"].as_f64().unwrap_or(f64::NAN)
    );
    println!(
        "  ratio                 {:>10.1}x faster per URL",
        py_ns / rust_ns
    );
}

/// Where one decision's time goes, each part timed alone over the corpus.
fn components(corpus: &[String], egress: &EgressPolicy, list: &Blocklist) {
    use fleetgate_proxy::judge::gates::secret_url as su;
    const ROUNDS: usize = 40;
    let targets: Vec<TargetUrl> = corpus.iter().map(|u| TargetUrl::new(u)).collect();
    let per_url =
        |start: Instant| start.elapsed().as_nanos() as f64 / (ROUNDS * corpus.len()) as f64;
    let mut rows: Vec<(&str, f64)> = Vec::new();
    let start = Instant::now();
    for _ in 0..ROUNDS {
        for u in corpus {
            std::hint::black_box(TargetUrl::new(u));
        }
    }
    rows.push(("TargetUrl::new (form + WHATWG facts)", per_url(start)));
    let mut time = |name: &'static str, f: &dyn Fn(&TargetUrl)| {
        let start = Instant::now();
        for _ in 0..ROUNDS {
            for t in &targets {
                f(std::hint::black_box(t));
            }
        }
        rows.push((name, per_url(start)));
    };
    time("E1 with the rule set", &|t| {
        std::hint::black_box(SecretUrlGate::default().check(t));
    });
    time("  of which: secret rules", &|t| {
        std::hint::black_box(su::find_secret(t, None));
    });
    time("  of which: names in any spelling", &|t| {
        std::hint::black_box(su::sensitive_param_any_spelling(&t.normalized));
    });
    time("E1 as Hermes' 56 prefixes only", &|t| {
        std::hint::black_box(hermes_only_refuses(t));
    });
    time("E2 literal precheck", &|t| {
        std::hint::black_box(precheck_url(t, egress).is_ok());
    });
    time("E4 blocklist", &|t| {
        std::hint::black_box(WebsiteBlocklistGate { list }.check(t));
    });
    println!("components (each alone, ns/URL):");
    for (name, ns) in rows {
        println!("  {name:<36} {ns:>8.0}");
    }
}
