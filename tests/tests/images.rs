//! The container images of `deploy/images/build.sh` run the way the chart and the injector run
//! them (root only; podman, buildah and debootstrap):
//!
//! - each OCI archive names its image (`localhost/fleetgate-proxy:dev`, ...) and loads back;
//! - the gate runs on a read-only root as uid/gid 15000, answers `/live` and `/ready` on its
//!   admin listener (inside the container's network namespace, as the kubelet's probes do), and
//!   cannot write to `/` (its store on `/` makes it not ready);
//! - `init-iptables` installs the capture rules with the image's own iptables (nft, and the
//!   legacy backend) in a network namespace that outlives the container, where both the image's
//!   `iptables-save` and the host's see them, once each however often it runs;
//! - the controller image starts and prints its help, as uid 65532;
//! - the pause image runs as uid 65535 and exits 0 on SIGTERM;
//! - the agent image imports Hermes' web tools (`web_extract_tool`) and runs `hermes` as uid
//!   10000 with `HERMES_HOME=/opt/data`.
//!
//! Opt-in (fleetgate-e2e's feature `images`, which `tests/run` turns on): a plain `cargo test`
//! lists every case as ignored, naming the command that runs it. With the feature, skipped with
//! a message when not root or when podman, buildah, debootstrap or ip are missing, unless
//! `FLEETGATE_REQUIRE_IMAGES=1`. podman reads `$CONTAINERS_CONF`, else
//! `tests/k8s/containers.conf`. Containers and namespaces are removed even on panic.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

const GATE: &str = "localhost/fleetgate-proxy:dev";
const CONTROLLER: &str = "localhost/fleetgate-controller:dev";
const AGENT: &str = "localhost/hermes-agent:0.19.0";
const PAUSE: &str = "localhost/fleetgate-pause:1";
/// The gate's admin listener on its embedded default policy.
const ADMIN: &str = "127.0.0.1:15190";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn containers_conf() -> PathBuf {
    std::env::var_os("CONTAINERS_CONF")
        .filter(|v| !v.is_empty())
        .map_or_else(
            || repo_root().join("tests/k8s/containers.conf"),
            PathBuf::from,
        )
}

fn podman(args: &[&str]) -> Output {
    Command::new("podman")
        .env("CONTAINERS_CONF", containers_conf())
        .args(args)
        .output()
        .expect("podman must run")
}

/// `podman args...`, which must succeed; its stdout.
fn podman_ok(args: &[&str]) -> String {
    let out = podman(args);
    assert!(
        out.status.success(),
        "`podman {}` failed ({}): {}{}",
        args.join(" "),
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn has(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Why this test cannot run here, if it cannot.
fn missing_prerequisite() -> Option<String> {
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| text(&o.stdout).trim().to_string());
    if uid.as_deref().ok() != Some("0") {
        return Some("not root".into());
    }
    ["podman", "buildah", "debootstrap", "ip"]
        .into_iter()
        .find(|tool| !has(tool))
        .map(|tool| format!("`{tool}` is not installed"))
}

/// Whether to skip (printing why); panics instead when `FLEETGATE_REQUIRE_IMAGES` is set.
fn skip() -> bool {
    let Some(why) = missing_prerequisite() else {
        return false;
    };
    assert!(
        std::env::var_os("FLEETGATE_REQUIRE_IMAGES").is_none(),
        "FLEETGATE_REQUIRE_IMAGES=1 but {why}"
    );
    println!("skipped: the image tests need root, podman, buildah, debootstrap and ip ({why})");
    true
}

/// The folder of OCI archives `deploy/images/build.sh` printed, built once per test process;
/// every archive is loaded into podman's storage under the name its index gives.
fn images() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = repo_root();
        let out = Command::new(root.join("deploy/images/build.sh"))
            .current_dir(&root)
            .env("CONTAINERS_CONF", containers_conf())
            .output()
            .expect("deploy/images/build.sh must run");
        assert!(
            out.status.success(),
            "deploy/images/build.sh failed ({}):\n{}",
            out.status,
            text(&out.stderr)
        );
        let stdout = text(&out.stdout);
        let dir = PathBuf::from(stdout.lines().last().expect("the folder is printed").trim());
        for (file, name) in [
            ("fleetgate-proxy", GATE),
            ("fleetgate-controller", CONTROLLER),
            ("hermes-agent", AGENT),
            ("fleetgate-pause", PAUSE),
        ] {
            let archive = dir.join(format!("{file}.oci.tar"));
            assert!(archive.is_file(), "{} is missing", archive.display());
            let index = Command::new("tar")
                .arg("-xOf")
                .arg(&archive)
                .arg("index.json")
                .output()
                .expect("tar must run");
            let index: serde_json::Value =
                serde_json::from_slice(&index.stdout).expect("index.json is JSON");
            assert_eq!(
                index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"],
                name,
                "{} must name its image for `ctr images import` and `podman load`",
                archive.display()
            );
            let loaded = podman_ok(&["load", "-i", archive.to_str().unwrap()]);
            assert!(loaded.contains(name), "podman load of {file} gave {loaded}");
        }
        dir
    })
}

