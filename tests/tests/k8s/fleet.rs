//! Status from the fleet, with the suite playing the kubelet: two pods of a FleetPolicy are
//! stored, and for each a real gate process runs the policy the controller rendered into the
//! ConfigMap (only its listeners and file paths moved onto this machine), its admin listener
//! on the pod's own loopback address `127.0.77.<n>:15190`, reporting on a Hermes home written
//! by Hermes' own modules (`tests/python/make_hermes_home.py`). The suite then patches each
//! pod's `status` to Running with that `podIP`. The controller, as installed, scrapes them,
//! and the FleetPolicy's status shows what those gates serve: both pods reporting (and, as
//! their policies' listeners were moved, neither on the current policy digest), the observed
//! model / effort / tier of the main role, and each pod's cron job under the id Hermes gave it
//! with its cost per day, the second pod's twice the first's as its runs cost twice as much.

use std::path::Path;
use std::time::Duration;

use fleetgate_e2e::gate::GateProcess;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::replica::start_as_installed;
use crate::support::{self, ensure_crds, eventually, kubectl};

const DAY: f64 = 86_400.0;

/// A Hermes home written by Hermes' modules: the main role observed at grok-4.6 / high /
/// priority, and one hourly cron job whose four runs of the last day cost `run_cost` each.
fn hermes_home(python: &Path, dir: &Path, run_cost: f64) -> Value {
    #[allow(
        clippy::cast_precision_loss,
        reason = "seconds since the epoch fit an f64's mantissa"
    )]
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs() as f64;
    let runs: Vec<Value> = (0..4)
        .map(|i| {
            json!({
                "claimed_at": now - DAY + f64::from(i) * 3600.0,
                "duration": 40,
                "status": "completed",
                "error": null,
                "agent": {
                    "estimated": run_cost, "actual": null, "input": 1200, "output": 80,
                    "cache_read": 0, "reply": "3 new messages", "tool_call_last": false,
                    "children": [], "aux": [],
                },
            })
        })
        .collect();
    let spec = json!({
        "timezone": "UTC",
        "config": { "model": { "default": "grok-4.6", "provider": "xai" } },
        "managed": null,
        "observed": {
            "main": {
                "model": "grok-4.6", "reasoning_effort": "high", "service_tier": "priority",
                "response_service_tier": "priority", "ts": "2026-12-01T10:00:00Z",
            },
        },
        "silence_probe": [],
        "jobs": [{
            "key": "inbox",
            "created_at": now - 2.0 * DAY,
            "create": { "prompt": "check the inbox", "schedule": "every 1h", "name": "inbox check" },
            "update": {},
            "pause": false,
            "runs": runs,
        }],
    });
    let spec_path = dir.join("spec.json");
    std::fs::write(&spec_path, spec.to_string()).expect("the spec");
    let script = fleetgate_e2e::k8s::workspace().join("tests/python/make_hermes_home.py");
    let out = std::process::Command::new(python)
        .arg(&script)
        .arg(dir.join("hermes"))
        .arg(&spec_path)
        .env_remove("HERMES_HOME")
        .output()
        .expect("the home writer starts");
    assert!(
        out.status.success(),
        "Hermes must write the home: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the home writer prints JSON")
}

/// The rendered gate policy with its listeners on `ip` (admin on the scrape port), its store,
/// report files and provider keys in `dir`: what the injected gate of a pod with that IP runs.
pub(crate) fn pod_gate_policy(rendered: &str, ip: &str, dir: &Path) -> String {
    let mut policy: Value = serde_yaml::from_str(rendered).expect("the rendered policy is YAML");
    policy["listen"] = json!({ "api": format!("{ip}:0"), "admin": format!("{ip}:15190") });
    policy["store"]["root"] = json!(dir.join("volume").display().to_string());
    let report = &mut policy["report"];
    report["hermesHome"] = json!(dir.join("hermes").display().to_string());
    report["tokenFile"] = json!(dir.join("token").display().to_string());
    report["managedDir"] = json!(dir.join("managed").display().to_string());
    // The provider Secrets as the sidecar mounts them, under the pod's folder.
    if let Some(providers) = policy
        .pointer_mut("/llm/providers")
        .and_then(Value::as_object_mut)
    {
        for provider in providers.values_mut() {
            let mounted = provider["keyFile"]
                .as_str()
                .expect("a key file")
                .to_string();
            let rel = mounted
                .strip_prefix("/etc/fleetgate/")
                .expect("keys are mounted under /etc/fleetgate");
            provider["keyFile"] = json!(dir.join(rel).display().to_string());
        }
    }
    serde_yaml::to_string(&policy).expect("the policy as YAML")
}

