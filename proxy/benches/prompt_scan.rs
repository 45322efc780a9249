//! The LLM route's prompt scan ([`fleetgate_proxy::llm::prompt_secrets`]) on request bodies
//! of 1 MB: prose with the words the rules key on ("api key", "token", "secret",
//! "password"), source code, a tool result of JSON with escapes, and the same body with one
//! secret in it (refuse and redact). Prints one JSON line: median and p99 per body.
//!
//! Run: `cargo bench -p fleetgate-proxy --bench prompt_scan`.
// A bench reports on stdout.
#![allow(clippy::print_stdout)]

use std::hint::black_box;

use fleetgate_proxy::llm::prompt_secrets::{Finding, scan};
use fleetgate_proxy::policy::SecretsPolicy;
use serde_json::json;
use tokio::time::Instant;

const BODY_BYTES: usize = 1_000_000;
const ITERS: usize = 40;

const PROSE: &str = "Rotate the api key every 90 days and keep the token out of logs. The secret \
    manager holds the password for the database; the service account's credentials live in a \
    vault, and the auth header carries a bearer token only over TLS. ";
const CODE: &str = "fn connect(cfg: &Config) -> Result<Client> {\n    let key = cfg.api_key.as_deref().ok_or(Error::MissingKey)?;\n    let token = exchange(key, &cfg.auth_url)?; // short-lived\n    Client::new(&cfg.base_url).bearer(token)\n}\n";
const TOOL: &str = "{\"path\":\"src/config.rs\",\"size\":2048,\"lines\":[\"let password = env::var(\\\"DB_PASSWORD\\\")?;\",\"let url = \\\"https://example.com/api\\\";\"],\"note\":\"caf\\u00e9 \\u2014 ok\"}";

fn body(with_secret: bool) -> String {
    let mut text = String::new();
    let mut i = 0;
    while text.len() < BODY_BYTES / 3 {
        text.push_str(match i % 3 {
            0 => PROSE,
            1 => CODE,
            _ => "Notes from the review: keep functions short, name errors for what failed. ",
        });
        i += 1;
    }
    let mut tool = String::new();
    while tool.len() < BODY_BYTES / 3 {
        tool.push_str(TOOL);
        tool.push('\n');
    }
    let user = if with_secret {
        format!("{text} deploy with ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c now")
    } else {
        text.clone()
    };
    json!({
        "model": "gpt-5",
        "messages": [
            {"role": "system", "content": text},
            {"role": "user", "content": user},
            {"role": "tool", "tool_call_id": "c1", "content": tool},
        ]
    })
    .to_string()
}

fn timed(body: &str, policy: &SecretsPolicy) -> (u128, u128, &'static str) {
    let mut samples = Vec::with_capacity(ITERS);
    let mut what = "clean";
    for _ in 0..ITERS {
        let t = Instant::now();
        let found = scan(black_box(body), policy);
        samples.push(t.elapsed().as_micros());
        what = match found {
            Finding::Clean => "clean",
            Finding::Secrets {
                redacted: Some(_), ..
            } => "secret_redactable",
            Finding::Secrets { .. } => "secret",
        };
    }
    samples.sort_unstable();
    (samples[ITERS / 2], samples[ITERS * 99 / 100], what)
}

fn component(name: &str, body: &str, f: impl Fn(&str) -> bool) -> (String, u128) {
    let mut samples: Vec<u128> = (0..ITERS)
        .map(|_| {
            let t = Instant::now();
            black_box(f(black_box(body)));
            t.elapsed().as_micros()
        })
        .collect();
    samples.sort_unstable();
    (name.to_string(), samples[ITERS / 2])
}

fn main() {
    let policy = SecretsPolicy::default();
    let clean = body(false);
    let dirty = body(true);
    let (c50, c99, cw) = timed(&clean, &policy);
    let (d50, d99, dw) = timed(&dirty, &policy);
    let parts: serde_json::Map<String, serde_json::Value> = [
        component("hermes_prefixes", &clean, |t| {
            fleetgate_proxy::judge::gates::secret_url::find_credential_prefix(t).is_some()
        }),
        component("builtin_rules", &clean, |t| {
            fleetgate_proxy::judge::gates::secret_url::rules::RuleSet::builtin()
                .find(t)
                .is_some()
        }),
        component("jwt", &clean, |t| {
            fleetgate_proxy::judge::gates::secret_url::rules::find_jwt(t).is_some()
        }),
        // The three above as the scan runs them: Hermes' prefixes and the built-in rules'
        // keywords in one pass, then JWTs.
        component("e1_text", &clean, |t| {
            fleetgate_proxy::judge::gates::secret_url::find_in_text(t, None).is_some()
        }),
    ]
    .into_iter()
    .map(|(k, v)| (k, json!(v)))
    .collect();
    println!(
        "{}",
        json!({
            "body_bytes": clean.len(),
            "clean": {"median_us": c50, "p99_us": c99, "found": cw},
            "one_secret": {"median_us": d50, "p99_us": d99, "found": dw},
            "clean_parts_median_us": parts,
        })
    );
}
