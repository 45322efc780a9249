//! A namespace LLM budget across two gates, on the real control plane. A FleetPolicy routes
//! role `cron` to a stub provider whose every answer costs $0.01 (its usage times the price
//! the spec sets) and caps the namespace at `dailyUsd` with the shortest poll a user can set
//! (`resyncSeconds: 10`). The controller runs as installed; two pods are stored and, the suite
//! playing the kubelet, each gets a real gate process on its own loopback address running the
//! policy the controller rendered (listeners and file paths moved onto this machine), its
//! policy file rewritten whenever the ConfigMap changes, as the kubelet's ConfigMap sync does.
//!
//! The suite then calls the two gates alternately at a fixed rate until both refuse with 429
//! `llm_budget_exceeded`, and measures: when the gates' summed spend reached the cap, when
//! the controller's status and ConfigMap said the role was spent, when each gate first
//! refused, and what the gates counted in all. The overshoot (dollars past the cap, seconds of
//! serving past it) must stay within the bound the controller documents — what the fleet
//! spends in one poll interval plus the policy's way to the gates — computed from the
//! measured call rate; the figures are printed. Last, one gate goes away: the poll then
//! reaches only the other, whose own spend may be under the cap, and the day's spend and the
//! verdict must stay.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::http;
use fleetgate_e2e::llm_stub::{StubKind, StubOptions, StubProvider};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::fleet::{pod_gate_policy, secret_value};
use crate::replica::start_as_installed;
use crate::support::{self, ensure_crds, eventually, kubectl};

/// What one call costs: the stub's usage (10 prompt, 5 completion tokens) at the spec's price
/// ($500 and $1000 per million).
const CALL_USD: f64 = (10.0 * 500.0 + 5.0 * 1000.0) / 1e6;
/// The namespace's daily cap of role `cron`.
const BUDGET_USD: f64 = 0.50;
/// The served calls that reach it.
const CAP_CALLS: u32 = 50;
/// `spec.resyncSeconds`: the shortest poll the CRD lets a user set.
const RESYNC_SECONDS: u64 = 10;
/// The time between two calls' starts (alternating gates).
const CALL_PERIOD: Duration = Duration::from_millis(150);
/// How often the suite's kubelet reads the ConfigMap.
const KUBELET_SYNC: Duration = Duration::from_millis(200);
/// The gate's policy file poll (`serve --reload-interval-ms`, default 2000, as the injected
/// sidecar runs it).
const GATE_RELOAD: Duration = Duration::from_secs(2);
/// A changed verdict requeues the reconcile after 1 s (controller/src/reconcile.rs).
const VERDICT_REQUEUE: Duration = Duration::from_secs(1);
/// The scrape, the ConfigMap's apply, the policy's parse and swap at the gate and the API
/// round trips, on a machine shared with the rest of the suite.
const MARGIN: Duration = Duration::from_secs(1);
/// How long after a poll the cap is reached: the calls start so that the poll just before
/// misses it and the next one is a whole interval away, the overshoot's worst case.
const CAP_AFTER_POLL: Duration = Duration::from_secs(1);
/// The longest the calls may go on: far past the bound, so a verdict that never reaches the
/// gates fails the case rather than hanging it.
const DRIVE_LIMIT: Duration = Duration::from_secs(60);

/// Write `text` to `path` as the kubelet updates a ConfigMap volume: never half-written.
fn replace_file(path: &Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).expect("the new policy file");
    std::fs::rename(&tmp, path).expect("the policy file is replaced");
}

/// Whether the rendered policy says role `cron` is spent.
fn says_spent(policy_yaml: &str) -> bool {
    serde_yaml::from_str::<Value>(policy_yaml)
        .ok()
        .and_then(|p| {
            p["llm"]["budgets"]["exhausted"]["roles"]
                .as_array()
                .cloned()
        })
        .is_some_and(|roles| roles.iter().any(|r| r == "cron"))
}

/// One pod of the fleet: its gate, its address, its policy file.
struct PodGate {
    ip: String,
    dir: PathBuf,
    gate: GateProcess,
}

/// Moments of the run, from the start of the calls.
#[derive(Debug, Default)]
struct Seen {
    /// The controller's status first showed `cron` exhausted.
    status_spent: Option<Duration>,
    /// The ConfigMap's policy first said `cron` is spent.
    config_map_spent: Option<Duration>,
    /// The suite's kubelet wrote that policy into the pods' files.
    files_written: Option<Duration>,
}

/// One call through a gate.
#[derive(Debug)]
struct Call {
    gate: usize,
    /// When it was sent.
    at: Duration,
    /// When its answer was read.
    done: Duration,
    status: u16,
    error: Option<String>,
    message: String,
}