/// A container removed on drop (panics included).
struct Container {
    id: String,
}

impl Container {
    /// `podman run -d args...`
    fn start(args: &[&str]) -> Self {
        let mut all = vec!["run", "-d"];
        all.extend_from_slice(args);
        let id = podman_ok(&all).trim().to_string();
        Self { id }
    }

    fn inspect(&self, format: &str) -> String {
        podman_ok(&["inspect", "--format", format, &self.id])
            .trim()
            .to_string()
    }

    /// The host pid of the container's first process.
    fn pid(&self) -> u32 {
        let pid = self.inspect("{{.State.Pid}}");
        let pid: u32 = pid.parse().expect("a pid");
        assert!(
            pid > 0,
            "the container is not running: {}",
            text(&podman(&["logs", &self.id]).stderr)
        );
        pid
    }

    fn logs(&self) -> String {
        let out = podman(&["logs", &self.id]);
        format!("{}{}", text(&out.stdout), text(&out.stderr))
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman(&["rm", "-f", "-t", "0", &self.id]);
    }
}

/// The `Uid:` and `Gid:` lines of a process, as (real, effective, saved, fs) each.
fn ids(pid: u32) -> (String, String) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    (field("Uid:"), field("Gid:"))
}

/// `GET path` on `addr` inside the network namespace of `pid`, retried until it answers or
/// 20 s pass; (status, body).
fn get_in_netns(pid: u32, addr: &'static str, path: &'static str) -> (u16, String) {
    let ns = format!("/proc/{pid}/ns/net");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&ns).expect("the namespace file must open");
        nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET)
            .expect("setns must work as root");
        let mut last = String::new();
        for _ in 0..200 {
            match TcpStream::connect(addr) {
                Ok(mut s) => {
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    write!(
                        s,
                        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
                    )
                    .unwrap();
                    let mut reply = String::new();
                    s.read_to_string(&mut reply).unwrap();
                    let status = reply
                        .split_whitespace()
                        .nth(1)
                        .and_then(|c| c.parse().ok())
                        .unwrap_or(0);
                    let body = reply
                        .split_once("\r\n\r\n")
                        .map(|(_, b)| b.to_string())
                        .unwrap_or_default();
                    return (status, body);
                }
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("nothing answered on {addr} in the container's namespace: {last}");
    })
    .join()
    .unwrap()
}

/// A resolv.conf for containers on `--network none` (the gate's resolver needs one; in a pod
/// the kubelet mounts it).
fn resolv_conf(dir: &Path) -> String {
    let path = dir.join("resolv.conf");
    std::fs::write(&path, "nameserver 127.0.0.1\n").unwrap();
    format!("{}:/etc/resolv.conf:ro", path.display())
}

#[test]
#[cfg_attr(
    not(feature = "images"),
    ignore = "container images (root, podman, buildah, debootstrap; built from Debian and PyPI): tests/run, or cargo test -p fleetgate-e2e --features images --test images"
)]
fn gate_serves_on_a_read_only_root_as_uid_15000() {
    if skip() {
        return;
    }
    images();
    let tmp = tempfile::tempdir().unwrap();
    let resolv = resolv_conf(tmp.path());
    assert_eq!(
        podman_ok(&["image", "inspect", "--format", "{{.Config.User}}", GATE]).trim(),
        "15000:15000"
    );

    // As in the pod: read-only root, a writable store (the pod's cache volume; here a tmpfs
    // that is the working directory, so the embedded default's `./.fleetgate` lands there).
    let gate = Container::start(&[
        "--read-only",
        "--network",
        "none",
        "-v",
        &resolv,
        "--tmpfs",
        "/store:rw,mode=1777",
        "--workdir",
        "/store",
        GATE,
        "serve",
    ]);
    let pid = gate.pid();
    assert_eq!(gate.inspect("{{.HostConfig.ReadonlyRootfs}}"), "true");
    let (uid, gid) = ids(pid);
    assert_eq!(uid, "15000 15000 15000 15000", "{}", gate.logs());
    assert_eq!(gid, "15000 15000 15000 15000");
    let (status, body) = get_in_netns(pid, ADMIN, "/live");
    assert_eq!(status, 200, "/live: {body}\n{}", gate.logs());
    let (status, body) = get_in_netns(pid, ADMIN, "/ready");
    assert_eq!(status, 200, "/ready: {body}\n{}", gate.logs());
    // The root filesystem refuses writes (even root's, through the container's own mount);
    // the store beside it takes them.
    let err = std::fs::write(format!("/proc/{pid}/root/written-by-the-test"), b"x")
        .expect_err("the image's root filesystem must be read-only");
    assert_eq!(err.raw_os_error(), Some(30), "EROFS expected: {err}");
    std::fs::write(format!("/proc/{pid}/root/store/written-by-the-test"), b"x")
        .expect("the store is writable");
    drop(gate);

    // Without a writable store the gate stays alive but not ready: it cannot create its store
    // on the read-only root.
    let gate = Container::start(&[
        "--read-only",
        "--network",
        "none",
        "-v",
        &resolv,
        GATE,
        "serve",
    ]);
    let pid = gate.pid();
    let (status, body) = get_in_netns(pid, ADMIN, "/live");
    assert_eq!(status, 200, "/live: {body}\n{}", gate.logs());
    let (status, body) = get_in_netns(pid, ADMIN, "/ready");
    assert_eq!(status, 503, "/ready: {body}");
    assert!(body.contains("Read-only file system"), "/ready: {body}");
}

