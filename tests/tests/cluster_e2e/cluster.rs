//! The cluster this suite runs on, started once per test binary: the real control plane with a
//! real node beside it (kubelet, containerd with runc, the CNI bridge), the images built from
//! this tree loaded into the node's runtime, and what the pods reach on the host through the
//! bridge's gateway address: a stub name server on port 53 (the pods' only resolver) and an
//! HTTP origin on port 80.
//!
//! Names resolve, for the gates, through the stub: `docs.fleet.test` and `ads.fleet.test` to the
//! origin on the gateway, `meta.fleet.test` to the cloud-metadata address. The agent pods map
//! the same names to a public address in their hosts file (`hostAliases`): Hermes checks every
//! URL's address itself before it calls its backend, and the gate never reads a hosts file.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock, mpsc};
use std::time::Duration;

use fleetgate_e2e::dns::StubDns;
use fleetgate_e2e::k8s::node::{Node, NodeOptions};
use fleetgate_e2e::k8s::{self, ControlPlane};
use fleetgate_e2e::origin::{self, Origin, Reply};
use serde_json::Value;

/// The names the agents fetch.
pub const NAMES: &[&str] = &["docs.fleet.test", "meta.fleet.test", "ads.fleet.test"];
/// The public address the agents' hosts file gives those names (never connected to directly
/// but in transparent mode, where the capture takes it to the gate).
pub const PUBLIC: &str = "93.184.215.14";
/// The cloud-metadata address `meta.fleet.test` resolves to for the gates.
pub const METADATA: &str = "169.254.169.254";
/// Image references the suite installs (loaded into the node's runtime, never pulled).
pub const CONTROLLER_IMAGE: (&str, &str) = ("localhost/fleetgate-controller", "dev");
pub const PROXY_IMAGE: (&str, &str) = ("localhost/fleetgate-proxy", "dev");
pub const AGENT_IMAGE: &str = "localhost/hermes-agent:0.19.0";
pub const PAUSE_IMAGE: &str = "localhost/fleetgate-pause:1";
/// How long rollouts and conditions may take on this 2-core machine.
pub const WAIT: &str = "300s";

/// The running cluster and the host-side services its pods use.
pub struct Cluster {
    /// The node (dropped before its control plane; the reaper cleans up when the process ends).
    pub _node: Node,
    pub plane: ControlPlane,
    /// The host's address on the pod bridge: pods reach the origin and the name server here.
    pub gateway: Ipv4Addr,
    pub origin: Origin,
    pub dns: StubDns,
    kubectl: PathBuf,
    helm: PathBuf,
}

static SHARED: OnceLock<Result<&'static Cluster, String>> = OnceLock::new();

/// The cluster of this test binary, started on first use.
///
/// # Panics
///
/// When the images, the control plane or the node cannot be built or started.
#[allow(clippy::panic, reason = "a test's setup failing fails the test")]
pub fn shared() -> &'static Cluster {
    let started = SHARED.get_or_init(|| {
        // The processes die with the thread that spawned them (pdeathsig) and the stub DNS and
        // origin run on a runtime: both live on a thread that lives as long as the process.
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("cluster".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = tx.send(Err(format!("runtime: {e}")));
                        return;
                    }
                };
                let started = start(&runtime).map_err(|e| format!("{e:#}"));
                let _ = tx.send(started.map(|c| &*Box::leak(Box::new(c))));
                runtime.block_on(std::future::pending::<()>());
            })
            .map_err(|e| format!("thread: {e}"))?;
        rx.recv().map_err(|e| format!("cluster thread: {e}"))?
    });
    match started {
        Ok(cluster) => cluster,
        Err(e) => panic!("the cluster must start: {e}"),
    }
}

/// Held by each case for its whole run: one node on two cores runs one case at a time.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The images, the control plane and its node (started here, outside any runtime: the harness
/// blocks on its own), then the name server and the origin on the bridge address.
fn start(runtime: &tokio::runtime::Runtime) -> anyhow::Result<Cluster> {
    let images = build_images()?;
    let plane = ControlPlane::start_for_node()?;
    let node = Node::start(
        &plane,
        NodeOptions {
            images,
            sandbox_image: PAUSE_IMAGE.to_string(),
        },
    )?;
    let gateway = node.gateway();
    let (dns, origin) = runtime.block_on(async {
        let dns = StubDns::builder()
            .answer("docs.fleet.test", [IpAddr::V4(gateway)])
            .answer("ads.fleet.test", [IpAddr::V4(gateway)])
            .answer("meta.fleet.test", [METADATA.parse::<IpAddr>()?])
            .start_on(SocketAddr::from((gateway, 53)))
            .await?;
        let origin = origin::http1()
            .route("/guide", Reply::html(guide_page()))
            .route("/ad", Reply::html("<p>advert</p>"))
            .run_on(SocketAddr::from((gateway, 80)))
            .await?;
        anyhow::Ok((dns, origin))
    })?;
    Ok(Cluster {
        _node: node,
        plane,
        gateway,
        origin,
        dns,
        kubectl: k8s::tool("FLEETGATE_KUBECTL", "kubectl")?,
        helm: k8s::tool("FLEETGATE_HELM", "helm")?,
    })
}

/// The long page the agents fetch.
pub fn guide_page() -> String {
    format!(
        "<html><head><title>Fleet Docs</title></head><body><main><h1>Fleet docs</h1>{}</main></body></html>",
        (0..400)
            .map(|i| format!("<p>Paragraph {i} about running agents safely.</p>"))
            .collect::<String>()
    )
}

