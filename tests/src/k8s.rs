//! A real Kubernetes control plane on loopback, envtest-style: etcd, kube-apiserver and
//! kube-controller-manager of the release `tests/k8s/` pins, built from the Go module proxy by
//! `tests/k8s/build.sh` into a machine-level cache and started here with fresh certificates.
//!
//! - A CA, a serving certificate for `127.0.0.1`, an admin client certificate
//!   (`O=system:masters`), a client certificate for kube-controller-manager and the
//!   service-account signing key, all generated per start (rcgen).
//! - etcd and kube-apiserver on free loopback ports, `--authorization-mode=Node,RBAC`, the
//!   release's default admission plugins (mutating and validating webhooks,
//!   ValidatingAdmissionPolicy, ServiceAccount, PodSecurity, ...); `/readyz` polled.
//! - kube-controller-manager for what only it does: garbage collection, service accounts,
//!   deployments → replica sets → pods. No kubelet and no scheduler: pods stay `Pending`.
//! - [`ControlPlane::start_for_node`] prepares one for a real node ([`node::Node`]): the API
//!   server also listens where pods reach it, kube-scheduler runs, and the node lifecycle
//!   controller clears a Ready node's `not-ready` taint.
//! - The API server's audit log ([`ControlPlane::audit_log`]) records, at `Metadata` level,
//!   every request a ServiceAccount makes: what a controller running as one really used.
//! - A component can be stopped and started again with its own arguments
//!   ([`ControlPlane::stop`], [`ControlPlane::start_again`]), to show what an outage does.
//! - Every process runs in its own process group under `setpriv --pdeathsig KILL`, so it dies
//!   with the thread that started it; [`ControlPlane`]'s `Drop` kills the groups; a detached
//!   reaper removes the temporary folder once the test process is gone (first running the
//!   scripts in its `reap.d/`, which a node uses to leave the machine as it found it).
//!   [`shared`] starts one control plane per test binary from a thread that lives as long as
//!   the process.
//!
//! A binary that is missing is built (`tests/k8s/build.sh`); a build that fails is an error
//! carrying go's own output, never a skip. `tests/run k8s-up` starts one for a person.

use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, mpsc};
use std::time::Duration;

use anyhow::{Context as _, bail};
use tempfile::TempDir;

pub mod node;

/// Environment variable naming the folder of prebuilt control-plane binaries (`tests/run`
/// exports the build's cache folder); unset, [`control_plane_bin`] runs `tests/k8s/build.sh`.
pub const K8S_BIN_ENV: &str = "FLEETGATE_K8S_BIN";
/// The Kubernetes release `tests/k8s/go.mod` pins.
pub const K8S_VERSION: &str = "v1.37.2";
/// The service network the API server allocates ClusterIPs from.
pub const SERVICE_CIDR: &str = "10.96.0.0/16";
/// How long etcd and the API server may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// A running control plane. Dropping it kills every process and removes its folder.
#[derive(Debug)]
pub struct ControlPlane {
    // Killed (in reverse start order) before the folder goes.
    processes: Mutex<Vec<Component>>,
    // The thread that spawns the processes of the shared control plane: they die with the
    // thread that spawned them (pdeathsig), so a restart must be spawned there too. `None`
    // for a control plane owned by its caller (spawned from the caller's thread).
    home: Mutex<Option<mpsc::Sender<Job>>>,
    api_url: String,
    kubeconfig: PathBuf,
    bin: PathBuf,
    // What a node needs from this control plane; `None` unless started for one.
    node: Option<NodeAccess>,
    dir: TempDir,
}

/// What [`ControlPlane::start_for_node`] prepared for the node: the kubelet's credentials and
/// the port pods reach the API server on (the gateway address, [`node::GATEWAY`]).
#[derive(Debug, Clone)]
struct NodeAccess {
    api_port: u16,
    kubelet_cert: PathBuf,
    kubelet_key: PathBuf,
}

/// One control-plane process, in its own process group, with its log file and the
/// arguments it was started with (to start it again).
#[derive(Debug)]
struct Component {
    name: &'static str,
    args: Vec<String>,
    child: Child,
    log: PathBuf,
}

/// Work run on the shared control plane's own thread.
type Job = Box<dyn FnOnce() + Send>;