/// A named network namespace, deleted on drop.
struct Netns(String);

impl Netns {
    fn create(tag: &str) -> Self {
        let name = format!("fgimg-{tag}-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let out = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .unwrap();
        assert!(out.status.success(), "ip netns add: {}", text(&out.stderr));
        Self(name)
    }

    fn network(&self) -> String {
        format!("ns:/run/netns/{}", self.0)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// `init-iptables` in the image, as the injector's init container runs it (root, NET_ADMIN and
/// NET_RAW only, read-only root), in `ns`; its JSON lines.
fn init_iptables(ns: &Netns, extra: &[&str]) -> Vec<serde_json::Value> {
    let net = ns.network();
    let mut args = vec![
        "run",
        "--rm",
        "--read-only",
        "--network",
        &net,
        "--user",
        "0:0",
        "--cap-drop",
        "ALL",
        "--cap-add",
        "NET_ADMIN,NET_RAW",
        "--tmpfs",
        "/run",
        GATE,
        "init-iptables",
        "--proxy-uid",
        "15000",
        "--to-port",
        "15182",
    ];
    args.extend_from_slice(extra);
    podman_ok(&args)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The nat table of `ns` as the image's own `tool` prints it.
fn image_save(ns: &Netns, tool: &str) -> String {
    let net = ns.network();
    podman_ok(&[
        "run",
        "--rm",
        "--read-only",
        "--network",
        &net,
        "--user",
        "0:0",
        "--cap-drop",
        "ALL",
        "--cap-add",
        "NET_ADMIN,NET_RAW",
        "--tmpfs",
        "/run",
        "--entrypoint",
        tool,
        GATE,
        "-t",
        "nat",
    ])
}

fn assert_capture_rules(saved: &str, what: &str) {
    assert!(
        saved.contains("fleetgate/") && saved.contains("--to-ports 15182"),
        "{what} shows no capture rules:\n{saved}"
    );
    assert!(
        saved.contains("--uid-owner 15000"),
        "{what} shows no exemption of the gate's uid:\n{saved}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "images"),
    ignore = "container images (root, podman, buildah, debootstrap; built from Debian and PyPI): tests/run, or cargo test -p fleetgate-e2e --features images --test images"
)]
fn init_iptables_installs_the_capture_rules_with_the_images_iptables() {
    if skip() {
        return;
    }
    images();

    // nft, the default backend: installed once, unchanged the second time.
    let ns = Netns::create("nft");
    let applied = init_iptables(&ns, &[]);
    assert_eq!(applied.len(), 2, "{applied:?}");
    assert_eq!(applied[0]["tool"], "/usr/sbin/iptables-nft-restore");
    assert_eq!(applied[1]["tool"], "/usr/sbin/ip6tables-nft-restore");
    assert!(applied.iter().all(|a| a["changed"] == true), "{applied:?}");
    assert_capture_rules(&image_save(&ns, "/usr/sbin/iptables-save"), "iptables-save");
    assert_capture_rules(
        &image_save(&ns, "/usr/sbin/ip6tables-nft-save"),
        "ip6tables-nft-save",
    );
    // Applied again (a restarted pod), the rules are rewritten, not repeated.
    let again = init_iptables(&ns, &[]);
    assert_eq!(again.len(), 2, "{again:?}");
    let saved = image_save(&ns, "/usr/sbin/iptables-nft-save");
    for comment in [
        "fleetgate/capture-outbound-tcp",
        "fleetgate/to-transparent-listener",
    ] {
        assert_eq!(
            saved.matches(comment).count(),
            1,
            "{comment} once:\n{saved}"
        );
    }
    // The host sees the same rules in the kernel (when it has an nft iptables).
    if has("iptables-nft-save") {
        let out = Command::new("ip")
            .args(["netns", "exec", &ns.0, "iptables-nft-save", "-t", "nat"])
            .output()
            .unwrap();
        assert_capture_rules(&text(&out.stdout), "the host's iptables-nft-save");
    }
    drop(ns);

    // The legacy backend (nodes whose kube-proxy uses it).
    let ns = Netns::create("legacy");
    let applied = init_iptables(&ns, &["--backend", "legacy"]);
    assert_eq!(applied[0]["tool"], "/usr/sbin/iptables-legacy-restore");
    assert_capture_rules(
        &image_save(&ns, "/usr/sbin/iptables-legacy-save"),
        "iptables-legacy-save",
    );
    // ... which the nft backend does not show: the rules are where the backend put them.
    let nft = image_save(&ns, "/usr/sbin/iptables-nft-save");
    assert!(!nft.contains("fleetgate/"), "{nft}");
}

#[test]
#[cfg_attr(
    not(feature = "images"),
    ignore = "container images (root, podman, buildah, debootstrap; built from Debian and PyPI): tests/run, or cargo test -p fleetgate-e2e --features images --test images"
)]
fn controller_image_starts_as_nonroot() {
    if skip() {
        return;
    }
    images();
    assert_eq!(
        podman_ok(&[
            "image",
            "inspect",
            "--format",
            "{{.Config.User}}",
            CONTROLLER
        ])
        .trim(),
        "65532:65532"
    );
    let help = podman_ok(&[
        "run",
        "--rm",
        "--read-only",
        "--network",
        "none",
        CONTROLLER,
        "--help",
    ]);
    assert!(help.contains("run"), "{help}");
    let version = podman_ok(&[
        "run",
        "--rm",
        "--read-only",
        "--network",
        "none",
        CONTROLLER,
        "--version",
    ]);
    assert!(version.starts_with("fleetgate-controller "), "{version}");
    // `run` is the default command; out of a cluster it starts and fails for want of one.
    let cmd = podman_ok(&[
        "image",
        "inspect",
        "--format",
        "{{json .Config.Cmd}}",
        CONTROLLER,
    ]);
    assert_eq!(cmd.trim(), r#"["run"]"#);
}

#[test]
#[cfg_attr(
    not(feature = "images"),
    ignore = "container images (root, podman, buildah, debootstrap; built from Debian and PyPI): tests/run, or cargo test -p fleetgate-e2e --features images --test images"
)]
fn pause_image_holds_the_sandbox_and_exits_0_on_sigterm() {
    if skip() {
        return;
    }
    images();
    let pause = Container::start(&["--read-only", "--network", "none", PAUSE]);
    let pid = pause.pid();
    let (uid, gid) = ids(pid);
    assert_eq!(uid, "65535 65535 65535 65535");
    assert_eq!(gid, "65535 65535 65535 65535");
    // A stop that needed SIGKILL would leave exit code 137.
    podman_ok(&["stop", "-t", "20", &pause.id]);
    assert_eq!(
        pause.inspect("{{.State.ExitCode}}"),
        "0",
        "{}",
        pause.logs()
    );
}

#[test]
#[cfg_attr(
    not(feature = "images"),
    ignore = "container images (root, podman, buildah, debootstrap; built from Debian and PyPI): tests/run, or cargo test -p fleetgate-e2e --features images --test images"
)]
fn agent_image_imports_the_web_tools_as_uid_10000() {
    if skip() {
        return;
    }
    images();
    let out = podman_ok(&[
        "run",
        "--rm",
        "--read-only",
        "--network",
        "none",
        AGENT,
        "python",
        "-c",
        "import os, sys; from tools.web_tools import web_extract_tool; \
         print(os.getuid(), os.getgid(), os.environ['HERMES_HOME'], sys.prefix, callable(web_extract_tool))",
    ]);
    assert_eq!(out.trim(), "10000 10000 /opt/data /opt/hermes True");
    // `hermes` is on PATH and runs (its home writable, as the pod's volume is).
    let help = podman_ok(&[
        "run",
        "--rm",
        "--read-only",
        "--network",
        "none",
        "--tmpfs",
        "/opt/data:rw,mode=1777",
        AGENT,
        "hermes",
        "--help",
    ]);
    assert!(help.to_lowercase().contains("usage"), "{help}");
}
