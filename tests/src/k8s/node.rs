//! A real node beside the control plane: kube-scheduler places pods on it, and a kubelet runs
//! them with containerd and runc, on a CNI bridge. Pods really run, get an IP of
//! [`POD_CIDR`], reach processes of the host on [`GATEWAY`] and the API server through the
//! `kubernetes` Service.
//!
//! [`Node::start`] joins a control plane started with [`ControlPlane::start_for_node`]:
//!
//! - The bridge [`BRIDGE`] with the gateway address [`GATEWAY`]/24, created before anything
//!   else (the kubelet serves on that address, and the API server's certificate names it).
//! - A `nat` chain [`SERVICE_CHAIN`], jumped to from `PREROUTING`, that DNATs the `kubernetes`
//!   Service (`10.96.0.1:443`) to the API server on the gateway: the one Service pods need,
//!   without kube-proxy. Webhooks behind a Service are called on their pod IPs
//!   (`--enable-aggregator-routing`), so they need no Service routing either.
//! - containerd (Debian's 1.6) with its own root, state, sockets and config in the folder: the
//!   CRI plugin with the given sandbox image, overlayfs, runc (`SystemdCgroup = false`, its
//!   state in the folder), network namespaces mounted under its state folder, OOM score
//!   adjustments capped at its own (this machine refuses negative ones), and one CNI network:
//!   `bridge` (no masquerade: nothing leaves the machine) with `host-local` addresses of
//!   [`POD_CIDR`] (its state in the folder) and `portmap` (a `hostPort` is published on every
//!   address of the host). The CRI plugin of 1.6 puts no rlimits in a container's spec, so
//!   containers inherit containerd's own (this process's), never an `RLIMIT_NOFILE` this
//!   machine refuses. The image archives are imported with `ctr images import`.
//! - The kubelet, configured by file: cgroup v1 allowed (`failCgroupV1: false`), the
//!   `cgroupfs` driver, its pods' cgroups under `<this process's memory cgroup>/fleetgate-node`
//!   in every hierarchy (so pods count against the test's own memory cgroup), client
//!   certificates of the control plane's CA and webhook authorization on its API, no
//!   read-only port, eviction thresholds near zero (the disk is shared), its root, pod logs
//!   and `resolv.conf` in the folder, the client certificate `CN=system:node:fleetgate-node`.
//!   [`Node::start`] waits until the Node is `Ready` and its `not-ready` taint is gone.
//!
//! Every process runs like the control plane's: its own process group, `setpriv --pdeathsig
//! KILL`, a log in the folder. The bridge and the pod range are machine-wide names, so one
//! node runs at a time: a lock file ([`LOCK_FILE`]) is held while a node lives and while its
//! clean-up runs.
//!
//! Clean-up is one script, `node/cleanup.sh`, run by [`Node`]'s `Drop` and — for a node that is
//! never dropped, like [`shared`]'s — by the control plane's reaper once the test process is
//! gone (from `reap.d/`): it kills the kubelet, containerd and the shims containerd started
//! (they are reparented, so they outlive it), kills and deletes every container of the
//! folder's runc state, unmounts everything under the folder (overlay roots, shm, network
//! namespaces, the kubelet's own bind mount), deletes the bridge and whatever veth is left on
//! it, the `nat` chain, portmap's hostPort rules of the node's pods (and portmap's shared
//! `CNI-HOSTPORT-*` chains when the node's pods made them), the kubelet's own chains
//! (`KUBE-FIREWALL`, its canaries and hint) when this node's kubelet made them, the pods'
//! cgroups (and the folders
//! above them it created) and the CNI result cache entries of the node's sandboxes. A test run
//! leaves no mount, interface, rule or cgroup behind.
//!
//! Needs root, `containerd`, `ctr`, `runc`, the CNI plugins in `/usr/lib/cni`, `ip` and
//! `iptables` (Debian: containerd runc containernetworking-plugins iproute2 iptables):
//! [`missing`] names what is absent.

use std::fs::File;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

use anyhow::{Context as _, bail};

use super::{
    Component, ControlPlane, Job, build_sh, client_for, free_port, lock, nix_kill_group,
    spawn_component, write_kubeconfig,
};