/// `deploy/images/build.sh`: the images as archives for the node's runtime.
fn build_images() -> anyhow::Result<Vec<PathBuf>> {
    let script = workspace().join("deploy/images/build.sh");
    // The gate binary the other suites run (built once with their features), so the image
    // build does not relink it.
    let gate = fleetgate_e2e::gate::gate_binary()?;
    let out = Command::new(&script)
        .env("FLEETGATE_PROXY_BIN", gate)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "{} failed (its output is above)",
        script.display()
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let dir = PathBuf::from(text.lines().last().unwrap_or_default().trim());
    let mut archives = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.to_string_lossy().ends_with(".tar") {
            archives.push(path);
        }
    }
    anyhow::ensure!(
        archives.len() >= 4,
        "{} must hold the four image archives: {archives:?}",
        dir.display()
    );
    Ok(archives)
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

// === impl Cluster ===

impl Cluster {
    /// Run a tool with the cluster's kubeconfig; `(success, stdout + stderr)`.
    pub fn run(&self, tool: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String) {
        let mut child = Command::new(tool)
            .args(args)
            .env("KUBECONFIG", self.plane.kubeconfig())
            .env("HELM_CACHE_HOME", self.plane.dir().join("helm/cache"))
            .env("HELM_CONFIG_HOME", self.plane.dir().join("helm/config"))
            .env("HELM_DATA_HOME", self.plane.dir().join("helm/data"))
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{} must start: {e}", tool.display()));
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            std::io::Write::write_all(&mut pipe, text.as_bytes()).expect("stdin must be written");
        }
        let out = child.wait_with_output().expect("the tool must finish");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    /// kubectl, which must succeed; its stdout and stderr.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.must(&self.kubectl, args, None)
    }

    /// kubectl with `stdin`, which must succeed.
    pub fn kubectl_in(&self, args: &[&str], stdin: &str) -> String {
        self.must(&self.kubectl, args, Some(stdin))
    }

    /// kubectl, whatever it says.
    pub fn kubectl_try(&self, args: &[&str], stdin: Option<&str>) -> (bool, String) {
        self.run(&self.kubectl, args, stdin)
    }

    /// helm, which must succeed.
    pub fn helm(&self, args: &[&str]) -> String {
        self.must(&self.helm, args, None)
    }

    /// helm, whatever it says.
    pub fn helm_try(&self, args: &[&str]) -> (bool, String) {
        self.run(&self.helm, args, None)
    }

    fn must(&self, tool: &Path, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, text) = self.run(tool, args, stdin);
        assert!(
            ok,
            "{} {} must succeed: {text}",
            tool.display(),
            args.join(" ")
        );
        text
    }

    /// `kubectl … -o json`.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["-o", "json"]);
        let text = self.kubectl(&all);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("kubectl must print JSON ({e}): {text}"))
    }

    /// A namespace with the chart installed (both replicas of the controller running from the
    /// locally built image), removed again when the returned guard drops.
    pub fn install(&self, ns: &str, extra: &[&str]) -> Release<'_> {
        self.kubectl(&["create", "namespace", ns]);
        let release = Release {
            cluster: self,
            ns: ns.to_string(),
        };
        let chart = workspace().join("charts/fleetgate").display().to_string();
        let images = format!(
            "image.controller.repository={},image.controller.tag={},image.controller.pullPolicy=Never,\
             image.proxy.repository={},image.proxy.tag={},image.proxy.pullPolicy=Never",
            CONTROLLER_IMAGE.0, CONTROLLER_IMAGE.1, PROXY_IMAGE.0, PROXY_IMAGE.1
        );
        let mut args = vec![
            "install",
            "fleetgate",
            &chart,
            "--namespace",
            ns,
            "--wait",
            "--timeout",
            "5m",
            "--set",
            &images,
        ];
        args.extend(extra);
        let (ok, said) = self.helm_try(&args);
        assert!(
            ok,
            "helm install in {ns} failed: {said}\n{}",
            self.diagnose(ns)
        );
        release
    }

    /// What a failing case prints: the namespace's pods, its recent events, and every
    /// container's last log lines.
    pub fn diagnose(&self, ns: &str) -> String {
        let mut out = String::new();
        for args in [
            vec!["-n", ns, "get", "pods", "-o", "wide"],
            vec!["-n", ns, "get", "events", "--sort-by=.lastTimestamp"],
            vec![
                "-n",
                ns,
                "logs",
                "--all-containers",
                "--prefix",
                "--tail=20",
                "-l",
                "app.kubernetes.io/name=fleetgate",
            ],
            vec![
                "-n",
                ns,
                "logs",
                "--all-containers",
                "--prefix",
                "--tail=20",
                "-l",
                "app=hermes",
            ],
        ] {
            let (_, text) = self.kubectl_try(&args, None);
            out.push_str(&format!("--- kubectl {}\n{text}\n", args.join(" ")));
        }
        out
    }
}

/// An installed release in its own namespace; uninstalled and deleted on drop.
pub struct Release<'a> {
    pub cluster: &'a Cluster,
    pub ns: String,
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        let ns = self.ns.as_str();
        let _ = self.cluster.kubectl_try(
            &[
                "-n",
                ns,
                "delete",
                "deployment",
                "--all",
                "--wait=true",
                "--timeout=120s",
            ],
            None,
        );
        let _ = self
            .cluster
            .helm_try(&["uninstall", "fleetgate", "--namespace", ns, "--wait"]);
        let _ = self
            .cluster
            .kubectl_try(&["delete", "namespace", ns, "--wait=false"], None);
    }
}

/// Polls `check` every 500 ms until it gives `Some`, for at most `within`.
pub fn eventually<T>(within: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::SystemTime::now() + within;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            std::time::SystemTime::now() < deadline,
            "{what}: not within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
