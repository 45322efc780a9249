//! The controller binary against the real API server, run out of cluster exactly as the chart
//! configures it (the installed Deployment's own arguments, its mounted Secret and ConfigMap
//! as files) and authenticated with a token the API server minted for the chart's
//! ServiceAccount (TokenRequest), never as admin: a verb the Role lacks shows as a refusal.
//! A FleetPolicy applied becomes its ConfigMap and status; edits re-render (latency measured);
//! an invalid edit keeps the last good ConfigMap with `Valid=False`; deleting the FleetPolicy
//! lets kube-controller-manager's garbage collector remove what it owned.

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use crate::support::{self, ensure_crds, eventually, kubectl};

/// A controller process; killed on drop, its log printed when dropped during a panic.
#[derive(Debug)]
pub struct ControllerProcess {
    child: Child,
    log: PathBuf,
}

impl ControllerProcess {
    /// Everything it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- controller log {}\n{}", self.log.display(), self.log());
        }
    }
}

/// `127.0.0.1:<a free port>`.
pub fn free_addr() -> String {
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    format!("127.0.0.1:{port}")
}

/// Write the data of the Secret or ConfigMap `kind/name` into `dir` (one file per key).
fn materialize(ns: &str, kind: &str, name: &str, dir: &Path) {
    let obj: Value =
        serde_json::from_str(&kubectl(&["-n", ns, "get", kind, name, "-o", "json"], None))
            .expect("kubectl prints JSON");
    std::fs::create_dir_all(dir).expect("the mount folder");
    for (key, value) in obj["data"].as_object().expect("data") {
        let text = value.as_str().expect("a string");
        let bytes = if kind == "secret" {
            base64_decode(text)
        } else {
            text.as_bytes().to_vec()
        };
        std::fs::write(dir.join(key), bytes).expect("a mounted file");
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    let out = Command::new("base64")
        .arg("-d")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(text.as_bytes())?;
            child.wait_with_output()
        })
        .expect("base64 -d");
    out.stdout
}

/// Start `fleetgate-controller` as the installed Deployment `fleetgate-controller` of `ns`
/// runs it: its arguments, its Secret and ConfigMap volumes as files, listeners moved to free
/// loopback ports, authenticated as its ServiceAccount with a TokenRequest token.
pub fn start_as_installed(ns: &str, instance: &str) -> ControllerProcess {
    start_as_installed_on(ns, instance, &free_addr())
}

/// [`start_as_installed`] with the webhook listening on `webhook_addr` (the address a
/// `webhook.url` values override points the API server at).
pub fn start_as_installed_on(ns: &str, instance: &str, webhook_addr: &str) -> ControllerProcess {
    let plane = support::plane();
    let work = plane.dir().join(format!("controller-{ns}-{instance}"));
    std::fs::create_dir_all(&work).expect("the controller's folder");
    let deploy: Value = serde_json::from_str(&kubectl(
        &[
            "-n",
            ns,
            "get",
            "deployment/fleetgate-controller",
            "-o",
            "json",
        ],
        None,
    ))
    .expect("kubectl prints JSON");
    let pod = &deploy["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let sa = pod["serviceAccountName"]
        .as_str()
        .expect("a ServiceAccount");
    // Mounted volumes become folders of files.
    let mut mounts: Vec<(String, PathBuf)> = Vec::new();
    for m in container["volumeMounts"].as_array().expect("mounts") {
        let name = m["name"].as_str().expect("a mount name");
        let vol = pod["volumes"]
            .as_array()
            .expect("volumes")
            .iter()
            .find(|v| v["name"] == name)
            .expect("the mount's volume");
        let dir = work.join(name);
        if let Some(secret) = vol["secret"]["secretName"].as_str() {
            materialize(ns, "secret", secret, &dir);
        } else if let Some(cm) = vol["configMap"]["name"].as_str() {
            materialize(ns, "configmap", cm, &dir);
        } else {
            std::fs::create_dir_all(&dir).expect("an empty folder");
        }
        mounts.push((m["mountPath"].as_str().expect("a path").to_string(), dir));
    }
    let admin_addr = free_addr();
    let mut args: Vec<String> = Vec::new();
    let mut prev = String::new();
    for a in container["args"].as_array().expect("args") {
        let mut a = a
            .as_str()
            .expect("a string arg")
            .replace("$(POD_NAMESPACE)", ns);
        if prev == "--admin-addr" {
            a.clone_from(&admin_addr);
        } else if prev == "--webhook-addr" {
            a = webhook_addr.to_string();
        }
        if let Some((mount, dir)) = mounts.iter().find(|(m, _)| a.starts_with(&format!("{m}/"))) {
            a = format!("{}{}", dir.display(), &a[mount.len()..]);
        }
        prev.clone_from(&a);
        args.push(a);
    }
    let token = kubectl(&["-n", ns, "create", "token", sa, "--duration=2h"], None);
    let kubeconfig = work.join("kubeconfig");
    plane
        .token_kubeconfig(&kubeconfig, token.trim())
        .expect("the token kubeconfig");
    let log = work.join("controller.log");
    let file = std::fs::File::create(&log).expect("the log file");
    let child = Command::new(support::controller_bin())
        .args(&args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAMESPACE", ns)
        .env("POD_NAME", instance)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("a log handle"))
        .stderr(file)
        .spawn()
        .expect("fleetgate-controller must start");
    ControllerProcess { child, log }
}

/// The FleetPolicy API of `ns`.
fn fleet_policies(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "fleetgate.dev".into(),
        version: "v1alpha1".into(),
        api_version: "fleetgate.dev/v1alpha1".into(),
        kind: "FleetPolicy".into(),
        plural: "fleetpolicies".into(),
    };
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn condition<'a>(fp: &'a DynamicObject, kind: &str) -> Option<&'a Value> {
    fp.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// Lines of the controller's log that show the API server refusing it.
