//! A `fleetgate-controller` replica run out of cluster exactly as the chart's installed
//! Deployment runs it: the Deployment's own arguments, its mounted Secret and ConfigMap as
//! files, listeners moved to free loopback ports, and a token the API server minted for the
//! chart's ServiceAccount (TokenRequest), never admin — so a verb the Role lacks shows as a
//! refusal.

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::{self, kubectl};

/// A controller process; killed on drop, its log printed when dropped during a panic.
#[derive(Debug)]
pub struct ControllerProcess {
    child: Child,
    log: PathBuf,
    admin_addr: String,
}

impl ControllerProcess {
    /// Lines of its log that show the API server refusing it (RBAC).
    pub fn refusals(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter(|l| l.contains("forbidden") || l.contains("Forbidden"))
            .map(str::to_string)
            .collect()
    }

    /// The process ID (for its RSS in `/proc`).
    #[allow(dead_code, reason = "the scale benchmark reads it; the suites do not")]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process still runs (not exited, not a zombie).
    pub fn running(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .ok()
            .and_then(|stat| {
                let (_, rest) = stat.rsplit_once(") ")?;
                rest.chars().next()
            })
            .is_some_and(|state| state != 'Z' && state != 'X')
    }

    /// The value of every sample of metric `family` on its admin listener's `/metrics`
    /// whose labels contain `labels` (e.g. `kind="configmap"`), summed; `None` when the
    /// listener does not answer.
    pub fn metric(&self, family: &str, labels: &str) -> Option<f64> {
        let mut stream = TcpStream::connect(&self.admin_addr).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: controller\r\n\r\n")
            .ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).ok()?;
        let (_, body) = text.split_once("\r\n\r\n")?;
        Some(
            body.lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| l.rsplit_once(' '))
                .filter(|(series, _)| {
                    (*series == family || series.starts_with(&format!("{family}{{")))
                        && series.contains(labels)
                })
                .filter_map(|(_, v)| v.parse::<f64>().ok())
                .sum(),
        )
    }

    /// The status line and body of its admin listener's `/ready`; `None` when it does not
    /// answer.
    #[allow(
        dead_code,
        reason = "the k8s suite reads it; the cluster-wide cases do not"
    )]
    pub fn ready(&self) -> Option<String> {
        let mut stream = TcpStream::connect(&self.admin_addr).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        stream
            .write_all(b"GET /ready HTTP/1.0\r\nHost: controller\r\n\r\n")
            .ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).ok()?;
        let (head, body) = text.split_once("\r\n\r\n")?;
        Some(format!("{} {}", head.lines().next()?, body.trim()))
    }

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

pub fn base64_decode(text: &str) -> Vec<u8> {
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
        // `FLEETGATE_CONTROLLER_LOG` (a RUST_LOG filter) for a closer look at a failing case.
        .env(
            "RUST_LOG",
            std::env::var("FLEETGATE_CONTROLLER_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("a log handle"))
        .stderr(file)
        .spawn()
        .expect("fleetgate-controller must start");
    ControllerProcess {
        child,
        log,
        admin_addr,
    }
}
