//! Running the real gate: `fleetgate-proxy serve` as a child process with a policy file in a
//! temporary directory, its listeners read from the first stdout line, its stderr (one JSON log
//! line per decision) captured for assertions, and the one-shot subcommands.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use std::time::Duration;
//! use fleetgate_e2e::gate::GateProcess;
//! let gate = GateProcess::spawn("version: 1\n").await?;
//! let api = gate.api_addr();
//! let decision = gate
//!     .wait_for_json_log(|line| line["verdict"] == "deny", Duration::from_secs(5))
//!     .await?;
//! # Ok(()) }
//! ```

mod binary;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};
use tempfile::TempDir;
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::watch;

use crate::background::BackgroundTasks;

pub use binary::{GATE_BIN_ENV, default_binary_path, gate_binary};

/// How long `serve` may take to print its listening line.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a one-shot subcommand may run.
pub const CLI_TIMEOUT: Duration = Duration::from_secs(60);
/// Replaced in the policy text by the gate's temporary working directory (for cache paths).
pub const WORK_DIR_PLACEHOLDER: &str = "${WORK_DIR}";
/// The policy file's name inside the working directory.
const POLICY_FILE: &str = "policy.yaml";

/// A running `fleetgate-proxy serve`; killed (SIGKILL) on drop. When dropped during a panic it
/// prints everything the gate wrote to stderr, so a failing test shows the gate's side.
#[derive(Debug)]
pub struct GateProcess {
    child: Child,
    listeners: BTreeMap<String, SocketAddr>,
    api: SocketAddr,
    admin: SocketAddr,
    policy_path: PathBuf,
    stderr: watch::Receiver<Vec<String>>,
    stdout: watch::Receiver<Vec<String>>,
    _readers: BackgroundTasks,
    // Dropped last so the gate is gone before its files are.
    work_dir: TempDir,
}

/// Options for [`GateProcess`] beyond the policy; see [`GateProcess::builder`].
#[derive(Debug)]
pub struct GateBuilder {
    policy_yaml: String,
    binary: Option<PathBuf>,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    startup_timeout: Duration,
}

// === impl GateBuilder ===

impl GateBuilder {
    /// Runs this executable instead of [`gate_binary`] (a fake gate in harness self-tests).
    pub fn binary(mut self, path: impl Into<PathBuf>) -> Self {
        self.binary = Some(path.into());
        self
    }

    /// Appends an argument after `serve --policy <file>`.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Sets an environment variable for the gate (the test's environment, `RUST_LOG` included,
    /// is inherited otherwise).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// How long to wait for the listening line (default [`STARTUP_TIMEOUT`]).
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Writes the policy, starts `serve` and waits for its listening line.
    ///
    /// Fails when the gate exits, closes stdout or stays silent past the startup timeout, or
    /// when the first line is not `{"listening": {"api": ADDR, "admin": ADDR, ...}}`; the error
    /// quotes the gate's stderr.
    pub async fn spawn(self) -> anyhow::Result<GateProcess> {
        let binary = match &self.binary {
            Some(binary) => binary.clone(),
            None => locate_binary().await?,
        };
        let work_dir = tempfile::tempdir().context("failed to create the gate work dir")?;
        let policy_path = write_policy(work_dir.path(), &self.policy_yaml)?;
        let mut child = self.start(&binary, &policy_path, work_dir.path())?;
        let mut readers = BackgroundTasks::default();
        let stderr_pipe = child
            .stderr
            .take()
            .context("failed to capture gate stderr")?;
        let stderr = capture_lines(&mut readers, BufReader::new(stderr_pipe).lines());
        let stdout_pipe = child
            .stdout
            .take()
            .context("failed to capture gate stdout")?;
        let mut stdout_lines = BufReader::new(stdout_pipe).lines();
        let first = first_line(&mut child, &mut stdout_lines, self.startup_timeout);
        let listeners = match first.await.and_then(|line| parse_listening_line(&line)) {
            Ok(listeners) => listeners,
            Err(error) => {
                // Stop the gate and drain its stderr, so the error quotes all of it.
                let _ = child.kill().await;
                wait_for_close(&stderr).await;
                bail!("{error:#}\ngate stderr:\n{}", joined(&stderr))
            }
        };
        let stdout = capture_lines(&mut readers, stdout_lines);
        Ok(GateProcess {
            child,
            api: required_listener(&listeners, "api")?,
            admin: required_listener(&listeners, "admin")?,
            listeners,
            policy_path,
            stderr,
            stdout,
            _readers: readers,
            work_dir,
        })
    }