async fn call_cron(api: SocketAddr) -> http::HttpReply {
    let body = json!({
        "model": "stub-model",
        "messages": [{ "role": "user", "content": "summarise the inbox" }],
    });
    let req = ::http::Request::post("/llm/cron/v1/chat/completions")
        .header("content-type", "application/json")
        .header("authorization", "Bearer agent-held-key")
        .body(Bytes::from(body.to_string()))
        .expect("a request");
    http::send(api, req).await.expect("the gate must answer")
}

/// `GET /v1/status`'s `llm.spend` of a gate.
async fn gate_spend(gate: &GateProcess) -> Value {
    let status = http::get(gate.admin_addr(), "/v1/status")
        .await
        .expect("the gate's status")
        .json()
        .expect("status JSON");
    status["llm"]["spend"].clone()
}

/// The value of the first `/metrics` sample of `series` (family and labels as rendered).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, measured from start to end"
)]
async fn a_namespace_budget_stops_two_gates_within_the_documented_overshoot() {
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "budget").await;
    support::install_chart(&ns, &[]);
    let controller = start_as_installed(&ns, "controller-0");
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("the stub provider");
    kubectl(
        &[
            "-n",
            &ns,
            "create",
            "secret",
            "generic",
            "llm-keys",
            "--from-literal=openai=sk-namespace-budget-0123456789",
        ],
        None,
    );
    support::apply(
        &ns,
        &json!({
            "apiVersion": "fleetgate.dev/v1alpha1",
            "kind": "FleetPolicy",
            "metadata": { "name": "fleet" },
            "spec": {
                "selector": { "matchLabels": { "app": "hermes" } },
                "resyncSeconds": RESYNC_SECONDS,
                "egress": { "allowCIDRs": ["127.0.0.1/32"], "ports": [stub.addr().port()] },
                "llm": {
                    "mode": "enforce",
                    "providers": { "stub": {
                        "kind": "openai",
                        "baseURL": stub.base_url(),
                        "secretRef": { "name": "llm-keys", "key": "openai" },
                    }},
                    "roles": { "cron": "stub" },
                    "prices": { "models": { "stub-model": { "input": 500, "output": 1000 } } },
                    "budgets": { "namespace": { "cron": { "dailyUsd": BUDGET_USD } } },
                },
            },
        }),
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm = eventually(Duration::from_secs(60), "the managed ConfigMap", || async {
        cms.get_opt("fleet-managed").await.ok().flatten()
    })
    .await;
    let data = cm.data.expect("the ConfigMap's data");
    let rendered = data["policy.yaml"].clone();
    assert!(!says_spent(&rendered), "nothing is spent yet:\n{rendered}");
    let token = String::from_utf8(secret_value(&ns, "fleetgate-report-token", "token"))
        .expect("a text token");
    let key = secret_value(&ns, "llm-keys", "openai");

    // Two pods, each with its gate, as the kubelet runs them.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut fleet = Vec::new();
    for n in [21_u8, 22] {
        let ip = format!("127.0.77.{n}");
        let dir = support::plane().dir().join(format!("{ns}-agent-{n}"));
        for sub in ["managed", "hermes", "llm-keys/llm-keys"] {
            std::fs::create_dir_all(dir.join(sub)).expect("the pod's folders");
        }
        std::fs::write(dir.join("token"), &token).expect("the token file");
        std::fs::write(dir.join("llm-keys/llm-keys/openai"), &key).expect("the key file");
        let gate = GateProcess::spawn(&pod_gate_policy(&rendered, &ip, &dir))
            .await
            .expect("the pod's gate");
        let name = format!("agent-{n}");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "app": "hermes" } },
            "spec": { "containers": [{ "name": "agent", "image": "example.com/hermes:1" }] },
        }))
        .expect("a pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("the pod is stored");
        pods.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": {
                "phase": "Running",
                "podIP": ip,
                "podIPs": [{ "ip": ip }],
            }})),
        )
        .await
        .expect("the pod's status is stored");
        fleet.push(PodGate { ip, dir, gate });
    }
    // The controller polls both gates before the first call: the status counts two gates,
    // written by the poll that saw them.
    eventually(
        Duration::from_secs(60),
        "a spend status from both gates",
        || async {
            let fp: Value = serde_json::from_str(&kubectl(
                &["-n", &ns, "get", "fp", "fleet", "-o", "json"],
                None,
            ))
            .ok()?;
            (fp["status"]["llmSpend"]["gates"] == 2).then_some(())
        },
    )
    .await;
    let polled = Instant::now();
    let runs_before = controller
        .metric("fleetgate_controller_reconcile_runs_total", "")
        .expect("the controller's metrics");
    // The next poll comes `resyncSeconds` after that one: start the calls so that the cap is
    // reached just after it.
    let to_cap = CALL_PERIOD * (CAP_CALLS - 1);
    let start = polled + Duration::from_secs(RESYNC_SECONDS) + CAP_AFTER_POLL - to_cap;
    tokio::time::sleep_until(start).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    // The kubelet's part: the ConfigMap's policy, moved, into each pod's policy file.
    let kubelet = {
        let (cms, seen) = (cms.clone(), seen.clone());
        let targets: Vec<(String, PathBuf, PathBuf)> = fleet
            .iter()
            .map(|p| {
                (
                    p.ip.clone(),
                    p.dir.clone(),
                    p.gate.policy_path().to_path_buf(),
                )
            })
            .collect();
        let mut current = rendered.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(KUBELET_SYNC).await;
                let Ok(Some(cm)) = cms.get_opt("fleet-managed").await else {
                    continue;
                };
                let Some(policy) = cm.data.and_then(|d| d.get("policy.yaml").cloned()) else {
                    continue;
                };
                if policy == current {
                    continue;
                }
                let now = start.elapsed();
                for (ip, dir, path) in &targets {
                    replace_file(path, &pod_gate_policy(&policy, ip, dir));
                }
                if says_spent(&policy) {
                    let mut s = seen.lock().expect("the record");
                    s.config_map_spent.get_or_insert(now);
                    s.files_written.get_or_insert(start.elapsed());
                }
                current = policy;
            }
        })
    };
    // What the controller's status says, as often as a person could look.
    let watcher = {
        let (ns, seen) = (ns.clone(), seen.clone());
        let fps = support::fleet_policies(&client, &ns);
        tokio::spawn(async move {
            loop {
                if let Ok(fp) = fps.get("fleet").await {
                    let spent = fp.data["status"]["llmSpend"]["roles"]
                        .as_array()
                        .is_some_and(|r| {
                            r.iter()
                                .any(|r| r["role"] == "cron" && r["exhausted"] == true)
                        });
                    if spent {
                        seen.lock()
                            .expect("the record")
                            .status_spent
                            .get_or_insert(start.elapsed());
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    // The calls: alternating gates at a fixed rate until both refuse.
    let apis: Vec<SocketAddr> = fleet.iter().map(|p| p.gate.api_addr()).collect();
    let mut calls: Vec<Call> = Vec::new();
    let mut tick = tokio::time::interval(CALL_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut refused = [false, false];
    let mut i = 0_usize;
    while !(refused[0] && refused[1]) {
        assert!(
            start.elapsed() < DRIVE_LIMIT,
            "the gates still served role cron after {DRIVE_LIMIT:?}: {} calls answered; {:?}",
            calls.iter().filter(|c| c.status == 200).count(),
            seen.lock().expect("the record")
        );
        tick.tick().await;
        let g = i % 2;
        i += 1;
        let at = start.elapsed();
        let reply = call_cron(apis[g]).await;
        let status = reply.status.as_u16();
        if status == 429 {
            refused[g] = true;
        }
        calls.push(Call {
            gate: g,
            at,
            done: start.elapsed(),
            status,
            error: reply.header("x-fleetgate-error").map(str::to_string),
            message: reply.text(),
        });
    }
    let driven = start.elapsed();
    let runs_after = controller
        .metric("fleetgate_controller_reconcile_runs_total", "")
        .expect("the controller's metrics");
    kubelet.abort();
    watcher.abort();
    let seen = std::mem::take(&mut *seen.lock().expect("the record"));

    // Every answer was a 200 or the namespace budget's 429, and a gate that refused once
    // refused from then on.
    for c in &calls {
        assert!(
            c.status == 200
                || (c.status == 429 && c.error.as_deref() == Some("llm_budget_exceeded")),
            "an answer other than served or budget-refused: {c:?}"
        );
        if c.status == 429 {
            assert!(
                c.message.contains("daily namespace budget of role 'cron'")
                    && c.message.contains("fleet policy 'fleet'"),
                "the refusal names the namespace budget, not a pod's: {}",
                c.message
            );
        }
    }
    for g in 0..2 {
        let first = calls
            .iter()
            .position(|c| c.gate == g && c.status == 429)
            .expect("each gate refused");
        assert!(
            calls[first..]
                .iter()
                .filter(|c| c.gate == g)
                .all(|c| c.status == 429),
            "gate {g} served again after refusing: {calls:?}"
        );
    }
    // Both keep refusing.
    for api in &apis {
        let reply = call_cron(*api).await;
        assert_eq!(reply.status, 429, "still refused: {}", reply.text());
        assert_eq!(
            reply.header("x-fleetgate-error"),
            Some("llm_budget_exceeded")
        );
    }
    let answered: Vec<&Call> = calls.iter().filter(|c| c.status == 200).collect();
    assert!(
        !answered.is_empty(),
        "the gates served before the cap: {calls:?}"
    );
    assert_eq!(
        stub.requests().len(),
        answered.len(),
        "only the served calls reached the provider"
    );

    // What the gates counted: every served call, at its price.
    let mut spent = 0.0;
    let mut days = Vec::new();
    for p in &fleet {
        let spend = gate_spend(&p.gate).await;
        days.push(spend["day"].as_str().expect("a day").to_string());
        spent += spend["roles"]["cron"]["usd"].as_f64().unwrap_or(0.0);
        let text = http::get(p.gate.admin_addr(), "/metrics")
            .await
            .expect("the gate's metrics")
            .text();
        assert_eq!(
            sample(
                &text,
                r#"fleetgate_llm_budget_usd{role="cron",scope="namespace"}"#
            ),
            Some(BUDGET_USD),
            "the gate knows the namespace budget"
        );
        assert!(
            !text.contains(r#"scope="pod""#),
            "no pod budget is involved:\n{text}"
        );
    }
    #[allow(clippy::cast_precision_loss, reason = "a few hundred calls")]
    let counted = answered.len() as f64 * CALL_USD;
    assert!(
        (spent - counted).abs() < 1e-6,
        "the gates counted ${spent:.4} for {} served calls (${counted:.4})",
        answered.len()
    );

    // The measurements. The cap is reached at the end of the served call that brings the
    // summed spend to it.
    assert!(
        (f64::from(CAP_CALLS) * CALL_USD - BUDGET_USD).abs() < 1e-9,
        "{CAP_CALLS} calls reach the cap"
    );
    let cap_call = answered
        .get(CAP_CALLS as usize - 1)
        .unwrap_or_else(|| panic!("the gates refused before the cap: ${spent:.2} served"));
    let cap_at = cap_call.done;
    let last_served = answered.last().expect("served calls").done;
    let first_call = calls[0].at;
    let rate_usd_per_s = counted / (last_served - first_call + CALL_PERIOD).as_secs_f64();
    let calls_per_s = 1.0 / CALL_PERIOD.as_secs_f64();
    let slack = VERDICT_REQUEUE + KUBELET_SYNC + GATE_RELOAD + MARGIN;
    let window = Duration::from_secs(RESYNC_SECONDS) + slack;
    let bound_usd = rate_usd_per_s * window.as_secs_f64() + CALL_USD;
    let over_usd = spent - BUDGET_USD;
    let over_s = last_served.saturating_sub(cap_at);
    let refusing: Vec<Duration> = (0..2)
        .map(|g| {
            calls
                .iter()
                .find(|c| c.gate == g && c.status == 429)
                .map(|c| c.at)
                .expect("a refusal")
        })
        .collect();
    let reconciles = runs_after - runs_before;
    println!(
        "namespace budget across two gates: budget ${BUDGET_USD:.2}/day, ${CALL_USD:.2} a call, \
         {calls_per_s:.2} calls/s alternating (measured ${rate_usd_per_s:.4}/s), \
         resyncSeconds {RESYNC_SECONDS}"
    );
    println!(
        "  calls from {:.2?} after the poll that saw both gates; cap reached at {cap_at:.2?}; status exhausted at {:.2?}; ConfigMap spent at {:.2?}; \
         pods' policy files written at {:.2?}; gates refusing from {:.2?} and {:.2?}; last \
         served call at {last_served:.2?}; calls stopped at {driven:.2?}",
        start - polled,
        seen.status_spent,
        seen.config_map_spent,
        seen.files_written,
        refusing[0],
        refusing[1]
    );
    println!(
        "  gates counted ${spent:.2} ({} served calls): overshoot ${over_usd:.2} and {:.2} s of \
         serving past the cap; documented bound ${bound_usd:.2} = ${rate_usd_per_s:.4}/s x \
         ({RESYNC_SECONDS} s poll + {:.1} s reload: {VERDICT_REQUEUE:?} requeue, \
         {KUBELET_SYNC:?} kubelet sync, {GATE_RELOAD:?} gate file poll, {MARGIN:?} margin) + \
         one call in flight",
        answered.len(),
        over_s.as_secs_f64(),
        slack.as_secs_f64()
    );
    println!(
        "  the controller reconciled {reconciles} times in the {driven:.1?} of calls \
         (one poll each)"
    );
    assert!(
        days.iter().all(|d| *d == days[0]),
        "one UTC day throughout: {days:?}"
    );
    assert!(
        over_usd <= bound_usd,
        "the namespace overshot ${over_usd:.2} past its ${BUDGET_USD:.2} cap, over the bound ${bound_usd:.2}"
    );
    assert!(
        over_s <= window,
        "the gates served {over_s:?} past the cap, over the bound {window:?}"
    );
    let status_spent = seen.status_spent.expect("the status showed cron exhausted");
    let cm_spent = seen
        .config_map_spent
        .expect("the ConfigMap said cron is spent");
    assert!(
        cm_spent >= cap_at.saturating_sub(Duration::from_secs(1))
            && status_spent >= cap_at.saturating_sub(Duration::from_secs(1)),
        "nothing said spent before the cap was reached: {seen:?}, cap at {cap_at:?}"
    );

    // The status and `kubectl get fp` show the namespace's spend against its budget.
    let want_column = format!("cron:${spent:.2}/${BUDGET_USD:.2}");
    let status = eventually(
        Duration::from_secs(2 * RESYNC_SECONDS + 10),
        "the status with the gates' final spend",
        || async {
            let fp: Value = serde_json::from_str(&kubectl(
                &["-n", &ns, "get", "fp", "fleet", "-o", "json"],
                None,
            ))
            .ok()?;
            (fp["status"]["budget"] == want_column.as_str()).then(|| fp["status"].clone())
        },
    )
    .await;
    let roles: BTreeMap<String, Value> = status["llmSpend"]["roles"]
        .as_array()
        .expect("roles")
        .iter()
        .map(|r| (r["role"].as_str().expect("a role").to_string(), r.clone()))
        .collect();
    assert_eq!(
        roles.keys().collect::<Vec<_>>(),
        vec!["cron"],
        "only cron spends or has a budget: {status:#}"
    );
    let cron = &roles["cron"];
    assert_eq!(
        (
            &cron["dailyUsd"],
            &cron["exhausted"],
            &status["llmSpend"]["gates"]
        ),
        (&json!(BUDGET_USD), &json!(true), &json!(2)),
        "{status:#}"
    );
    assert!(
        (cron["spentUsd"].as_f64().expect("spent") - spent).abs() < 0.005,
        "the status's spend is the gates' to the cent: {cron} vs {spent}"
    );
    assert_eq!(status["llmSpend"]["day"], json!(days[0]));
    let table = kubectl(&["-n", &ns, "get", "fp", "fleet"], None);
    let mut lines = table.lines();
    let header = lines.next().expect("a header");
    let row = lines.next().expect("a row");
    let col = header.find("BUDGET").expect("a BUDGET column");
    let cell = row
        .get(col..)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_default();
    assert_eq!(cell, want_column, "kubectl get fp:\n{table}");
    println!("kubectl get fp:\n{table}");

    // One gate goes away (its pod stays, unanswering): the next poll sums the other alone,
    // under the cap by itself, but the day's spend the controller saw stays, and so does the
    // verdict.
    let gone = fleet.pop().expect("the second pod's gate");
    drop(gone);
    let status = eventually(
        Duration::from_secs(2 * RESYNC_SECONDS + 10),
        "a poll that reaches one gate",
        || async {
            let fp: Value = serde_json::from_str(&kubectl(
                &["-n", &ns, "get", "fp", "fleet", "-o", "json"],
                None,
            ))
            .ok()?;
            (fp["status"]["llmSpend"]["gates"] == 1).then(|| fp["status"].clone())
        },
    )
    .await;
    let alone = gate_spend(&fleet[0].gate).await["roles"]["cron"]["usd"]
        .as_f64()
        .expect("the remaining gate's spend");
    println!(
        "one gate gone: the poll reaches ${alone:.2} of the day's ${spent:.2}; status {}",
        status["llmSpend"]
    );
    let cron = status["llmSpend"]["roles"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["role"] == "cron"))
        .expect("cron in the status")
        .clone();
    assert!(
        (cron["spentUsd"].as_f64().expect("spent") - spent).abs() < 0.005
            && cron["exhausted"] == true
            && status["budget"] == want_column.as_str(),
        "the day's spend and the verdict outlive a gate missing from the poll: {status:#}"
    );
    let reply = call_cron(fleet[0].gate.api_addr()).await;
    assert_eq!(
        (reply.status.as_u16(), reply.header("x-fleetgate-error")),
        (429, Some("llm_budget_exceeded")),
        "the remaining gate still refuses: {}",
        reply.text()
    );
    drop(fleet);
    drop(controller);
}