/// The value of `key` in Secret `name` of `ns`, decoded.
pub(crate) fn secret_value(ns: &str, name: &str, key: &str) -> Vec<u8> {
    let encoded = kubectl(
        &[
            "-n",
            ns,
            "get",
            "secret",
            name,
            "-o",
            &format!("jsonpath={{.data.{key}}}"),
        ],
        None,
    );
    crate::replica::base64_decode(&encoded)
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn the_fleet_policy_status_shows_what_the_gates_of_its_pods_serve() {
    let Some(python) = fleetgate_e2e::venv::hermes_python() else {
        return;
    };
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "fleet").await;
    support::install_chart(&ns, &[]);
    let controller = start_as_installed(&ns, "controller-0");
    support::apply(
        &ns,
        &json!({
            "apiVersion": "fleetgate.dev/v1alpha1",
            "kind": "FleetPolicy",
            "metadata": { "name": "fleet" },
            "spec": {
                "selector": { "matchLabels": { "app": "hermes" } },
                "managed": { "agent": { "reasoning_effort": "high" } },
            },
        }),
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm = eventually(Duration::from_secs(60), "the managed ConfigMap", || async {
        cms.get_opt("fleet-managed").await.ok().flatten()
    })
    .await;
    let data = cm.data.expect("the ConfigMap's data");
    let token = String::from_utf8(secret_value(&ns, "fleetgate-report-token", "token"))
        .expect("a text token");

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut gates = Vec::new();
    let mut job_ids = Vec::new();
    for (n, run_cost) in [(1_u8, 0.05), (2, 0.10)] {
        let ip = format!("127.0.77.{n}");
        let dir = support::plane().dir().join(format!("{ns}-agent-{n}"));
        std::fs::create_dir_all(dir.join("managed")).expect("the pod's folder");
        let ids = hermes_home(&python, &dir, run_cost);
        job_ids.push(ids["ids"]["inbox"].as_str().expect("a job id").to_string());
        std::fs::write(dir.join("token"), &token).expect("the token file");
        for (key, text) in &data {
            if key != "policy.yaml" {
                std::fs::write(dir.join("managed").join(key), text).expect("a managed file");
            }
        }
        let policy = pod_gate_policy(&data["policy.yaml"], &ip, &dir);
        gates.push(GateProcess::spawn(&policy).await.expect("the pod's gate"));
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": format!("agent-{n}"), "labels": { "app": "hermes" } },
            "spec": { "containers": [{ "name": "agent", "image": "example.com/hermes:1" }] },
        }))
        .expect("a pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("the pod is stored");
        // The kubelet's part: the pod runs, at the address its gate listens on.
        pods.patch_status(
            &format!("agent-{n}"),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": {
                "phase": "Running",
                "podIP": ip,
                "podIPs": [{ "ip": ip }],
            }})),
        )
        .await
        .expect("the pod's status is stored");
    }

    let status = eventually(
        Duration::from_secs(90),
        "a status from both gates",
        || async {
            let fp: Value = serde_json::from_str(&kubectl(
                &["-n", &ns, "get", "fp", "fleet", "-o", "json"],
                None,
            ))
            .ok()?;
            let status = fp["status"].clone();
            (status["pods"]["reporting"] == 2 && status["cronJobs"].as_array()?.len() == 2)
                .then_some(status)
        },
    )
    .await;
    println!("status from the fleet: {status:#}");
    // Both report. Neither is current: each gate reports the digest of the policy it runs,
    // the rendered one with its listeners and paths moved, and the controller compares it
    // with the rendered policy's.
    assert_eq!(
        status["pods"],
        json!({ "selected": 2, "reporting": 2, "current": 0 }),
        "both pods report; their moved policies are not the current one"
    );
    let propagated = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Propagated"))
        .expect("a Propagated condition");
    assert!(
        propagated["status"] == "False"
            && propagated["message"]
                .as_str()
                .is_some_and(|m| m.contains("agent-1") && m.contains("agent-2")),
        "Propagated names the pods behind: {propagated}"
    );
    let tiers = status["observedTiers"].as_array().expect("observed tiers");
    let main = tiers
        .iter()
        .find(|t| t["role"] == "main")
        .expect("the main role is observed");
    assert_eq!(
        (
            &main["model"],
            &main["reasoningEffort"],
            &main["serviceTier"],
            &main["podCount"],
            &main["drift"],
        ),
        (
            &json!("grok-4.6"),
            &json!("high"),
            &json!("priority"),
            &json!(2),
            &json!(false)
        ),
        "the main role as both gates observed it: {main}"
    );
    let jobs = status["cronJobs"].as_array().expect("cron jobs");
    let cost = |pod: &str| -> f64 {
        let job = jobs
            .iter()
            .find(|j| j["pod"] == pod)
            .unwrap_or_else(|| panic!("{pod}'s job is listed: {jobs:?}"));
        assert_eq!(job["name"], "inbox check", "{job}");
        job["costPerDay"].as_f64().expect("a cost")
    };
    let (first, second) = (cost("agent-1"), cost("agent-2"));
    for (pod, id) in ["agent-1", "agent-2"].iter().zip(&job_ids) {
        assert!(
            jobs.iter()
                .any(|j| j["pod"] == *pod && j["job"] == id.as_str()),
            "{pod}'s job carries the id Hermes gave it ({id}): {jobs:?}"
        );
    }
    assert!(
        first > 0.0 && (second - 2.0 * first).abs() < 1e-6,
        "the second pod's runs cost twice the first's: {first} and {second}"
    );
    let total = status["totalCostPerDay"].as_f64().expect("a total");
    assert!(
        (total - first - second).abs() < 1e-6,
        "the total is the sum over the pods: {total}"
    );
    drop(gates);
    drop(controller);
}
