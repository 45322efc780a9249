//! Hermes Agent 0.20.1's cron `monitor_url`, fetched by its own code (`cron.monitor.
//! check_monitor`, plain urllib: no SSRF, secret-URL or blocklist check of Hermes' own) with
//! the forward proxy in its environment as the injected sidecar sets it: gated like any other
//! fetch. The metadata address and a blocklisted host are refused (the origin never sees
//! them), an allowed host is served over HTTP and HTTPS, and an unchanged page suppresses the
//! next run as Hermes designed.

use std::path::Path;

use fleetgate_e2e::venv::{self, Hermes};
use serde_json::Value;

use super::LOG_WAIT;
use super::support::Fixture;

/// One `check_monitor` run per URL in a fresh Hermes home, the proxy env as injected.
async fn monitor(f: &Fixture, python: &Path, urls: &[String]) -> Vec<Value> {
    let home = tempfile::tempdir().expect("a temp dir must be created");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/hermes_cron_monitor.py");
    let proxy = format!("http://{}", f.proxy);
    let mut args: Vec<&str> = vec![home.path().to_str().expect("a UTF-8 path")];
    args.extend(urls.iter().map(String::as_str));
    // What the webhook injects into the agent container (controller/src/webhook/sidecar.rs).
    let env = [
        ("HTTP_PROXY", proxy.as_str()),
        ("HTTPS_PROXY", proxy.as_str()),
        ("http_proxy", proxy.as_str()),
        ("https_proxy", proxy.as_str()),
        ("NO_PROXY", "127.0.0.1,localhost,::1"),
        ("no_proxy", "127.0.0.1,localhost,::1"),
        (
            "SSL_CERT_FILE",
            f.tls.ca_path.to_str().expect("a UTF-8 path"),
        ),
        ("HOME", home.path().to_str().expect("a UTF-8 path")),
    ];
    let out = venv::run_python(
        python,
        &std::fs::read_to_string(script).expect("the driver must read"),
        &args,
        &env,
    )
    .await
    .expect("python must run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(
        rows.len(),
        urls.len(),
        "one row per URL:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    rows
}

#[tokio::test]
async fn hermes_0_20_1_cron_monitor_url_is_gated_by_the_forward_proxy() {
    let Some(python) = Hermes::V0_20_1.python() else {
        return;
    };
    let f = super::fixture().await;
    let urls = [
        f.http_url("allowed.test", "/"),
        f.https_url("secure.test", "/"),
        f.http_url("metadata.test", "/latest/meta-data/"),
        format!(
            "http://169.254.169.254:{}/latest/meta-data/iam/",
            f.origin.addr().port()
        ),
        f.https_url("metadata.test", "/latest/meta-data/"),
        f.http_url("blocked.test", "/"),
    ];
    let rows = monitor(&f, &python, &urls).await;
    for row in &rows[..2] {
        assert_eq!(row["ok"], true, "an allowed host is served: {row}");
        assert_eq!(row["first_run"], true, "{row}");
        assert!(
            row["context"]
                .as_str()
                .is_some_and(|c| c.contains("hello from the origin")),
            "the page reaches the agent's prompt: {row}"
        );
        assert_eq!(
            (&row["second"]["ok"], &row["second"]["changed"]),
            (&Value::Bool(true), &Value::Bool(false)),
            "the same page again suppresses the run: {row}"
        );
    }
    for row in &rows[2..] {
        let error = row["error"].as_str().unwrap_or_default();
        assert!(
            row["ok"] == false
                && error.contains("monitor_url fetch failed")
                && error.contains("403"),
            "a refused fetch is a monitor source failure, never a change: {row}"
        );
    }
    // Each refusal is the gate's, with its code on the decision line: one per check_monitor
    // run, two per URL.
    let deadline = tokio::time::Instant::now() + LOG_WAIT;
    let denials = loop {
        let denials: Vec<(String, String, String)> = f
            .gate
            .json_logs()
            .into_iter()
            .filter(|l| l["target"] == "egress.decision" && l["verdict"] == "deny")
            .map(|l| {
                let url = l["url"].as_str().unwrap_or_default();
                let host = url
                    .trim_start_matches("http://")
                    .split([':', '/'])
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let field = |k: &str| l[k].as_str().unwrap_or_default().to_string();
                (field("proxy_type"), host, field("reason"))
            })
            .collect();
        if denials.len() >= 8 || tokio::time::Instant::now() > deadline {
            break denials;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let twice = |proxy_type: &str, host: &str, reason: &str| {
        let row = (proxy_type.to_string(), host.to_string(), reason.to_string());
        [row.clone(), row]
    };
    let want: Vec<(String, String, String)> = [
        twice("http", "metadata.test", "ip_cloud_metadata"),
        twice("http", "169.254.169.254", "ip_cloud_metadata"),
        twice("connect", "metadata.test", "ip_cloud_metadata"),
        twice("http", "blocked.test", "blocked_by_policy"),
    ]
    .concat();
    assert_eq!(
        denials, want,
        "every refused monitor fetch is the gate's, with its code"
    );
    let paths: Vec<String> = f
        .origin
        .requests()
        .into_iter()
        .map(|r| r.uri.to_string())
        .collect();
    assert_eq!(
        paths,
        ["/", "/", "/", "/"],
        "only the allowed fetches reach the origin (twice each, over HTTP and HTTPS)"
    );
    assert_eq!(
        f.tls.server_names(),
        [
            Some("secure.test".to_string()),
            Some("secure.test".to_string())
        ],
        "the HTTPS monitor went through a tunnel the gate allowed, twice"
    );
}