/// The Node's name (the kubelet's client certificate is `CN=system:node:fleetgate-node`).
pub const NODE_NAME: &str = "fleetgate-node";
/// The pods' addresses (the CNI `host-local` range): inside this machine only.
pub const POD_CIDR: &str = "10.244.0.0/24";
/// The bridge's address: pods reach processes of the host on it (an origin a test runs for
/// pods listens here or on `0.0.0.0`), and the API server too.
pub const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 244, 0, 1);
/// The bridge pods are plugged into.
pub const BRIDGE: &str = "fgnode0";
/// The `nat` chain that routes the `kubernetes` Service to the API server.
pub const SERVICE_CHAIN: &str = "FLEETGATE-NODE";
/// The `kubernetes` Service's ClusterIP (the first address of [`super::SERVICE_CIDR`]).
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
/// Held while a node lives and while its clean-up runs: one node per machine at a time.
pub const LOCK_FILE: &str = "/run/lock/fleetgate-node.lock";
/// Environment variable naming the folder of prebuilt node binaries (`kubelet`,
/// `probe.oci.tar`); unset, [`node_bin`] runs `tests/k8s/build.sh --node`.
pub const NODE_BIN_ENV: &str = "FLEETGATE_K8S_NODE_BIN";
/// Set (by `tests/run` as root), a missing tool fails the node's tests instead of skipping them.
pub const REQUIRE_ENV: &str = "FLEETGATE_REQUIRE_K8S_NODE";
/// The test image `tests/k8s/build.sh --node` packs (`probe.oci.tar`): one static program,
/// `/probe`, whose default argument `pause` makes it a sandbox image too.
pub const PROBE_IMAGE: &str = "localhost/fleetgate-node-probe:1";
/// How long [`Node::start`] waits for another node to go (it holds [`LOCK_FILE`]).
const LOCK_TIMEOUT: Duration = Duration::from_secs(600);
/// How long the kubelet may take to register a Ready, schedulable Node.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// The cgroup (relative to this process's memory cgroup) the pods' cgroups go under.
const CGROUP_LEAF: &str = "fleetgate-node";
const CONTAINERD: &str = "/usr/bin/containerd";
const CNI_BIN: &str = "/usr/lib/cni";
/// The CNI network's name (portmap's rules name it in their comments).
const CNI_NETWORK: &str = "fleetgate-node";

/// What a node runs.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// OCI (or Docker) image archives imported into containerd's `k8s.io` namespace before
    /// the kubelet starts; pods use them with `imagePullPolicy: Never` (there is no registry).
    pub images: Vec<PathBuf>,
    /// The pod sandbox ("pause") image, one of `images`.
    pub sandbox_image: String,
}

/// A running node. Dropping it stops its processes and removes what it added to the machine
/// (see the module's documentation); drop it before its control plane.
#[derive(Debug)]
pub struct Node {
    // Killed (kubelet first) before the clean-up script runs.
    processes: Vec<Component>,
    dir: PathBuf,
    cleanup: PathBuf,
    reap_hook: PathBuf,
    containerd_socket: PathBuf,
    pod_logs: PathBuf,
    bin: PathBuf,
    // Released last.
    _lock: File,
}

/// A control plane and its node, shared by a test binary ([`shared`]).
#[derive(Debug)]
pub struct Cluster {
    /// The node (dropped first).
    pub node: Node,
    /// The control plane it joined.
    pub plane: ControlPlane,
}

static SHARED: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// The node-backed control plane of this test binary (started with the probe image,
/// [`NodeOptions::probe`]), started on first use from a thread that lives as long as the
/// process; the reaper cleans the node up once the process is gone.
///
/// # Panics
///
/// When it cannot be built or started; the message carries the processes' own output.
#[allow(clippy::panic, reason = "a test's setup failing fails the test")]
pub fn shared() -> &'static Cluster {
    let started = SHARED.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("k8s-node".into())
            .spawn(move || {
                let (jobs, queue) = mpsc::channel::<Job>();
                let started = (|| {
                    let plane = ControlPlane::start_for_node()?;
                    let node = Node::start(&plane, NodeOptions::probe()?)?;
                    anyhow::Ok(Cluster { node, plane })
                })()
                .map_err(|e| format!("{e:#}"));
                if let Ok(cluster) = &started {
                    *lock(&cluster.plane.home) = Some(jobs);
                }
                let _ = tx.send(started);
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
                .unwrap_or_else(|_| Err("the node's thread ended".into())),
            Err(e) => Err(format!("failed to start the node's thread: {e}")),
        }
    });
    match started {
        Ok(cluster) => cluster,
        Err(message) => panic!("failed to start the Kubernetes node: {message}"),
    }
}