fn refusals(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("forbidden") || l.contains("Forbidden"))
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a short list"
    )]
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::test(flavor = "multi_thread")]
async fn the_controller_as_its_service_account_reconciles_edits_and_lets_gc_clean_up() {
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "reconcile").await;
    support::install_chart(&ns, &[]);
    let controller = start_as_installed(&ns, "controller-0");
    let fps = fleet_policies(&client, &ns);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let policy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "fleetgate.dev/v1alpha1",
        "kind": "FleetPolicy",
        "metadata": { "name": "fleet", "namespace": ns },
        "spec": { "selector": { "matchLabels": { "app": "hermes" } } },
    }))
    .expect("a FleetPolicy");
    let apply = PatchParams::apply("fleetgate-e2e").force();
    fps.patch("fleet", &apply, &Patch::Apply(&policy))
        .await
        .expect("the FleetPolicy must be accepted");

    // Reconciled: the owned ConfigMap, and a status for this generation.
    let cm = eventually(Duration::from_secs(60), "the managed ConfigMap", || async {
        cms.get_opt("fleet-managed").await.ok().flatten()
    })
    .await;
    let owner = &cm
        .metadata
        .owner_references
        .as_ref()
        .expect("owner references")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("FleetPolicy", "fleet", Some(true)),
        "the ConfigMap must be owned by its FleetPolicy"
    );
    let fp = eventually(
        Duration::from_secs(60),
        "a status for generation 1",
        || async {
            let fp = fps.get("fleet").await.ok()?;
            let observed = fp.data["status"]["observedGeneration"].as_i64();
            (observed == fp.metadata.generation
                && condition(&fp, "Valid").is_some_and(|c| c["status"] == "True"))
            .then_some(fp)
        },
    )
    .await;
    let ready = condition(&fp, "Ready").map(|c| c["status"].clone());
    println!("status after the first reconcile: {}", fp.data["status"]);

    // `kubectl get fp` prints the documented columns with the status' values.
    let table = kubectl(&["-n", &ns, "get", "fp", "fleet"], None);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "READY", "PODS", "CURRENT", "COST/DAY", "FLAGGED", "AGE"
        ],
        "{table}"
    );
    let row: Vec<&str> = lines.next().expect("a row").split_whitespace().collect();
    assert_eq!(row[0], "fleet", "{table}");
    assert_eq!(
        Some(json!(row[1])),
        ready,
        "READY must print the Ready condition's status: {table}"
    );
    assert_eq!(
        row[2],
        fp.data["status"]["pods"]["selected"].to_string(),
        "PODS must print status.pods.selected: {table}"
    );

    // 50 edits, each re-rendered into the ConfigMap; latency from the edit to the new data.
    let mut latencies = Vec::new();
    let mut last = cm.data.clone();
    for i in 0..50 {
        let mut edited = policy.clone();
        edited.data["spec"]["web"] = json!({ "charLimit": 2001 + i });
        let sent = tokio::time::Instant::now();
        fps.patch("fleet", &apply, &Patch::Apply(&edited))
            .await
            .expect("an edit must be accepted");
        let data = eventually(Duration::from_secs(30), "the re-render", || async {
            let now = cms.get("fleet-managed").await.ok()?.data;
            (now != last).then_some(now)
        })
        .await;
        latencies.push(sent.elapsed());
        last = data;
    }
    latencies.sort();
    println!(
        "re-render latency over 50 edits: p50 {:?}, p99 {:?}, max {:?}",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies[latencies.len() - 1]
    );

    // An edit only the controller can judge keeps the last good ConfigMap, Valid=False.
    let mut invalid = policy.clone();
    invalid.data["spec"]["egress"] = json!({ "allowCIDRs": ["169.254.0.0/16"] });
    let generation = fps
        .patch("fleet", &apply, &Patch::Apply(&invalid))
        .await
        .expect("the schema accepts it")
        .metadata
        .generation;
    let fp = eventually(Duration::from_secs(60), "Valid=False", || async {
        let fp = fps.get("fleet").await.ok()?;
        (fp.data["status"]["observedGeneration"].as_i64() == generation
            && condition(&fp, "Valid").is_some_and(|c| c["status"] == "False"))
        .then_some(fp)
    })
    .await;
    let valid = condition(&fp, "Valid").expect("Valid");
    assert!(
        valid["message"]
            .as_str()
            .is_some_and(|m| m.contains("allowCIDRs")),
        "Valid=False must name the field: {valid}"
    );
    assert_eq!(
        cms.get("fleet-managed").await.expect("the ConfigMap").data,
        last,
        "an invalid edit must keep the last good ConfigMap"
    );

    // Deleting the FleetPolicy: kube-controller-manager's garbage collector removes the child.
    fps.delete("fleet", &Default::default())
        .await
        .expect("the FleetPolicy must delete");
    eventually(Duration::from_secs(60), "garbage collection", || async {
        cms.get_opt("fleet-managed")
            .await
            .ok()
            .and_then(|c| c.is_none().then_some(()))
    })
    .await;

    let log = controller.log();
    let refused = refusals(&log);
    assert!(
        refused.is_empty(),
        "the API server must never refuse the controller as installed (RBAC): {refused:#?}"
    );
}