/// Fresh certificates of one control plane, as files in its folder.
#[derive(Debug)]
struct Pki {
    ca: PathBuf,
    serving_cert: PathBuf,
    serving_key: PathBuf,
    admin_cert: PathBuf,
    admin_key: PathBuf,
    kcm_cert: PathBuf,
    kcm_key: PathBuf,
    sa_key: PathBuf,
    sa_pub: PathBuf,
    // Only for a control plane started for a node.
    node: Option<NodePki>,
}

/// The certificates a node adds: kube-scheduler's and the kubelet's client certificates.
#[derive(Debug)]
struct NodePki {
    scheduler_cert: PathBuf,
    scheduler_key: PathBuf,
    kubelet_cert: PathBuf,
    kubelet_key: PathBuf,
}

static SHARED: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
static NAMESPACES: AtomicUsize = AtomicUsize::new(0);

/// The control plane of this test binary, started on first use and shared by its tests (one
/// namespace per test: [`ControlPlane::namespace`]).
///
/// # Panics
///
/// When it cannot be built or started; the message carries the build's or the process's own
/// output.
#[allow(clippy::panic, reason = "a test's setup failing fails the test")]
pub fn shared() -> &'static ControlPlane {
    let started = SHARED.get_or_init(|| {
        // The processes die with the thread that spawned them (pdeathsig), so they are
        // spawned from one that lives until the process exits, not from a test's thread.
        let (tx, rx) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("k8s-control-plane".into())
            .spawn(move || {
                let (jobs, queue) = mpsc::channel::<Job>();
                let started = ControlPlane::start().map_err(|e| format!("{e:#}"));
                if let Ok(plane) = &started {
                    *lock(&plane.home) = Some(jobs);
                }
                let _ = tx.send(started);
                // Restarts are spawned here, so they too live as long as the process.
                while let Ok(job) = queue.recv() {
                    job();
                }
                loop {
                    std::thread::park();
                }
            });
        match spawned {
            Ok(_) => rx
                .recv()
                .unwrap_or_else(|_| Err("the control-plane thread ended".into())),
            Err(e) => Err(format!("failed to start the control-plane thread: {e}")),
        }
    });
    match started {
        Ok(plane) => plane,
        Err(message) => panic!("failed to start the Kubernetes control plane: {message}"),
    }
}

/// The folder holding `kube-apiserver`, `kube-controller-manager`, `kube-scheduler` and
/// `etcd`: `$FLEETGATE_K8S_BIN`, else what `tests/k8s/build.sh` prints (building them first
/// when the machine's cache lacks them).
pub fn control_plane_bin() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os(K8S_BIN_ENV).filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        for bin in ["etcd", "kube-apiserver", "kube-controller-manager"] {
            if !dir.join(bin).is_file() {
                bail!(
                    "{K8S_BIN_ENV}={} has no {bin} (run tests/k8s/build.sh)",
                    dir.display()
                );
            }
        }
        return Ok(dir);
    }
    build_sh(&[])
}