/// The folder holding `kubelet` and `probe.oci.tar`: `$FLEETGATE_K8S_NODE_BIN`, else what
/// `tests/k8s/build.sh --node` prints (building them first when the machine's cache lacks
/// them).
pub fn node_bin() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os(NODE_BIN_ENV).filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        for bin in ["kubelet", "probe.oci.tar"] {
            if !dir.join(bin).is_file() {
                bail!(
                    "{NODE_BIN_ENV}={} has no {bin} (run tests/k8s/build.sh --node)",
                    dir.display()
                );
            }
        }
        return Ok(dir);
    }
    build_sh(&["--node"])
}

/// What a node needs and this machine lacks (empty when it can run one): root, the programs,
/// the CNI plugins, Go (only when the node's binaries are not built yet), cgroup v1.
pub fn missing() -> Vec<String> {
    let mut missing = Vec::new();
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false);
    if !root {
        missing.push("root".to_string());
    }
    for program in ["containerd", "ctr", "runc", "ip", "iptables", "setpriv"] {
        if which(program).is_none() {
            missing.push(program.to_string());
        }
    }
    for plugin in ["bridge", "host-local", "loopback", "portmap"] {
        if !Path::new(CNI_BIN).join(plugin).is_file() {
            missing.push(format!("{CNI_BIN}/{plugin}"));
        }
    }
    if !Path::new("/sys/fs/cgroup/memory").is_dir() {
        missing.push("cgroup v1 (the memory controller at /sys/fs/cgroup/memory)".to_string());
    }
    let built = std::env::var_os(NODE_BIN_ENV).is_some()
        || build_sh(&["--node", "--dir"]).is_ok_and(|d| d.join("kubelet").is_file());
    if !built && which("go").is_none() {
        missing.push("go (to build the kubelet)".to_string());
    }
    missing
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

// === impl NodeOptions ===

impl NodeOptions {
    /// The probe image of `tests/k8s/build.sh --node`, as the only image and the sandbox image.
    pub fn probe() -> anyhow::Result<Self> {
        Ok(Self {
            images: vec![node_bin()?.join("probe.oci.tar")],
            sandbox_image: PROBE_IMAGE.to_string(),
        })
    }
}

// === impl Node ===