    /// Starts `binary serve --policy <policy_path> [args]` with piped stdout and stderr.
    fn start(&self, binary: &Path, policy_path: &Path, work_dir: &Path) -> anyhow::Result<Child> {
        Command::new(binary)
            .arg("serve")
            .arg("--policy")
            .arg(policy_path)
            .args(&self.args)
            .envs(self.env.iter().map(|(key, value)| (key, value)))
            .current_dir(work_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("failed to start the gate {}", binary.display()))
    }
}

/// Writes the policy into `work_dir`, with [`WORK_DIR_PLACEHOLDER`] replaced by `work_dir`.
fn write_policy(work_dir: &Path, policy_yaml: &str) -> anyhow::Result<PathBuf> {
    let policy_path = work_dir.join(POLICY_FILE);
    let policy = policy_yaml.replace(WORK_DIR_PLACEHOLDER, &work_dir.to_string_lossy());
    std::fs::write(&policy_path, policy).context("failed to write the policy file")?;
    Ok(policy_path)
}

// === impl GateProcess ===

impl GateProcess {
    /// Starts `fleetgate-proxy serve --policy <file>` with `policy_yaml` (see
    /// [`GateBuilder::spawn`]); [`WORK_DIR_PLACEHOLDER`] in the text becomes the work dir.
    pub async fn spawn(policy_yaml: &str) -> anyhow::Result<GateProcess> {
        Self::builder(policy_yaml).spawn().await
    }

    /// Configures a gate with more than a policy (binary, arguments, environment, timeout).
    pub fn builder(policy_yaml: &str) -> GateBuilder {
        GateBuilder {
            policy_yaml: policy_yaml.to_owned(),
            binary: None,
            args: Vec::new(),
            env: Vec::new(),
            startup_timeout: STARTUP_TIMEOUT,
        }
    }

    /// Runs a one-shot subcommand (`check-url`, `extract`, `check-policy`, ...) of
    /// [`gate_binary`] and returns its output, whatever its exit status.
    pub async fn run_cli(args: &[&str]) -> anyhow::Result<Output> {
        run_cli_with(&locate_binary().await?, args, &[]).await
    }

