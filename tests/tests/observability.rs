//! Alerts and dashboards, checked with real tools: the plain rules file is the chart's
//! PrometheusRule rendered, `promtool check rules` and `promtool test rules` pass on it with a
//! firing and a quiet case for every alert, each alert's runbook exists; the dashboards are the
//! output of `tests/dashboards/build.py` (Grafana's dashboards-as-code SDK) and have the shape
//! Grafana reads; the chart ships rules, the gates' PodMonitor and the dashboards only when
//! asked; and a real Prometheus scraping a real gate (and the controller's metrics on its real
//! admin listener) answers every panel query with data and evaluates every alert expression.
//!
//! Tools: promtool and prometheus from Debian, helm from `tests/run k8s-tools`, the SDK in the
//! venv `tests/run` makes (`FLEETGATE_DASHBOARDS_VENV`). `FLEETGATE_REQUIRE_PROMETHEUS=1` (set
//! by `tests/run`) turns a missing tool into a failure. `FLEETGATE_BLESS=1` rewrites the
//! generated files (deploy/prometheus/fleetgate-alerts.yaml, the dashboard JSON).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

#[path = "chart/tools.rs"]
#[allow(dead_code)]
mod tools;

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use fleetgate_e2e::dns::StubDns;
use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::http;
use fleetgate_e2e::llm_stub::{StubKind, StubOptions, StubProvider};
use fleetgate_e2e::origin::{self, Reply};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const RULES: &str = "deploy/prometheus/fleetgate-alerts.yaml";
const RULE_TESTS: &str = "tests/prometheus/alerts.test.yaml";
const DASHBOARDS: [&str; 4] = [
    "egress.json",
    "fleet-cost.json",
    "llm.json",
    "controller.json",
];
const RULES_HEADER: &str =
    "# fleetgate's alerts as a plain Prometheus rules file, for a Prometheus without the operator:
# the chart's PrometheusRule (prometheusRule.enabled) rendered with its defaults for a release
# named fleetgate (gate job `.*fleetgate-gates`, controller job `.*fleetgate-controller`).
# Generated; regenerate with: FLEETGATE_BLESS=1 cargo test -p fleetgate-e2e --test observability
# Runbook: docs/runbook.md. Unit tests: tests/prometheus/alerts.test.yaml (promtool test rules).
";

fn workspace() -> PathBuf {
    tools::workspace()
}

fn bless() -> bool {
    std::env::var_os("FLEETGATE_BLESS").is_some_and(|v| v == "1")
}

/// A Debian Prometheus tool (`promtool`, `prometheus`), or `None` after a skip line.
fn prometheus_tool(name: &str) -> Option<PathBuf> {
    let found = ["/usr/bin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("FLEETGATE_REQUIRE_PROMETHEUS").is_none(),
            "FLEETGATE_REQUIRE_PROMETHEUS is set but {name} is not installed"
        );
        println!("skipped: {name} is not installed (run tests/run)");
    }
    found
}

/// The rules file: every rule as (alert name, expression, annotations).
fn rules() -> Vec<(String, String, Value)> {
    let text = std::fs::read_to_string(workspace().join(RULES)).expect("the rules file");
    let doc: Value = serde_yaml::from_str(&text).expect("the rules file is YAML");
    doc["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .map(|r| {
            (
                r["alert"].as_str().unwrap_or_default().to_string(),
                r["expr"].as_str().unwrap_or_default().to_string(),
                r["annotations"].clone(),
            )
        })
        .collect()
}