impl Node {
    /// Start the node's containerd and kubelet beside `plane` (which must come from
    /// [`ControlPlane::start_for_node`]), import `options.images`, and wait until the Node is
    /// Ready and schedulable. Waits (up to 10 min) for [`LOCK_FILE`] while another node runs,
    /// this process's own included: one node per machine.
    pub fn start(plane: &ControlPlane, options: NodeOptions) -> anyhow::Result<Self> {
        let access = plane.node.clone().context(
            "Node::start needs a control plane started with ControlPlane::start_for_node",
        )?;
        let bin = node_bin()?;
        let dir = plane.dir().join("node");
        std::fs::create_dir_all(&dir)?;
        let lock_file = File::options()
            .create(true)
            .append(true)
            .open(LOCK_FILE)
            .with_context(|| format!("failed to open {LOCK_FILE}"))?;
        let waited = std::time::SystemTime::now();
        loop {
            match lock_file.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock)
                    if waited.elapsed().unwrap_or_default() < LOCK_TIMEOUT =>
                {
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(std::fs::TryLockError::WouldBlock) => bail!(
                    "another node (of this machine, or of this process) held {LOCK_FILE} for {LOCK_TIMEOUT:?}"
                ),
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(e).with_context(|| format!("failed to lock {LOCK_FILE}"));
                }
            }
        }

        let cgroup = cgroup_root()?;
        let containerd_dir = dir.join("containerd");
        let containerd_socket = containerd_dir.join("containerd.sock");
        let runc_root = containerd_dir.join("runc");
        let cleanup = dir.join("cleanup.sh");
        // portmap's shared chains are removed on clean-up only if this node's pods made them,
        // and the kubelet's own chains only if this node's kubelet made them.
        let hostport_chains_before =
            run("iptables", &["-w", "-t", "nat", "-S", "CNI-HOSTPORT-DNAT"]).is_ok();
        let kubelet_chains_before = run(
            "iptables",
            &["-w", "-t", "mangle", "-S", "KUBE-KUBELET-CANARY"],
        )
        .is_ok();
        std::fs::write(
            &cleanup,
            cleanup_script(
                &dir,
                &containerd_dir,
                &containerd_socket,
                &runc_root,
                &cgroup,
                hostport_chains_before,
                kubelet_chains_before,
            ),
        )?;
        // The reaper runs it (holding the lock) if this node is never dropped.
        let reap_dir = plane.dir().join("reap.d");
        std::fs::create_dir_all(&reap_dir)?;
        let reap_hook = reap_dir.join("node.sh");
        std::fs::write(
            &reap_hook,
            format!(
                "flock {LOCK_FILE} sh {}\n",
                sh_quote(&cleanup.display().to_string())
            ),
        )?;
        let mut node = Self {
            processes: Vec::new(),
            dir: dir.clone(),
            cleanup,
            reap_hook,
            containerd_socket: containerd_socket.clone(),
            pod_logs: dir.join("pod-logs"),
            bin,
            _lock: lock_file,
        };
        // What a node before this one may have left if its clean-up never ran.
        node.run_cleanup()?;

        make_cgroups(&cgroup)?;
        node.network(access.api_port)?;
        node.start_containerd(&containerd_dir, &runc_root, &options)?;
        node.import_images(&options.images)?;
        node.start_kubelet(plane, &access, &cgroup)?;
        node.wait_ready(plane)?;
        Ok(node)
    }

    /// The Node's name.
    pub fn name(&self) -> &str {
        NODE_NAME
    }

    /// The pods' address range.
    pub fn pod_cidr(&self) -> &str {
        POD_CIDR
    }

    /// The address pods reach the host on.
    pub fn gateway(&self) -> Ipv4Addr {
        GATEWAY
    }

    /// containerd's socket (for `ctr -a <socket> -n k8s.io …`).
    pub fn containerd_socket(&self) -> &Path {
        &self.containerd_socket
    }

    /// The node's folder (configs, logs, containerd's and the kubelet's state).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The kubelet's folder of container logs (`<namespace>_<pod>_<uid>/<container>/<n>.log`,
    /// the CRI log format), what `/var/log/pods` is on a real node.
    pub fn pod_logs_dir(&self) -> &Path {
        &self.pod_logs
    }

    /// What container `container` of pod `namespace/pod` wrote (every restart's log, oldest
    /// first), read from the kubelet's log files without the CRI prefix (time, stream, tag);
    /// empty when it has not started yet.
    pub fn container_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> anyhow::Result<String> {
        let prefix = format!("{namespace}_{pod}_");
        let mut out = String::new();
        let Ok(entries) = std::fs::read_dir(&self.pod_logs) else {
            return Ok(out);
        };
        for entry in entries {
            let entry = entry?;
            if !entry.file_name().to_string_lossy().starts_with(&prefix) {
                continue;
            }
            let Ok(files) = std::fs::read_dir(entry.path().join(container)) else {
                continue;
            };
            let mut files: Vec<(u64, PathBuf)> = files
                .filter_map(Result::ok)
                .filter_map(|f| {
                    let name = f.file_name().to_string_lossy().into_owned();
                    let n = name.strip_suffix(".log")?.parse().ok()?;
                    Some((n, f.path()))
                })
                .collect();
            files.sort();
            for (_, file) in files {
                for line in std::fs::read_to_string(&file)?.lines() {
                    // <RFC3339 time> <stdout|stderr> <F|P> <text>
                    let text = line.splitn(4, ' ').nth(3).unwrap_or_default();
                    out.push_str(text);
                    out.push('\n');
                }
            }
        }
        Ok(out)
    }

    /// The last `lines` lines of containerd's and the kubelet's logs, for a failing test's
    /// message.
    pub fn logs_tail(&self, lines: usize) -> String {
        self.processes
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

    /// The bridge with the gateway address, and the `kubernetes` Service's DNAT to the API
    /// server's port on the gateway.
    fn network(&self, api_port: u16) -> anyhow::Result<()> {
        let gateway = format!("{GATEWAY}/24");
        run("ip", &["link", "add", BRIDGE, "type", "bridge"])?;
        run("ip", &["addr", "add", &gateway, "dev", BRIDGE])?;
        run("ip", &["link", "set", BRIDGE, "up"])?;
        let service = KUBERNETES_SERVICE_IP.to_string();
        let to = format!("{GATEWAY}:{api_port}");
        run("iptables", &["-w", "-t", "nat", "-N", SERVICE_CHAIN])?;
        run(
            "iptables",
            &[
                "-w",
                "-t",
                "nat",
                "-A",
                SERVICE_CHAIN,
                "-d",
                &service,
                "-p",
                "tcp",
                "--dport",
                "443",
                "-j",
                "DNAT",
                "--to-destination",
                &to,
            ],
        )?;
        run(
            "iptables",
            &[
                "-w",
                "-t",
                "nat",
                "-I",
                "PREROUTING",
                "-i",
                BRIDGE,
                "-m",
                "comment",
                "--comment",
                "fleetgate test node: the kubernetes Service",
                "-j",
                SERVICE_CHAIN,
            ],
        )?;
        Ok(())
    }

    fn start_containerd(
        &mut self,
        containerd_dir: &Path,
        runc_root: &Path,
        options: &NodeOptions,
    ) -> anyhow::Result<()> {
        let cni_conf = self.dir.join("cni/net.d");
        let ipam = self.dir.join("cni/ipam");
        std::fs::create_dir_all(&cni_conf)?;
        std::fs::create_dir_all(&ipam)?;
        std::fs::create_dir_all(containerd_dir)?;
        // containerd's CRI plugin reads the first network of the folder and adds loopback
        // itself.
        let network = serde_json::json!({
            "cniVersion": "0.4.0",
            "name": CNI_NETWORK,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": true,
                    "ipMasq": false,
                    "hairpinMode": true,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{ "subnet": POD_CIDR, "gateway": GATEWAY.to_string() }]],
                        "routes": [{ "dst": "0.0.0.0/0" }],
                        "dataDir": ipam.display().to_string(),
                    },
                },
                { "type": "portmap", "capabilities": { "portMappings": true } },
            ],
        });
        std::fs::write(
            cni_conf.join("10-fleetgate-node.conflist"),
            serde_json::to_string_pretty(&network)?,
        )?;
        let d = |p: &Path| toml_string(&p.display().to_string());
        let config = format!(
            r#"version = 2
root = {root}
state = {state}
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = {socket}
[ttrpc]
  address = {ttrpc}
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = {opt}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = {sandbox}
  # exec/attach/port-forward streams: loopback, a free port.
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  # The kubelet asks for negative OOM score adjustments, which this machine refuses.
  restrict_oom_score_adj = true
  # Network namespaces under the state folder, so clean-up finds them.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "runc"
        Root = {runc_root}
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = {cni_bin}
    conf_dir = {cni_conf}
"#,
            root = d(&containerd_dir.join("root")),
            state = d(&containerd_dir.join("state")),
            socket = d(&self.containerd_socket),
            ttrpc = d(&containerd_dir.join("containerd-ttrpc.sock")),
            opt = d(&containerd_dir.join("opt")),
            sandbox = toml_string(&options.sandbox_image),
            runc_root = d(runc_root),
            cni_bin = toml_string(CNI_BIN),
            cni_conf = d(&cni_conf),
        );
        let config_path = containerd_dir.join("config.toml");
        std::fs::write(&config_path, config)?;
        self.spawn(
            "containerd",
            Path::new(CONTAINERD),
            &["--config".into(), config_path.display().to_string()],
        )?;
        let socket = self.containerd_socket.clone();
        self.wait_until("containerd did not answer", READY_TIMEOUT, || {
            Ok(socket.exists() && ctr(&socket, &["version"]).is_ok())
        })
    }

    fn import_images(&mut self, images: &[PathBuf]) -> anyhow::Result<()> {
        for image in images {
            let path = image.display().to_string();
            self.ctr(&["images", "import", &path])
                .with_context(|| format!("failed to import {path}"))?;
        }
        Ok(())
    }

    /// `ctr -a <socket> -n k8s.io args…`; its output, or an error with it.
    pub fn ctr(&self, args: &[&str]) -> anyhow::Result<String> {
        ctr(&self.containerd_socket, args)
    }

    fn start_kubelet(
        &mut self,
        plane: &ControlPlane,
        access: &super::NodeAccess,
        cgroup: &str,
    ) -> anyhow::Result<()> {
        let kubelet_dir = self.dir.join("kubelet");
        std::fs::create_dir_all(&kubelet_dir)?;
        let kubeconfig = kubelet_dir.join("kubelet.kubeconfig");
        write_kubeconfig(
            &kubeconfig,
            plane.api_url(),
            &plane.ca_file(),
            &super::ClientCredential::Certificate(&access.kubelet_cert, &access.kubelet_key),
        )?;
        // No cluster DNS: the pods' name server is the host's bridge address, port 53, where a
        // suite that needs names runs its stub server (without one, lookups fail at once).
        let resolv = kubelet_dir.join("resolv.conf");
        std::fs::write(
            &resolv,
            format!("nameserver {GATEWAY}\noptions attempts:2 timeout:2\n"),
        )?;
        let config = serde_json::json!({
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            // This machine has cgroup v1 only; the kubelet refuses it unless told.
            "failCgroupV1": false,
            // containerd 1.6 does not report its cgroup driver (no RuntimeConfig).
            "cgroupDriver": "cgroupfs",
            "cgroupsPerQOS": true,
            "cgroupRoot": cgroup,
            "failSwapOn": false,
            "address": GATEWAY.to_string(),
            "port": free_port()?,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port()?,
            "readOnlyPort": 0,
            "authentication": {
                "anonymous": { "enabled": false },
                "webhook": { "enabled": true },
                "x509": { "clientCAFile": plane.ca_file().display().to_string() },
            },
            "authorization": { "mode": "Webhook" },
            "containerRuntimeEndpoint": format!("unix://{}", self.containerd_socket.display()),
            "podCIDR": POD_CIDR,
            // The disk is shared with other work: evict only when it is really full, and
            // never collect the imported images (there is no registry to pull them again).
            "evictionHard": {
                "memory.available": "1Mi",
                "nodefs.available": "1%",
                "nodefs.inodesFree": "1%",
                "imagefs.available": "1%",
            },
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "resolvConf": resolv.display().to_string(),
            "podLogsDir": self.pod_logs.display().to_string(),
            "registerNode": true,
            "serializeImagePulls": false,
            // Pod changes are seen through the API watch; these bound the resync.
            "syncFrequency": "10s",
            "nodeStatusUpdateFrequency": "4s",
            "rotateCertificates": false,
            "serverTLSBootstrap": false,
        });
        let config_path = kubelet_dir.join("config.json");
        std::fs::write(&config_path, serde_json::to_string_pretty(&config)?)?;
        let p = |path: &Path| path.display().to_string();
        let args = vec![
            format!("--config={}", p(&config_path)),
            format!("--kubeconfig={}", p(&kubeconfig)),
            format!("--root-dir={}", p(&kubelet_dir.join("root"))),
            format!("--cert-dir={}", p(&kubelet_dir.join("pki"))),
            format!("--hostname-override={NODE_NAME}"),
            format!("--node-ip={GATEWAY}"),
        ];
        let program = self.bin.join("kubelet");
        self.spawn("kubelet", &program, &args)
    }

    /// Wait until the Node is `Ready` and no longer tainted `not-ready` (pods can be
    /// scheduled onto it).
    fn wait_ready(&mut self, plane: &ControlPlane) -> anyhow::Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let kubeconfig = plane.kubeconfig().to_path_buf();
        self.wait_until(
            "the Node did not become Ready and schedulable",
            READY_TIMEOUT,
            || {
                runtime.block_on(async {
                    use k8s_openapi::api::core::v1::Node as KubeNode;
                    let client = client_for(&kubeconfig).await?;
                    let nodes: kube::Api<KubeNode> = kube::Api::all(client);
                    let Some(node) = nodes.get_opt(NODE_NAME).await? else {
                        return Ok(false);
                    };
                    let ready = node
                        .status
                        .and_then(|s| s.conditions)
                        .unwrap_or_default()
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True");
                    let tainted = node
                        .spec
                        .and_then(|s| s.taints)
                        .unwrap_or_default()
                        .iter()
                        .any(|t| t.key == "node.kubernetes.io/not-ready");
                    Ok(ready && !tainted)
                })
            },
        )
    }

    /// Run `check` every 200 ms until it answers `true`, failing after `timeout` with the
    /// logs, or as soon as one of the node's processes exits.
    fn wait_until(
        &mut self,
        failure: &str,
        timeout: Duration,
        check: impl Fn() -> anyhow::Result<bool>,
    ) -> anyhow::Result<()> {
        let started = std::time::SystemTime::now();
        loop {
            for c in &mut self.processes {
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
            let answer = check();
            match answer {
                Ok(true) => return Ok(()),
                _ if started.elapsed().unwrap_or_default() > timeout => bail!(
                    "{failure} within {timeout:?} ({answer:?}):\n{}",
                    self.logs_tail(40)
                ),
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    fn spawn(&mut self, name: &'static str, program: &Path, args: &[String]) -> anyhow::Result<()> {
        let log = self.dir.join(format!("{name}.log"));
        let child = spawn_component(program, args, &log, false)?;
        self.processes.push(Component {
            name,
            args: args.to_vec(),
            child,
            log,
        });
        Ok(())
    }

    fn run_cleanup(&self) -> anyhow::Result<()> {
        let out = Command::new("sh")
            .arg(&self.cleanup)
            .stdin(Stdio::null())
            .output()
            .context("failed to run the node's clean-up")?;
        if !out.status.success() {
            bail!(
                "the node's clean-up failed ({}):\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        for c in self.processes.iter_mut().rev() {
            let _ = nix_kill_group(c.child.id());
            let _ = c.child.wait();
        }
        if let Err(e) = self.run_cleanup() {
            tracing::warn!("{e:#}");
        }
        let _ = std::fs::remove_file(&self.reap_hook);
    }
}

/// The kubelet's `cgroupRoot`: `<this process's memory cgroup>/fleetgate-node`.
fn cgroup_root() -> anyhow::Result<String> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup")?;
    let memory = cgroups
        .lines()
        .filter_map(|l| {
            l.splitn(3, ':')
                .collect::<Vec<_>>()
                .get(1..3)
                .map(<[_]>::to_vec)
        })
        .find(|parts| parts[0].split(',').any(|c| c == "memory"))
        .map(|parts| parts[1].to_string())
        .context("this process has no memory cgroup (cgroup v1)")?;
    Ok(format!("{}/{CGROUP_LEAF}", memory.trim_end_matches('/')))
}

/// For every hierarchy (the unified one too: runc creates the path there as well), the first
/// folder of `cgroup`'s path that does not exist yet, or `cgroup` itself: what clean-up removes.
fn cgroup_tops(cgroup: &str) -> Vec<PathBuf> {
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return Vec::new();
    };
    let mut tops = Vec::new();
    for hierarchy in hierarchies.filter_map(Result::ok) {
        let mut path = hierarchy.path();
        if !path.join("cgroup.procs").is_file() {
            continue;
        }
        for part in cgroup.split('/').filter(|p| !p.is_empty()) {
            path.push(part);
            if !path.exists() {
                break;
            }
        }
        tops.push(path);
    }
    tops.sort();
    tops
}

/// Create `cgroup` in every cgroup v1 hierarchy (the kubelet requires it to exist); a new
/// cpuset cgroup gets its parent's CPUs and memory nodes.
fn make_cgroups(cgroup: &str) -> anyhow::Result<()> {
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup")? {
        let hierarchy = hierarchy?.path();
        if hierarchy.ends_with("unified") || !hierarchy.join("cgroup.procs").is_file() {
            continue;
        }
        let cpuset = hierarchy.ends_with("cpuset");
        let mut path = hierarchy.clone();
        for part in cgroup.split('/').filter(|p| !p.is_empty()) {
            let parent = path.clone();
            path.push(part);
            if !path.is_dir() {
                std::fs::create_dir(&path)
                    .with_context(|| format!("failed to create {}", path.display()))?;
            }
            if cpuset {
                for file in ["cpuset.cpus", "cpuset.mems"] {
                    if std::fs::read_to_string(path.join(file))?.trim().is_empty() {
                        std::fs::write(path.join(file), std::fs::read(parent.join(file))?)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// The clean-up script (see the module's documentation). Idempotent; every step tolerates
/// what is already gone.
fn cleanup_script(
    dir: &Path,
    containerd_dir: &Path,
    socket: &Path,
    runc_root: &Path,
    cgroup: &str,
    hostport_chains_before: bool,
    kubelet_chains_before: bool,
) -> String {
    let q = |p: &Path| sh_quote(&p.display().to_string());
    format!(
        r#"#!/bin/sh
# Removes what fleetgate's test node (tests/src/k8s/node.rs) added to this machine.
# Run by the node's Drop, or by the control plane's reaper (holding {LOCK_FILE}).
dir={dir}
socket={socket}
runc_root={runc_root}
cri_root={cri_root}

# The kubelet, containerd and containerd's shims (reparented, so they outlive it).
for p in /proc/[0-9]*; do
  cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
  case "$cmd" in
    *containerd-shim*" -address $socket"*|*kubelet" --config=$dir/"*|*containerd" --config $dir/"*)
      kill -KILL "${{p#/proc/}}" 2>/dev/null ;;
  esac
done

# The containers.
for ns in "$runc_root"/*; do
  [ -d "$ns" ] || continue
  for id in $(runc --root "$ns" list -q 2>/dev/null); do
    runc --root "$ns" kill "$id" KILL 2>/dev/null
    runc --root "$ns" delete -f "$id" 2>/dev/null
  done
done

# Every mount under the folder, deepest first: overlay roots, shm, network namespaces, the
# kubelet's bind mount of its root.
for _ in 1 2 3; do
  mounts=$(awk -v d="$dir/" 'index($5, d) == 1 {{ print $5 }}' /proc/self/mountinfo | sort -r)
  [ -n "$mounts" ] || break
  for m in $mounts; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
done

# The bridge and whatever veth is still plugged into it.
if ip link show {bridge} >/dev/null 2>&1; then
  for veth in $(ip -o link show master {bridge} | awk -F': ' '{{ print $2 }}' | cut -d@ -f1); do
    ip link del "$veth" 2>/dev/null
  done
  ip link del {bridge}
fi

# The kubernetes Service's DNAT.
while iptables -w -t nat -D PREROUTING -i {bridge} -m comment --comment "fleetgate test node: the kubernetes Service" -j {chain} 2>/dev/null; do :; done
if iptables -w -t nat -L {chain} -n >/dev/null 2>&1; then
  iptables -w -t nat -F {chain}
  iptables -w -t nat -X {chain}
fi

# portmap's hostPort rules of this node's pods (left when no CNI DEL ran): the jumps naming the
# network and the per-pod chains they lead to.
rules=$(iptables-save -t nat 2>/dev/null | grep -F 'name: \"{network}\"')
if [ -n "$rules" ]; then
  chains=$(echo "$rules" | sed -n 's/.* -j \(CNI-DN-[0-9a-f]*\).*/\1/p' | sort -u)
  {{
    echo '*nat'
    echo "$rules" | sed 's/^-A /-D /'
    for c in $chains; do echo "-F $c"; echo "-X $c"; done
    echo COMMIT
  }} | iptables-restore -w -n
fi
# portmap's shared chains, when this node's pods made them and nothing else uses them.
if [ {hostport_before} = 0 ] && [ "$(iptables -w -t nat -S CNI-HOSTPORT-DNAT 2>/dev/null | wc -l)" = 1 ]; then
  iptables -w -t nat -D PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
  iptables -w -t nat -D OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
  iptables -w -t nat -D POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ
  for c in CNI-HOSTPORT-DNAT CNI-HOSTPORT-MASQ CNI-HOSTPORT-SETMARK; do
    iptables -w -t nat -F $c
    iptables -w -t nat -X $c
  done
fi

# The kubelet's own chains (its canaries, the hint for kube-proxy, and KUBE-FIREWALL's drop of
# non-loopback packets to 127.0.0.0/8), when this node's kubelet made them.
if [ {kubelet_before} = 0 ]; then
  for t in iptables ip6tables; do
    while $t -w -t filter -D INPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
    while $t -w -t filter -D OUTPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
    for tc in filter:KUBE-FIREWALL filter:KUBE-KUBELET-CANARY nat:KUBE-KUBELET-CANARY mangle:KUBE-KUBELET-CANARY mangle:KUBE-IPTABLES-HINT; do
      $t -w -t "${{tc%%:*}}" -F "${{tc#*:}}" 2>/dev/null && $t -w -t "${{tc%%:*}}" -X "${{tc#*:}}" 2>/dev/null
    done
  done
fi

# The CNI plugins' result cache of this node's sandboxes.
if [ -d "$cri_root/sandboxes" ]; then
  for id in $(ls "$cri_root/sandboxes"); do rm -f /var/lib/cni/results/*-"$id"-*; done
fi
rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null

# The pods' cgroups in every hierarchy, from the first folder of their path the node (or runc)
# created: empty once their processes are gone.
for _ in 1 2 3 4 5; do
  left=0
  for d in {cgroup_tops}; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {{}} + 2>/dev/null
    [ -d "$d" ] && left=1
  done
  [ $left = 0 ] && break
  sleep 0.2
done
exit 0
"#,
        dir = q(dir),
        socket = q(socket),
        runc_root = q(runc_root),
        cri_root = q(&containerd_dir.join("root/io.containerd.grpc.v1.cri")),
        cgroup_tops = cgroup_tops(cgroup)
            .iter()
            .map(|d| q(d))
            .collect::<Vec<_>>()
            .join(" "),
        bridge = BRIDGE,
        chain = SERVICE_CHAIN,
        network = CNI_NETWORK,
        hostport_before = u8::from(hostport_chains_before),
        kubelet_before = u8::from(kubelet_chains_before),
    )
}

/// `ctr -a <socket> -n k8s.io args…`.
fn ctr(socket: &Path, args: &[&str]) -> anyhow::Result<String> {
    let socket = socket.display().to_string();
    let mut all = vec!["-a", &socket, "-n", "k8s.io"];
    all.extend_from_slice(args);
    run("ctr", &all)
}

/// `program args…`; its stdout, or an error with its output.
fn run(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("failed to run {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} {} failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `text` in single quotes for sh.
fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}