    /// [`GateProcess::run_cli`] with `input` on its stdin (then closed).
    pub async fn run_cli_stdin(args: &[&str], input: &[u8]) -> anyhow::Result<Output> {
        use tokio::io::AsyncWriteExt as _;
        let binary = locate_binary().await?;
        let mut child = Command::new(&binary)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("failed to run {} {args:?}", binary.display()))?;
        let mut stdin = child.stdin.take().context("no stdin pipe")?;
        let input = input.to_vec();
        // Written beside the wait: a long input must not block on a full stdout pipe.
        let writer = tokio::spawn(async move {
            let written = stdin.write_all(&input).await;
            drop(stdin);
            written
        });
        let output = tokio::time::timeout(CLI_TIMEOUT, child.wait_with_output())
            .await
            .with_context(|| format!("{} {args:?} ran past {CLI_TIMEOUT:?}", binary.display()))?
            .with_context(|| format!("failed to wait for {} {args:?}", binary.display()))?;
        writer
            .await
            .context("the stdin writer")?
            .context("failed to write stdin")?;
        Ok(output)
    }

    /// The `api` listener (the extract API).
    pub fn api_addr(&self) -> SocketAddr {
        self.api
    }

    /// The `admin` listener (health, metrics, status).
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin
    }

    /// The listener called `name` in the listening line (`api`, `admin`, `proxy`, ...).
    pub fn listener(&self, name: &str) -> Option<SocketAddr> {
        self.listeners.get(name).copied()
    }

    /// Every listener from the listening line, by name.
    pub fn listeners(&self) -> &BTreeMap<String, SocketAddr> {
        &self.listeners
    }

    /// The policy file the gate was started with (rewrite it to test reloads).
    pub fn policy_path(&self) -> &Path {
        &self.policy_path
    }

    /// The gate's temporary working directory (its current directory; removed on drop).
    pub fn work_dir(&self) -> &Path {
        self.work_dir.path()
    }

    /// The gate's process id, while it has not been reaped.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Everything the gate wrote to stderr so far, one line per log line.
    pub fn stderr_log(&self) -> String {
        joined(&self.stderr)
    }

    /// The stderr lines so far that parse as JSON objects (the structured log lines).
    pub fn json_logs(&self) -> Vec<serde_json::Value> {
        self.stderr
            .borrow()
            .iter()
            .filter_map(|line| parse_json_object(line))
            .collect()
    }

    /// What the gate wrote to stdout after its listening line.
    pub fn stdout_log(&self) -> String {
        joined(&self.stdout)
    }

    /// Waits until a stderr line (seen so far or arriving later) satisfies `predicate` and
    /// returns the first such line; fails after `timeout` or when stderr closes without one.
    pub async fn wait_for_log(
        &self,
        predicate: impl Fn(&str) -> bool,
        timeout: Duration,
    ) -> anyhow::Result<String> {
        let mut lines = self.stderr.clone();
        let search = async {
            loop {
                if let Some(line) = lines.borrow_and_update().iter().find(|l| predicate(l)) {
                    return Some(line.clone());
                }
                if lines.changed().await.is_err() {
                    return lines.borrow().iter().find(|l| predicate(l)).cloned();
                }
            }
        };
        match tokio::time::timeout(timeout, search).await {
            Ok(Some(line)) => Ok(line),
            Ok(None) => bail!(
                "gate closed stderr without a matching log line:\n{}",
                self.stderr_log()
            ),
            Err(_) => bail!(
                "no gate log line matched within {timeout:?}:\n{}",
                self.stderr_log()
            ),
        }
    }

    /// [`Self::wait_for_log`] over the JSON log lines, returning the matching one parsed.
    pub async fn wait_for_json_log(
        &self,
        predicate: impl Fn(&serde_json::Value) -> bool,
        timeout: Duration,
    ) -> anyhow::Result<serde_json::Value> {
        let matches = |line: &str| parse_json_object(line).is_some_and(|value| predicate(&value));
        let line = self.wait_for_log(matches, timeout).await?;
        parse_json_object(&line).context("failed to re-parse the matched gate log line")
    }

    /// Sends SIGTERM (graceful shutdown) and waits up to `timeout` for the exit.
    pub async fn terminate(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        if let Some(pid) = self.child.id() {
            let status = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await
                .context("failed to run kill -TERM")?;
            if !status.success() {
                bail!("failed to send SIGTERM to the gate (pid {pid}): kill exited {status}");
            }
        }
        self.wait_exit(timeout).await
    }

    /// Waits up to `timeout` for the gate to exit on its own; kills it if it does not.
    pub async fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(status) => status.context("failed to wait for the gate"),
            Err(_) => {
                // Best effort: the error below is what the test needs to see.
                let _ = self.child.kill().await;
                bail!("the gate did not exit within {timeout:?}; killed it")
            }
        }
    }
}

impl Drop for GateProcess {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- fleetgate-proxy stderr ---\n{}", self.stderr_log());
        }
    }
}