/// Run `tests/k8s/build.sh args…` (which builds only what the machine's cache lacks) and
/// return the folder it prints last.
fn build_sh(args: &[&str]) -> anyhow::Result<PathBuf> {
    let script = workspace().join("tests/k8s/build.sh");
    let out = Command::new(&script)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("failed to run {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "{} failed ({}):\n{}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout
        .lines()
        .last()
        .map(PathBuf::from)
        .context("build.sh printed no folder")?;
    Ok(dir)
}

/// A kubectl, helm or helm v3 binary: `$<env>` if set, else `.tools/k8s/bin/<name>` (what
/// `tests/run k8s-tools` installs).
pub fn tool(env: &str, name: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::var_os(env).filter(|v| !v.is_empty()).map_or_else(
        || workspace().join(".tools/k8s/bin").join(name),
        PathBuf::from,
    );
    if !path.is_file() {
        bail!(
            "{name} not found at {} (set {env}, or run `tests/run k8s-tools`)",
            path.display()
        );
    }
    Ok(path)
}

/// The workspace root.
pub fn workspace() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// A free TCP port on 127.0.0.1 (bound, read and released).
fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

// === impl ControlPlane ===

impl ControlPlane {
    /// Build the binaries if missing, then start etcd, kube-apiserver and
    /// kube-controller-manager and wait until the API server is ready and the `default`
    /// namespace has its ServiceAccount.
    pub fn start() -> anyhow::Result<Self> {
        Self::start_with(false)
    }

    /// [`ControlPlane::start`] for a control plane that a real node ([`node::Node::start`])
    /// joins. What changes:
    ///
    /// - kube-apiserver listens on every address (`0.0.0.0`, its random port, client
    ///   certificates or tokens required), so pods reach it on the node's gateway address
    ///   ([`node::GATEWAY`], also in its serving certificate), which it advertises; the `lease`
    ///   endpoint reconciler gives the `kubernetes` Service that endpoint; it calls webhooks
    ///   on their endpoints' pod IPs (`--enable-aggregator-routing`), and reaches kubelets on
    ///   their `InternalIP` with the admin client certificate (`pods/log`, `exec`).
    /// - kube-scheduler runs (client certificate `CN=system:kube-scheduler`).
    /// - kube-controller-manager also runs the node lifecycle controller, which clears a
    ///   Ready node's `node.kubernetes.io/not-ready` taint.
    /// - The kubelet's client certificate (`CN=system:node:<name>`, `O=system:nodes`, for the
    ///   Node authorizer) is issued with the others.
    pub fn start_for_node() -> anyhow::Result<Self> {
        Self::start_with(true)
    }

    fn start_with(for_node: bool) -> anyhow::Result<Self> {
        let bin = control_plane_bin()?;
        let dir = tempfile::Builder::new()
            .prefix("fleetgate-k8s-")
            .tempdir()?;
        spawn_reaper(dir.path())?;
        let pki = Pki::write(dir.path(), for_node)?;
        let mut plane = Self {
            processes: Mutex::new(Vec::new()),
            home: Mutex::new(None),
            api_url: String::new(),
            kubeconfig: dir.path().join("admin.kubeconfig"),
            bin,
            node: None,
            dir,
        };
        let etcd_port = free_port()?;
        plane.start_etcd(etcd_port)?;
        let api_port = free_port()?;
        plane.api_url = format!("https://127.0.0.1:{api_port}");
        write_kubeconfig(
            &plane.kubeconfig,
            &plane.api_url,
            &pki.ca,
            &ClientCredential::Certificate(&pki.admin_cert, &pki.admin_key),
        )?;
        plane.start_apiserver(&pki, etcd_port, api_port)?;
        plane.wait_ready()?;
        let kcm_kubeconfig = plane.dir.path().join("kube-controller-manager.kubeconfig");
        write_kubeconfig(
            &kcm_kubeconfig,
            &plane.api_url,
            &pki.ca,
            &ClientCredential::Certificate(&pki.kcm_cert, &pki.kcm_key),
        )?;
        plane.start_controller_manager(&pki, &kcm_kubeconfig)?;
        if let Some(node) = &pki.node {
            let scheduler_kubeconfig = plane.dir.path().join("kube-scheduler.kubeconfig");
            write_kubeconfig(
                &scheduler_kubeconfig,
                &plane.api_url,
                &pki.ca,
                &ClientCredential::Certificate(&node.scheduler_cert, &node.scheduler_key),
            )?;
            plane.start_scheduler(&scheduler_kubeconfig)?;
            plane.node = Some(NodeAccess {
                api_port,
                kubelet_cert: node.kubelet_cert.clone(),
                kubelet_key: node.kubelet_key.clone(),
            });
        }
        plane.wait_for_default_service_account()?;
        Ok(plane)
    }

    /// The admin kubeconfig (client certificate in `system:masters`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `https://127.0.0.1:<port>`.
    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// The control plane's folder (certificates, kubeconfigs, logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The folder the binaries were run from.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// The CA that signed the API server's serving certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// The API server's audit log: one JSON event per line for every request made by a
    /// ServiceAccount (`Metadata` level: user, verb, object reference, response code).
    pub fn audit_log(&self) -> PathBuf {
        self.dir.path().join("audit.log")
    }

    /// Stop component `name` (`etcd`, `kube-apiserver`, `kube-controller-manager`,
    /// `kube-scheduler`) with SIGKILL, as a crashed or partitioned process would go.
    pub fn stop(&self, name: &str) -> anyhow::Result<()> {
        let mut processes = lock(&self.processes);
        let c = processes
            .iter_mut()
            .find(|c| c.name == name)
            .with_context(|| format!("no component {name}"))?;
        let _ = nix_kill_group(c.child.id());
        c.child.wait()?;
        Ok(())
    }

    /// Start component `name` again with the arguments it was first started with (stopping
    /// it first if it still runs); its log continues in the same file. Does not wait for it
    /// to be ready: poll [`ControlPlane::is_ready`].
    pub fn start_again(&self, name: &str) -> anyhow::Result<()> {
        self.stop(name)?;
        let (args, log) = {
            let processes = lock(&self.processes);
            let c = processes
                .iter()
                .find(|c| c.name == name)
                .with_context(|| format!("no component {name}"))?;
            (c.args.clone(), c.log.clone())
        };
        let program = self.bin.join(name);
        let home = lock(&self.home).clone();
        let child = match home {
            Some(jobs) => {
                let (tx, rx) = mpsc::channel();
                jobs.send(Box::new(move || {
                    let _ = tx.send(spawn_component(&program, &args, &log, true));
                }))
                .map_err(|_| anyhow::anyhow!("the control plane's thread is gone"))?;
                rx.recv()
                    .map_err(|_| anyhow::anyhow!("the control plane's thread is gone"))??
            }
            None => spawn_component(&program, &args, &log, true)?,
        };
        let mut processes = lock(&self.processes);
        if let Some(c) = processes.iter_mut().find(|c| c.name == name) {
            c.child = child;
        }
        Ok(())
    }

    /// Whether the API server answers `/readyz` with `ok` now.
    pub async fn is_ready(&self) -> bool {
        let answer = async {
            let client = client_for(&self.kubeconfig).await?;
            let req = http::Request::get("/readyz").body(Vec::new())?;
            anyhow::Ok(client.request_text(req).await?)
        };
        matches!(answer.await, Ok(text) if text.trim() == "ok")
    }

    /// A kube client with admin rights, for the current tokio runtime.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        client_for(&self.kubeconfig).await
    }

    /// A kubeconfig at `path` that authenticates with a bearer `token` (a ServiceAccount's).
    pub fn token_kubeconfig(&self, path: &Path, token: &str) -> anyhow::Result<()> {
        write_kubeconfig(
            path,
            &self.api_url,
            &self.ca_file(),
            &ClientCredential::Token(token),
        )
    }

    /// A fresh namespace `<prefix>-<n>` whose `default` ServiceAccount exists (pods can be
    /// created in it at once).
    pub async fn namespace(&self, client: &kube::Client, prefix: &str) -> anyhow::Result<String> {
        use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
        let n = NAMESPACES.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{n}");
        let api: kube::Api<Namespace> = kube::Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name }
        }))?;
        api.create(&kube::api::PostParams::default(), &ns)
            .await
            .with_context(|| format!("failed to create namespace {name}"))?;
        let sas: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), &name);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while sas.get_opt("default").await?.is_none() {
            if tokio::time::Instant::now() > deadline {
                bail!("kube-controller-manager did not create {name}/default within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(name)
    }

    /// The last `lines` lines of every component's log, for a failing test's message.
    pub fn logs_tail(&self, lines: usize) -> String {
        lock(&self.processes)
            .iter()
            .map(|c| {
                let text = std::fs::read_to_string(&c.log).unwrap_or_default();
                let all: Vec<&str> = text.lines().collect();
                format!(
                    "--- {} ({})\n{}",
                    c.name,
                    c.log.display(),
                    all[all.len().saturating_sub(lines)..].join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn start_etcd(&mut self, port: u16) -> anyhow::Result<()> {
        let peer = free_port()?;
        let client_url = format!("http://127.0.0.1:{port}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let data = self.dir.path().join("etcd");
        let args = vec![
            format!("--data-dir={}", data.display()),
            "--name=default".into(),
            format!("--listen-client-urls={client_url}"),
            format!("--advertise-client-urls={client_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=default={peer_url}"),
            // A test cluster's data lives as long as the test: no fsync, far faster.
            "--unsafe-no-fsync".into(),
            "--log-level=warn".into(),
        ];
        self.spawn("etcd", &args)
    }

    fn start_apiserver(&mut self, pki: &Pki, etcd_port: u16, api_port: u16) -> anyhow::Result<()> {
        let p = |path: &Path| path.display().to_string();
        let mut args = vec![
            format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
            format!("--secure-port={api_port}"),
            format!("--tls-cert-file={}", p(&pki.serving_cert)),
            format!("--tls-private-key-file={}", p(&pki.serving_key)),
            format!("--client-ca-file={}", p(&pki.ca)),
            "--authorization-mode=Node,RBAC".into(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", p(&pki.sa_pub)),
            format!("--service-account-signing-key-file={}", p(&pki.sa_key)),
            format!("--service-cluster-ip-range={SERVICE_CIDR}"),
            "--allow-privileged=true".into(),
            format!("--cert-dir={}", p(&self.dir.path().join("apiserver-certs"))),
            format!("--audit-policy-file={}", p(&self.write_audit_policy()?)),
            format!("--audit-log-path={}", p(&self.audit_log())),
            // Written as each request completes, so a test reads what just happened.
            "--audit-log-mode=blocking".into(),
            "--audit-log-maxsize=0".into(),
        ];
        if pki.node.is_some() {
            args.extend([
                // Pods reach it on the node's gateway address; the port is random and every
                // request must carry a client certificate or a token.
                "--bind-address=0.0.0.0".into(),
                format!("--advertise-address={}", node::GATEWAY),
                // The `kubernetes` Service's endpoint: the advertised address.
                "--endpoint-reconciler-type=lease".into(),
                // Webhooks behind a Service are called on the endpoint's pod IP: no kube-proxy.
                "--enable-aggregator-routing=true".into(),
                // `pods/log` and `exec` go to the kubelet as an admin.
                format!("--kubelet-client-certificate={}", p(&pki.admin_cert)),
                format!("--kubelet-client-key={}", p(&pki.admin_key)),
                "--kubelet-preferred-address-types=InternalIP".into(),
            ]);
        } else {
            args.extend([
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                // A loopback address is not a valid endpoint of the `kubernetes` Service.
                "--endpoint-reconciler-type=none".into(),
            ]);
        }
        self.spawn("kube-apiserver", &args)
    }

    /// The audit policy: every request by a ServiceAccount at `Metadata` level (who, which
    /// verb on what, the response code), nothing else.
    fn write_audit_policy(&self) -> anyhow::Result<PathBuf> {
        let path = self.dir.path().join("audit-policy.json");
        let policy = serde_json::json!({
            "apiVersion": "audit.k8s.io/v1",
            "kind": "Policy",
            "omitStages": ["RequestReceived"],
            "rules": [
                { "level": "Metadata", "userGroups": ["system:serviceaccounts"] },
                { "level": "None" },
            ],
        });
        std::fs::write(&path, policy.to_string())?;
        Ok(path)
    }

    fn start_controller_manager(&mut self, pki: &Pki, kubeconfig: &Path) -> anyhow::Result<()> {
        let p = |path: &Path| path.display().to_string();
        // Without a node nothing has nodes or volumes; with one, the node lifecycle controller
        // clears the `not-ready` taint the kubelet registers its Node with.
        let controllers = if pki.node.is_some() {
            "*,-node-ipam-controller,-persistentvolume-attach-detach-controller,-persistentvolume-binder-controller,-persistentvolume-expander-controller"
        } else {
            "*,-node-ipam-controller,-node-lifecycle-controller,-persistentvolume-attach-detach-controller,-persistentvolume-binder-controller,-persistentvolume-expander-controller"
        };
        let args = vec![
            format!("--kubeconfig={}", p(kubeconfig)),
            // Each controller acts as its own ServiceAccount, as kubeadm runs it.
            "--use-service-account-credentials=true".into(),
            format!("--service-account-private-key-file={}", p(&pki.sa_key)),
            format!("--root-ca-file={}", p(&pki.ca)),
            "--leader-elect=false".into(),
            // No HTTPS listener: nothing scrapes it, and a fixed port would collide between
            // test binaries running at once.
            "--secure-port=0".into(),
            format!("--controllers={controllers}"),
        ];
        self.spawn("kube-controller-manager", &args)
    }

    fn start_scheduler(&mut self, kubeconfig: &Path) -> anyhow::Result<()> {
        let p = |path: &Path| path.display().to_string();
        let args = vec![
            format!("--kubeconfig={}", p(kubeconfig)),
            "--leader-elect=false".into(),
            // No HTTPS listener, as for kube-controller-manager.
            "--secure-port=0".into(),
        ];
        self.spawn("kube-scheduler", &args)
    }

    fn spawn(&mut self, name: &'static str, args: &[String]) -> anyhow::Result<()> {
        let log = self.dir.path().join(format!("{name}.log"));
        let child = spawn_component(&self.bin.join(name), args, &log, false)?;
        lock(&self.processes).push(Component {
            name,
            args: args.to_vec(),
            child,
            log,
        });
        Ok(())
    }

    /// Poll `/readyz` until it answers `ok`, failing early when a process exits.
    fn wait_ready(&mut self) -> anyhow::Result<()> {
        self.wait_until("the API server was not ready", |kubeconfig| async move {
            let client = client_for(&kubeconfig).await?;
            let req = http::Request::get("/readyz").body(Vec::new())?;
            Ok(client.request_text(req).await?.trim() == "ok")
        })
    }

    fn wait_for_default_service_account(&mut self) -> anyhow::Result<()> {
        self.wait_until(
            "kube-controller-manager did not create default/default",
            |kubeconfig| async move {
                let client = client_for(&kubeconfig).await?;
                let sas: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
                    kube::Api::namespaced(client, "default");
                Ok(sas.get_opt("default").await?.is_some())
            },
        )
    }

    /// Run `check` (given the admin kubeconfig) every 200 ms until it answers `true`, failing
    /// with `failure` and the components' logs after [`READY_TIMEOUT`], or as soon as a
    /// process exits.
    fn wait_until<F>(&mut self, failure: &str, check: impl Fn(PathBuf) -> F) -> anyhow::Result<()>
    where
        F: std::future::Future<Output = anyhow::Result<bool>>,
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let started = std::time::SystemTime::now();
        loop {
            self.check_alive()?;
            let answer = runtime.block_on(check(self.kubeconfig.clone()));
            match answer {
                Ok(true) => return Ok(()),
                _ if started.elapsed().unwrap_or_default() > READY_TIMEOUT => bail!(
                    "{failure} within {READY_TIMEOUT:?} ({answer:?}):\n{}",
                    self.logs_tail(40)
                ),
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    fn check_alive(&mut self) -> anyhow::Result<()> {
        for c in lock(&self.processes).iter_mut() {
            if let Some(status) = c.child.try_wait()? {
                let log = std::fs::read_to_string(&c.log).unwrap_or_default();
                let lines: Vec<&str> = log.lines().collect();
                bail!(
                    "{} exited ({status}):\n{}",
                    c.name,
                    lines[lines.len().saturating_sub(60)..].join("\n")
                );
            }
        }
        Ok(())
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        for c in lock(&self.processes).iter_mut().rev() {
            let _ = nix_kill_group(c.child.id());
            let _ = c.child.wait();
        }
    }
}

/// Start `program args…` in its own process group under `setpriv --pdeathsig KILL` (it dies
/// with the calling thread), its output to `log` (appended to when `append`).
fn spawn_component(
    program: &Path,
    args: &[String],
    log: &Path,
    append: bool,
) -> anyhow::Result<Child> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(log)?;
    let err = out.try_clone()?;
    Command::new("setpriv")
        .arg("--pdeathsig=KILL")
        .arg("--")
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .with_context(|| {
            format!(
                "failed to start {} (setpriv from util-linux)",
                program.display()
            )
        })
}

/// A mutex's guard, whether or not a panicking test poisoned it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// SIGKILL to the process group `pgid` (each component leads its own).
fn nix_kill_group(pgid: u32) -> std::io::Result<()> {
    let status = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("kill -{pgid}: {status}")))
    }
}

/// A detached shell that removes `dir` once this process is gone, however it ended (the
/// shared control plane lives in a static that is never dropped).
fn spawn_reaper(dir: &Path) -> anyhow::Result<()> {
    Command::new("sh")
        .args([
            "-c",
            r#"while kill -0 "$0" 2>/dev/null; do sleep 1; done
for f in "$1"/reap.d/*.sh; do [ -f "$f" ] && sh "$f"; done
rm -rf --one-file-system "$1""#,
        ])
        .arg(std::process::id().to_string())
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .context("failed to start the folder reaper")?;
    Ok(())
}

/// A kube client for a kubeconfig file.
pub async fn client_for(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let file = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let config =
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await?;
    Ok(kube::Client::try_from(config)?)
}

/// How a kubeconfig's user authenticates.
#[derive(Debug)]
enum ClientCredential<'a> {
    /// A client certificate and its key (files).
    Certificate(&'a Path, &'a Path),
    /// A bearer token.
    Token(&'a str),
}

fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca: &Path,
    credential: &ClientCredential<'_>,
) -> anyhow::Result<()> {
    let user = match credential {
        ClientCredential::Certificate(cert, key) => serde_json::json!({
            "client-certificate": cert.display().to_string(),
            "client-key": key.display().to_string(),
        }),
        ClientCredential::Token(token) => serde_json::json!({ "token": token }),
    };
    // JSON is YAML: kubectl, helm and kube-rs all read it.
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "fleetgate-test", "cluster": {
            "server": server,
            "certificate-authority": ca.display().to_string(),
        }}],
        "users": [{ "name": "user", "user": user }],
        "contexts": [{ "name": "fleetgate-test", "context": {
            "cluster": "fleetgate-test", "user": "user", "namespace": "default",
        }}],
        "current-context": "fleetgate-test",
    });
    std::fs::write(path, serde_json::to_string_pretty(&config)?)
        .with_context(|| format!("failed to write {}", path.display()))?;
    Ok(())
}

// === impl Pki ===

impl Pki {
    fn write(dir: &Path, for_node: bool) -> anyhow::Result<Self> {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
            IsCa, KeyPair, SanType,
        };
        let file = |name: &str, text: &str| -> anyhow::Result<PathBuf> {
            let path = dir.join(name);
            std::fs::write(&path, text)?;
            Ok(path)
        };
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "fleetgate-test-kubernetes-ca");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
        let ca_path = file("ca.crt", &ca.pem())?;

        let mut serving = CertificateParams::new(vec![
            "localhost".to_string(),
            "kubernetes.default.svc".to_string(),
        ])?;
        serving
            .subject_alt_names
            .push(SanType::IpAddress(Ipv4Addr::LOCALHOST.into()));
        serving
            .subject_alt_names
            .push(SanType::IpAddress(Ipv4Addr::new(10, 96, 0, 1).into()));
        if for_node {
            serving
                .subject_alt_names
                .push(SanType::IpAddress(node::GATEWAY.into()));
        }
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        let serving_key = KeyPair::generate()?;
        let serving_cert = serving.signed_by(&serving_key, &ca)?;

        let client = |cn: &str, org: Option<&str>| -> anyhow::Result<(String, String)> {
            let mut params = CertificateParams::new(Vec::<String>::new())?;
            params.distinguished_name.push(DnType::CommonName, cn);
            if let Some(org) = org {
                params
                    .distinguished_name
                    .push(DnType::OrganizationName, org);
            }
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            let key = KeyPair::generate()?;
            let cert = params.signed_by(&key, &ca)?;
            Ok((cert.pem(), key.serialize_pem()))
        };
        let (admin_cert, admin_key) = client("fleetgate-test-admin", Some("system:masters"))?;
        let (kcm_cert, kcm_key) = client("system:kube-controller-manager", None)?;
        let sa = KeyPair::generate()?;
        let node = if for_node {
            let (scheduler_cert, scheduler_key) = client("system:kube-scheduler", None)?;
            let (kubelet_cert, kubelet_key) = client(
                &format!("system:node:{}", node::NODE_NAME),
                Some("system:nodes"),
            )?;
            Some(NodePki {
                scheduler_cert: file("kube-scheduler.crt", &scheduler_cert)?,
                scheduler_key: file("kube-scheduler.key", &scheduler_key)?,
                kubelet_cert: file("kubelet.crt", &kubelet_cert)?,
                kubelet_key: file("kubelet.key", &kubelet_key)?,
            })
        } else {
            None
        };
        Ok(Self {
            ca: ca_path,
            serving_cert: file("apiserver.crt", &serving_cert.pem())?,
            serving_key: file("apiserver.key", &serving_key.serialize_pem())?,
            admin_cert: file("admin.crt", &admin_cert)?,
            admin_key: file("admin.key", &admin_key)?,
            kcm_cert: file("kube-controller-manager.crt", &kcm_cert)?,
            kcm_key: file("kube-controller-manager.key", &kcm_key)?,
            sa_key: file("sa.key", &sa.serialize_pem())?,
            sa_pub: file("sa.pub", &sa.public_key_pem())?,
            node,
        })
    }
}