#[test]
fn the_plain_rules_file_is_the_chart_rendered_and_passes_promtool() {
    let Some(k8s) = tools::tools() else { return };
    let rendered = tools::render(
        &k8s.helm,
        "fleetgate",
        "fleetgate",
        &tools::args(&[
            "--set",
            "prometheusRule.enabled=true",
            "--show-only",
            "templates/prometheusrule.yaml",
        ]),
    );
    // The plain file is the PrometheusRule's spec, as rendered.
    let lines: Vec<&str> = rendered.lines().collect();
    let at = lines.iter().position(|l| *l == "spec:").expect("a spec");
    let body: Vec<&str> = lines[at + 1..]
        .iter()
        .map(|l| l.strip_prefix("  ").unwrap_or(l))
        .collect();
    let want = format!("{RULES_HEADER}{}\n", body.join("\n"));
    let path = workspace().join(RULES);
    if bless() {
        std::fs::write(&path, &want).expect("the rules file must be writable");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == want,
        "{RULES} drifted from the chart; regenerate it with:\n  FLEETGATE_BLESS=1 cargo test -p fleetgate-e2e --test observability"
    );
    let Some(promtool) = prometheus_tool("promtool") else {
        return;
    };
    let check = Command::new(&promtool)
        .args(["check", "rules"])
        .arg(&path)
        .output()
        .expect("promtool runs");
    assert!(
        check.status.success(),
        "promtool check rules: {}",
        tools::text(&check)
    );
    let test = Command::new(&promtool)
        .args(["test", "rules", RULE_TESTS])
        .current_dir(workspace())
        .output()
        .expect("promtool runs");
    assert!(
        test.status.success(),
        "promtool test rules: {}",
        tools::text(&test)
    );

    // Every alert is tested firing and quiet, and documented.
    let tests: Value = serde_yaml::from_str(
        &std::fs::read_to_string(workspace().join(RULE_TESTS)).expect("the rule tests"),
    )
    .expect("YAML");
    let cases: Vec<&Value> = tests["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().into_iter().flatten())
        .collect();
    let runbook = std::fs::read_to_string(workspace().join("docs/runbook.md")).expect("runbook");
    for (alert, _, annotations) in rules() {
        let of = |firing: bool| {
            cases.iter().any(|c| {
                c["alertname"] == alert.as_str()
                    && c["exp_alerts"]
                        .as_array()
                        .is_some_and(|a| a.is_empty() != firing)
            })
        };
        assert!(of(true), "{alert} needs a promtool case where it fires");
        assert!(
            of(false),
            "{alert} needs a promtool case where it stays quiet"
        );
        for key in ["summary", "description", "runbook_url"] {
            assert!(
                annotations[key].as_str().is_some_and(|s| !s.is_empty()),
                "{alert} needs a {key} annotation"
            );
        }
        let anchor = alert.to_ascii_lowercase();
        assert!(
            annotations["runbook_url"]
                .as_str()
                .is_some_and(|u| u.ends_with(&format!("docs/runbook.md#{anchor}"))),
            "{alert}'s runbook_url must point at its runbook section"
        );
        assert!(
            runbook.contains(&format!("\n## {alert}\n")),
            "docs/runbook.md needs a section `## {alert}`"
        );
    }
}

#[test]
fn the_chart_ships_rules_the_gate_monitor_and_dashboards_only_when_enabled() {
    let Some(k8s) = tools::tools() else { return };
    let kinds = |yaml: &str| -> Vec<(String, String)> {
        tools::documents(yaml)
            .iter()
            .map(|d| {
                (
                    d["kind"].as_str().unwrap_or("").to_string(),
                    d["metadata"]["name"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    let defaults = tools::render(&k8s.helm, "fleetgate", "agents", &[]);
    for (kind, name) in kinds(&defaults) {
        assert!(
            kind != "PrometheusRule" && kind != "PodMonitor" && name != "fleetgate-dashboards",
            "{kind} {name} must not render by default"
        );
    }
    let on = tools::args(&[
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "podMonitor.enabled=true",
        "--set",
        "dashboards.enabled=true",
    ]);
    let all = tools::render(&k8s.helm, "fleetgate", "agents", &on);
    let docs = tools::documents(&all);
    let rule = tools::find(&docs, "PrometheusRule", Some("fleetgate-alerts"));
    assert_eq!(rule["metadata"]["namespace"], "agents");
    let monitor = tools::find(&docs, "PodMonitor", Some("fleetgate-gates"));
    assert_eq!(
        monitor["spec"]["selector"]["matchLabels"]["fleetgate.dev/inject"], "enabled",
        "the PodMonitor scrapes injected pods"
    );
    assert_eq!(
        monitor["spec"]["podMetricsEndpoints"][0]["port"],
        "fg-admin"
    );
    let boards = tools::find(&docs, "ConfigMap", Some("fleetgate-dashboards"));
    assert_eq!(
        boards["metadata"]["labels"]["grafana_dashboard"], "1",
        "the Grafana sidecar's label"
    );
    for name in DASHBOARDS {
        let shipped = boards["data"][format!("fleetgate-{name}")]
            .as_str()
            .unwrap_or_else(|| panic!("the ConfigMap carries {name}"));
        let deploy = std::fs::read_to_string(workspace().join("deploy/dashboards").join(name))
            .expect("the deploy copy");
        assert_eq!(
            shipped.trim_end(),
            deploy.trim_end(),
            "{name} in the chart and in deploy/ must be the same"
        );
    }
    for version in tools::KUBE_VERSIONS {
        let out = tools::validate(&k8s, &all, version);
        assert!(
            out.status.success(),
            "the render with every observability object on must validate on {version}: {}",
            tools::text(&out)
        );
    }
}

#[test]
fn the_committed_dashboards_are_the_builders_output() {
    let Some(venv) = std::env::var_os("FLEETGATE_DASHBOARDS_VENV").map(PathBuf::from) else {
        assert!(
            std::env::var_os("FLEETGATE_REQUIRE_PROMETHEUS").is_none(),
            "FLEETGATE_DASHBOARDS_VENV must be set by tests/run"
        );
        println!("skipped: FLEETGATE_DASHBOARDS_VENV is not set (run tests/run)");
        return;
    };
    let out = tempfile::tempdir().expect("tempdir");
    let built = Command::new(venv.join("bin/python"))
        .arg(workspace().join("tests/dashboards/build.py"))
        .arg(out.path())
        .output()
        .expect("the builder runs");
    assert!(built.status.success(), "build.py: {}", tools::text(&built));
    for name in DASHBOARDS {
        let want = std::fs::read_to_string(out.path().join(name)).expect("built");
        for dir in ["charts/fleetgate/dashboards", "deploy/dashboards"] {
            let path = workspace().join(dir).join(name);
            if bless() {
                std::fs::write(&path, &want).expect("writable");
            }
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                committed == want,
                "{dir}/{name} is not build.py's output; regenerate with:\n  FLEETGATE_BLESS=1 cargo test -p fleetgate-e2e --test observability"
            );
        }
    }
}

/// The committed dashboards, parsed.
fn dashboards() -> Vec<(String, Value)> {
    DASHBOARDS
        .iter()
        .map(|name| {
            let text = std::fs::read_to_string(workspace().join("deploy/dashboards").join(name))
                .expect("a dashboard");
            (name.to_string(), serde_json::from_str(&text).expect("JSON"))
        })
        .collect()
}

#[test]
fn every_dashboard_has_the_shape_grafana_reads() {
    let mut uids = BTreeSet::new();
    for (name, d) in dashboards() {
        let uid = d["uid"].as_str().unwrap_or("");
        assert!(
            uid.starts_with("fleetgate-") && uid.len() <= 40,
            "{name}: uid {uid}"
        );
        assert!(uids.insert(uid.to_string()), "{name}: uid {uid} is taken");
        assert!(
            d["title"]
                .as_str()
                .is_some_and(|t| t.starts_with("fleetgate / "))
        );
        assert!(
            d["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
            "{name}: schemaVersion"
        );
        let vars = d["templating"]["list"].as_array().expect("templating");
        let names: Vec<&str> = vars.iter().filter_map(|v| v["name"].as_str()).collect();
        assert_eq!(names, ["datasource", "namespace"], "{name}: variables");
        assert_eq!(vars[0]["type"], "datasource");
        assert_eq!(vars[0]["query"], "prometheus");
        let panels = d["panels"].as_array().expect("panels");
        assert!(panels.len() >= 6, "{name}: a dashboard worth opening");
        let mut titles = BTreeSet::new();
        for p in panels {
            let title = p["title"].as_str().unwrap_or("");
            assert!(
                !title.is_empty() && titles.insert(title),
                "{name}: panel titles are unique"
            );
            assert!(
                ["timeseries", "stat", "table"].contains(&p["type"].as_str().unwrap_or("")),
                "{name}/{title}: a known panel type"
            );
            assert_eq!(p["datasource"]["uid"], "${datasource}", "{name}/{title}");
            assert!(
                p["description"].as_str().is_some_and(|s| !s.is_empty()),
                "{name}/{title}"
            );
            let g = &p["gridPos"];
            assert!(
                g["w"].as_u64().is_some_and(|w| (1..=24).contains(&w)),
                "{name}/{title}: w"
            );
            assert!(g["h"].as_u64().is_some_and(|h| h > 0), "{name}/{title}: h");
            let targets = p["targets"].as_array().expect("targets");
            assert!(!targets.is_empty(), "{name}/{title}: a query");
            let refs: BTreeSet<&str> = targets.iter().filter_map(|t| t["refId"].as_str()).collect();
            assert_eq!(refs.len(), targets.len(), "{name}/{title}: refIds unique");
            for t in targets {
                let expr = t["expr"].as_str().unwrap_or("");
                assert!(expr.contains("fleetgate_"), "{name}/{title}: {expr}");
                assert!(
                    expr.contains("$namespace"),
                    "{name}/{title}: filters by namespace"
                );
            }
        }
    }
}

/// Grafana's variables filled as a user would see them: every namespace, 30 s rates, 10 min.
fn as_grafana_sends(expr: &str) -> String {
    expr.replace("$namespace", ".*")
        .replace("$__rate_interval", "30s")
        .replace("$__range", "10m")
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One instant query through Prometheus' HTTP API: (status, number of series).
async fn query(prom: SocketAddr, q: &str) -> (String, usize, String) {
    let reply = http::get(prom, &format!("/api/v1/query?query={}", encode(q)))
        .await
        .expect("prometheus answers");
    let body = reply.json().unwrap_or(Value::Null);
    let n = body["data"]["result"].as_array().map_or(0, Vec::len);
    let status = body["status"].as_str().unwrap_or("").to_string();
    (status, n, body["error"].as_str().unwrap_or("").to_string())
}

/// A Hermes home with one cron job and one silent run in `state.db` (written with Python's
/// sqlite3, as Hermes writes it).
fn hermes_home(root: &Path) {
    std::fs::create_dir_all(root.join("cron")).unwrap();
    std::fs::write(
        root.join("cron/jobs.json"),
        json!({"jobs": [{"id": "a1b2c3", "name": "inbox check", "enabled": true,
                         "schedule_display": "every 15m"}]})
        .to_string(),
    )
    .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let script = format!(
        "import sqlite3, time\n\
         c = sqlite3.connect('{db}')\n\
         c.execute('CREATE TABLE sessions (id TEXT PRIMARY KEY, started_at REAL, actual_cost_usd REAL)')\n\
         c.execute('CREATE TABLE messages (session_id TEXT, role TEXT, content TEXT)')\n\
         t = time.gmtime({at})\n\
         sid = 'cron_a1b2c3_' + time.strftime('%Y%m%d_%H%M%S', t)\n\
         c.execute('INSERT INTO sessions VALUES (?, ?, ?)', (sid, {at}, 0.42))\n\
         c.execute('INSERT INTO messages VALUES (?, ?, ?)', (sid, 'assistant', '[SILENT]'))\n\
         c.commit()\n",
        db = root.join("state.db").display(),
        at = now - 3600,
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "state.db: {}", tools::text(&out));
}

/// The controller's real metrics on its real admin listener, moved as reconciles, the
/// webhook and a fleet scrape move them (no API server can be had here).
async fn controller_metrics() -> SocketAddr {
    use fleetgate_controller::admin::{AdminState, serve};
    use fleetgate_controller::crd::{FleetPolicyStatus, PodCounts};
    use fleetgate_controller::metrics::{Metrics, Write};
    let state = AdminState::default();
    let m = Metrics::register(&state.registry).expect("controller metrics");
    state
        .ready
        .store(true, std::sync::atomic::Ordering::Relaxed);
    m.runs.inc_by(3);
    m.duration.observe(0.012);
    m.duration.observe(0.030);
    m.failures.with_label_values(&["kube_api"]).inc();
    m.wrote(Write::ConfigMap);
    m.wrote(Write::Status);
    m.scrape_failures.with_label_values(&["timeout"]).inc();
    m.webhook_reviews.with_label_values(&["patched"]).inc();
    let status = FleetPolicyStatus {
        pods: Some(PodCounts {
            selected: 3,
            reporting: 2,
            current: 2,
        }),
        total_cost_per_day: Some(4.2),
        flagged: Some(1),
        ..FleetPolicyStatus::default()
    };
    m.observe_fleet("agents", "team-a", &status);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, state));
    // Keep moving the counters so every rate has two samples to work with.
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            m.runs.inc();
            m.duration.observe(0.02);
            m.failures.with_label_values(&["kube_api"]).inc();
            m.wrote(Write::Status);
            m.scrape_failures.with_label_values(&["timeout"]).inc();
            m.webhook_reviews.with_label_values(&["patched"]).inc();
        }
    });
    addr
}

struct Prometheus {
    addr: SocketAddr,
    _child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

async fn start_prometheus(bin: &Path, gate: SocketAddr, controller: SocketAddr) -> Prometheus {
    let dir = tempfile::tempdir().unwrap();
    let port = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
         rule_files: ['{rules}']\n\
         scrape_configs:\n\
         \x20 - job_name: fleetgate-gates\n    static_configs: [{{targets: ['{gate}']}}]\n\
         \x20 - job_name: fleetgate-controller\n    static_configs: [{{targets: ['{controller}']}}]\n",
        rules = workspace().join(RULES).display()
    );
    std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
    let child = tokio::process::Command::new(bin)
        .arg(format!(
            "--config.file={}",
            dir.path().join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("prometheus starts");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    for _ in 0..100 {
        if http::get(addr, "/-/ready")
            .await
            .is_ok_and(|r| r.status == 200)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Prometheus {
        addr,
        _child: child,
        _dir: dir,
    }
}

/// Traffic that moves every gate series a panel reads: allowed and refused extracts (several
/// gates), the cache, the forward proxy and a tunnel, LLM calls through a stub provider with
/// a pin the provider does not honour, and a report scrape.
async fn drive(gate: &GateProcess, origin_port: u16, token: &str) {
    let site = format!("http://site.test:{origin_port}/");
    for urls in [
        json!([site]),
        json!([site]),
        json!(["http://169.254.169.254/latest/meta-data/"]),
        json!([format!("http://blocked.test:{origin_port}/")]),
        json!(["http://10.1.2.3/"]),
        json!([format!(
            "{site}?api_key=sk-abcdefghijklmnopqrstuvwxyz0123456789"
        )]),
    ] {
        let _ = http::post_json(gate.api_addr(), "/v1/extract", &json!({"urls": urls})).await;
    }
    let proxy = gate.listener("forward_proxy").expect("forward proxy");
    for target in [site.clone(), format!("http://blocked.test:{origin_port}/")] {
        let mut c = tokio::net::TcpStream::connect(proxy).await.unwrap();
        let req = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        c.write_all(req.as_bytes()).await.unwrap();
        let mut sink = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut sink)).await;
    }
    let mut tunnel = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let connect = format!("CONNECT site.test:{origin_port} HTTP/1.1\r\nHost: x\r\n\r\n");
    tunnel.write_all(connect.as_bytes()).await.unwrap();
    let mut head = [0u8; 64];
    let _ = tunnel.read(&mut head).await;
    drop(tunnel);
    for body in [
        json!({"model": "stub-model", "stream": true, "messages": []}),
        json!({"model": "stub-model", "reasoning_effort": "low", "messages": []}),
        json!({"model": "gpt-rogue", "messages": []}),
        json!({"model": "stub-model", "messages": [{"role": "user",
            "content": format!("use ghp_{}", "a1B2".repeat(9))}]}),
    ] {
        let req = ::http::Request::post("/llm/main/v1/chat/completions")
            .header("content-type", "application/json")
            .body(Bytes::from(body.to_string()))
            .unwrap();
        let _ = http::send(gate.api_addr(), req).await;
    }
    let req = ::http::Request::get("/v1/report")
        .header("authorization", format!("Bearer {token}"))
        .body(Bytes::new())
        .unwrap();
    let report = http::send(gate.admin_addr(), req).await.expect("report");
    assert_eq!(report.status, 200, "{}", report.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_answers_every_panel_query_and_alert_expression() {
    let (Some(prometheus), Some(promtool)) =
        (prometheus_tool("prometheus"), prometheus_tool("promtool"))
    else {
        return;
    };
    let dns = StubDns::builder()
        .answer("site.test", [IpAddr::from([127, 0, 0, 1])])
        .answer("blocked.test", [IpAddr::from([127, 0, 0, 1])])
        .start()
        .await
        .expect("dns");
    let origin = origin::http1()
        .route(
            "/",
            Reply::html("<html><head><title>Site</title></head><body><p>Words.</p></body></html>"),
        )
        .run()
        .await
        .expect("origin");
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub provider");
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hermes");
    hermes_home(&home);
    let token = "observability-token";
    std::fs::write(dir.path().join("token"), token).unwrap();
    std::fs::write(dir.path().join("key"), "sk-gate-key-0123456789").unwrap();
    let policy = format!(
        "version: v1\n\
         listen: {{api: '127.0.0.1:0', admin: '127.0.0.1:0', forwardProxy: '127.0.0.1:0'}}\n\
         store: {{root: '${{WORK_DIR}}/volume'}}\n\
         egress:\n  allowCIDRs: ['127.0.0.1/32']\n  ports: [80, {op}, {sp}]\n  resolver: {{nameservers: ['{dns}'], timeoutMs: 1000, attempts: 1}}\n\
         websiteBlocklist: {{domains: [blocked.test]}}\n\
         report: {{hermesHome: '{home}', tokenFile: '{tok}'}}\n\
         llm:\n  providers:\n    oai: {{kind: openai, baseUrl: '{stub}', keyFile: '{key}'}}\n\
         \x20 roles: {{main: oai}}\n  allowedModels: [stub-model]\n\
         \x20 pins: {{main: {{effort: high, serviceTier: flex}}}}\n\
         \x20 prices: {{models: {{stub-model: {{input: 1, output: 2}}}}}}\n\
         \x20 budgets: {{pod: {{main: {{dailyUsd: 100}}}}}}\n",
        op = origin.addr().port(),
        sp = stub.addr().port(),
        dns = dns.addr(),
        home = home.display(),
        tok = dir.path().join("token").display(),
        stub = stub.base_url(),
        key = dir.path().join("key").display(),
    );
    let gate = GateProcess::spawn(&policy).await.expect("the gate starts");
    let controller = controller_metrics().await;
    let prom = start_prometheus(&prometheus, gate.admin_addr(), controller).await;
    drive(&gate, origin.addr().port(), token).await;

    // The gate's and the controller's /metrics pass promtool's lint (names, HELP, units).
    for (who, addr) in [("gate", gate.admin_addr()), ("controller", controller)] {
        let text = http::get(addr, "/metrics").await.expect("metrics").text();
        let mut lint = std::process::Command::new(&promtool)
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("promtool");
        use std::io::Write as _;
        lint.stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = lint.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool check metrics on the {who}'s /metrics: {}",
            tools::text(&out)
        );
    }

    // Labels stay bounded: no host, address, URL or token the traffic carried became a label
    // value (label values come from the code's vocabularies only).
    let text = http::get(gate.admin_addr(), "/metrics")
        .await
        .expect("metrics")
        .text();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let labels = line
            .split_once('{')
            .and_then(|(_, r)| r.rsplit_once('}'))
            .map(|(l, _)| l);
        for leaked in [
            ".test",
            "169.254",
            "10.1.2.3",
            "sk-",
            "http://",
            "gpt-rogue",
        ] {
            assert!(
                !labels.unwrap_or("").contains(leaked),
                "a label carries {leaked:?}: {line}"
            );
        }
    }

    // Every panel query returns data once a few scrapes have run; keep driving meanwhile.
    let panels: Vec<(String, String)> = dashboards()
        .into_iter()
        .flat_map(|(name, d)| {
            d["panels"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .flat_map(move |p| {
                    let title = format!("{name} / {}", p["title"].as_str().unwrap_or(""));
                    p["targets"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                        .into_iter()
                        .map(move |t| (title.clone(), t["expr"].as_str().unwrap_or("").to_string()))
                })
        })
        .collect();
    let mut missing: Vec<(String, String, String)> = Vec::new();
    for round in 0..40 {
        missing.clear();
        for (title, expr) in &panels {
            let q = as_grafana_sends(expr);
            let (status, n, error) = query(prom.addr, &q).await;
            if status != "success" || n == 0 {
                missing.push((title.clone(), q, format!("{status} {error}")));
            }
        }
        if missing.is_empty() {
            break;
        }
        if round % 5 == 4 {
            drive(&gate, origin.addr().port(), token).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        missing.is_empty(),
        "panels without data:\n{}",
        missing
            .iter()
            .map(|(t, q, s)| format!("  {t}: {q} ({s})"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    println!("{} panel queries answered with data", panels.len());

    // Every alert expression parses and evaluates against the live series.
    for (alert, expr, _) in rules() {
        let (status, _, error) = query(prom.addr, &expr).await;
        assert_eq!(status, "success", "{alert}: {expr}: {error}");
    }
    // And the alert that this traffic must raise is pending or firing: one more metadata
    // attempt now that the series has earlier samples.
    drive(&gate, origin.addr().port(), token).await;
    let mut seen = false;
    for _ in 0..30 {
        let (_, n, _) = query(
            prom.addr,
            r#"ALERTS{alertname="FleetgateCloudMetadataAttempt"}"#,
        )
        .await;
        if n > 0 {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        seen,
        "the metadata attempt must raise FleetgateCloudMetadataAttempt"
    );
}