/// Runs `binary` with `args` (and extra `env`), collecting its output within [`CLI_TIMEOUT`].
pub async fn run_cli_with(
    binary: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> anyhow::Result<Output> {
    let run = Command::new(binary)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(CLI_TIMEOUT, run)
        .await
        .with_context(|| format!("{} {args:?} ran past {CLI_TIMEOUT:?}", binary.display()))?
        .with_context(|| format!("failed to run {} {args:?}", binary.display()))
}

/// A gate policy for loopback tests: listeners on port 0, the stub DNS server at `dns` as the
/// only resolver, 127.0.0.1 opened by `egress.allowCIDRs` (how an operator opens an internal
/// service), the volume under the gate's work dir, short fetch timeouts; `extra` is appended.
pub fn loopback_policy(dns: SocketAddr, extra: &str) -> String {
    format!(
        "version: v1\n\
         listen:\n  api: 127.0.0.1:0\n  admin: 127.0.0.1:0\n\
         egress:\n  allowCIDRs: [\"127.0.0.1/32\"]\n  resolver:\n    nameservers: [\"{dns}\"]\n    timeoutMs: 1500\n    attempts: 1\n\
         store:\n  root: ${{WORK_DIR}}/volume\n  agentVisibleRoot: /opt/data/cache/fleetgate\n\
         fetch:\n  headerTimeoutMs: 1500\n  totalTimeoutMs: 4000\n{extra}"
    )
}

/// Parses `{"listening": {"api": "127.0.0.1:PORT", ...}}` into listener name → address.
pub fn parse_listening_line(line: &str) -> anyhow::Result<BTreeMap<String, SocketAddr>> {
    let value: serde_json::Value = serde_json::from_str(line)
        .with_context(|| format!("failed to parse the gate's first stdout line as JSON: {line}"))?;
    let listening = value
        .get("listening")
        .and_then(serde_json::Value::as_object)
        .with_context(|| {
            format!("the gate's first stdout line has no `listening` object: {line}")
        })?;
    listening
        .iter()
        .map(|(name, addr)| {
            let addr = addr
                .as_str()
                .and_then(|text| text.parse::<SocketAddr>().ok())
                .with_context(|| format!("listener `{name}` is not a socket address: {addr}"))?;
            Ok((name.clone(), addr))
        })
        .collect()
}

async fn locate_binary() -> anyhow::Result<PathBuf> {
    tokio::task::spawn_blocking(gate_binary)
        .await
        .context("failed to join the gate build task")?
}

fn required_listener(
    listeners: &BTreeMap<String, SocketAddr>,
    name: &str,
) -> anyhow::Result<SocketAddr> {
    listeners.get(name).copied().with_context(|| {
        format!("the gate's listening line has no `{name}` listener: {listeners:?}")
    })
}

/// Reads lines into a watch channel until EOF; the sender drops at EOF, which readers observe.
fn capture_lines<R>(
    tasks: &mut BackgroundTasks,
    mut lines: Lines<R>,
) -> watch::Receiver<Vec<String>>
where
    R: AsyncBufRead + Unpin + Send + 'static,
{
    let (sender, receiver) = watch::channel(Vec::new());
    tasks.spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            sender.send_modify(|lines| lines.push(line));
        }
    });
    receiver
}

/// The first stdout line, or an error once the gate exits, closes stdout or times out.
async fn first_line(
    child: &mut Child,
    stdout: &mut Lines<BufReader<ChildStdout>>,
    timeout: Duration,
) -> anyhow::Result<String> {
    match tokio::time::timeout(timeout, stdout.next_line()).await {
        Ok(Ok(Some(line))) => Ok(line),
        Ok(Ok(None)) => {
            let status = match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
                Ok(Ok(status)) => status.to_string(),
                _ => "still running".to_owned(),
            };
            bail!("the gate closed stdout before its listening line ({status})")
        }
        Ok(Err(error)) => bail!("failed to read the gate's stdout: {error}"),
        Err(_) => bail!("the gate printed no listening line within {timeout:?}"),
    }
}

/// Gives the stderr reader a moment to reach EOF after the gate ended.
async fn wait_for_close(stderr: &watch::Receiver<Vec<String>>) {
    let mut stderr = stderr.clone();
    let closed = async { while stderr.changed().await.is_ok() {} };
    let _ = tokio::time::timeout(Duration::from_secs(1), closed).await;
}

fn joined(lines: &watch::Receiver<Vec<String>>) -> String {
    lines
        .borrow()
        .iter()
        .map(|line| format!("{line}\n"))
        .collect()
}

fn parse_json_object(line: &str) -> Option<serde_json::Value> {
    serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .filter(serde_json::Value::is_object)
}
