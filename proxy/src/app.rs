//! The composition root of `serve`: the process's wiring, top to bottom.
//!
//! 1. The policy (a file, watched, or the embedded default) and the runtime built from it.
//! 2. The state: the gate's ([`crate::live::state::GateState`]: runtime, metrics, bound listeners) and each
//!    feature's beside it ([`Shared`]: the LLM route, watches, reports), metrics in one registry.
//! 3. The listeners, in the order the loop check needs them: `api` (the vendor-compatible
//!    fronts and the LLM route) and `admin`, then `transparent`, then `forward_proxy`, which
//!    learns every address bound before it. Each gets the gate state and its own, nothing more.
//! 4. The bound addresses on stdout as one JSON line, the policy reloader, then SIGTERM or
//!    Ctrl-C: every listener stops accepting and in-flight requests drain.

// The bound addresses on stdout are this module's output.
#![allow(clippy::print_stdout)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::accept::Acceptor;
use crate::api::{self, Shared};
use crate::base::dialer::OwnListeners;
use crate::egress::forward;
use crate::live::runtime::Runtime;
use crate::policy::{ListenPolicy, Policy};
use crate::{admin, live::reload};

/// `serve` options.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Policy file, watched for changes (default: the embedded default).
    #[arg(long)]
    pub(crate) policy: Option<PathBuf>,
    /// How often the policy file is checked for changes, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub(crate) reload_interval_ms: u64,
    /// Concurrent CONNECT tunnels on the forward proxy; past it a CONNECT gets 429
    /// `too_many_tunnels` with `Retry-After: 1`.
    /// Overrides `egress.maxTunnels` (default 1024).
    #[arg(long)]
    pub(crate) max_tunnels: Option<usize>,
    /// Idle timeout of a forward-proxy tunnel or relayed body, in milliseconds.
    /// Overrides `egress.timeouts.idleSeconds` (default 300 s).
    #[arg(long)]
    pub(crate) tunnel_idle_timeout_ms: Option<u64>,
    /// How long SIGTERM waits for in-flight requests and tunnels, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) drain_timeout_ms: u64,
    /// Threads that serve the listeners' connections (default: the cores the pod may use, at
    /// most 2). Each runs its own single-threaded runtime; an accepted connection goes to the
    /// thread with the fewest open connections and stays there, with no work stealing or
    /// wake-ups between threads.
    #[arg(long, env = "FLEETGATE_WORKERS")]
    pub(crate) workers: Option<std::num::NonZeroUsize>,
    /// Concurrent connections on the api listener; past it a new connection gets
    /// `503 too_many_connections` and is closed.
    #[arg(long, default_value_t = api::DEFAULT_API_MAX_CONNECTIONS, value_parser = at_least_one)]
    pub(crate) api_max_connections: usize,
    /// Concurrent connections on the admin listener.
    #[arg(long, default_value_t = api::DEFAULT_ADMIN_MAX_CONNECTIONS, value_parser = at_least_one)]
    pub(crate) admin_max_connections: usize,
    /// Longest pause between two pieces of a request body on the api listener, in
    /// milliseconds; past it the request gets `408 body_timeout`.
    #[arg(long, default_value_t = 10_000, value_parser = at_least_one_u64)]
    pub(crate) body_idle_timeout_ms: u64,
    /// Longest time a request body on the api listener may take in all, in milliseconds.
    #[arg(long, default_value_t = 60_000, value_parser = at_least_one_u64)]
    pub(crate) body_timeout_ms: u64,
    /// Bytes all in-flight request bodies of the api listener may hold together; past it a
    /// new request with a body gets `503 body_budget_exhausted`.
    #[arg(long, default_value_t = crate::judge::request_body::DEFAULT_BODY_BUDGET, value_parser = at_least_one)]
    pub(crate) body_budget_bytes: usize,
}

/// A count of at least one.
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        Ok(_) => Err("must be at least 1".into()),
        Err(e) => Err(format!("not a whole number: {e}")),
    }
}

/// A duration in milliseconds of at least one.
fn at_least_one_u64(s: &str) -> Result<u64, String> {
    at_least_one(s).map(|n| n as u64)
}

// === impl ServeArgs ===

impl ServeArgs {
    /// The bounds of the api (`"api"`) or admin listener.
    pub(crate) fn listener_limits(&self, name: &str) -> api::ListenerLimits {
        let bodies = crate::judge::request_body::BodyLimits {
            idle: Duration::from_millis(self.body_idle_timeout_ms),
            total: Duration::from_millis(self.body_timeout_ms),
            budget: self.body_budget_bytes,
        };
        if name == "api" {
            api::ListenerLimits {
                max_connections: self.api_max_connections,
                bodies,
                ..api::ListenerLimits::api()
            }
        } else {
            api::ListenerLimits {
                max_connections: self.admin_max_connections,
                bodies,
                ..api::ListenerLimits::admin()
            }
        }
    }
}

/// Listener threads when `--workers` is not given: the cores this process may use (its CPU
/// quota included), at most [`DEFAULT_WORKERS_MAX`]: a sidecar on a 64-core node does not
/// start 64 workers for one agent.
pub(crate) fn default_workers() -> std::num::NonZeroUsize {
    let cores = std::thread::available_parallelism().unwrap_or(std::num::NonZeroUsize::MIN);
    cores.min(DEFAULT_WORKERS_MAX)
}

/// The most listener threads a gate starts without `--workers`.
pub(crate) const DEFAULT_WORKERS_MAX: std::num::NonZeroUsize = match std::num::NonZeroUsize::new(2)
{
    Some(n) => n,
    None => std::num::NonZeroUsize::MIN,
};

/// The policy at `path`, or the embedded default without one.
pub(crate) fn load_policy(path: Option<&Path>) -> Result<Policy, crate::policy::PolicyError> {
    match path {
        Some(p) => Policy::load(p),
        None => Policy::embedded_default(),
    }
}

/// Every problem of a refused policy on stderr, one field a line.
pub(crate) fn print_policy_errors(path: Option<&Path>, err: &crate::policy::PolicyError) {
    let name = path
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "<embedded default>".into());
    eprintln!("fleetgate-proxy: invalid policy {name}:");
    for e in &err.errors {
        eprintln!("  {}: {}", e.field, e.message);
    }
}

/// Run the gate's listeners until SIGTERM or Ctrl-C, then drain.
pub async fn serve(args: ServeArgs) -> ExitCode {
    // 1. The policy, its runtime and the state; descriptors for every tunnel's pipes.
    match crate::egress::relay::zero_copy::raise_open_file_limit() {
        Some((before, after)) if after > before => {
            tracing::info!(
                before,
                after,
                "raised the soft open-file limit to the hard limit"
            );
        }
        Some(_) => {}
        None => tracing::warn!("the open-file limit could not be read or raised"),
    }
    let (shared, listen) = match start_state(&args) {
        Ok(started) => started,
        Err(code) => return code,
    };
    let gate = &shared.gate;

    // 2. The listeners, on this thread and `workers - 1` more.
    let workers = args.workers.unwrap_or_else(default_workers);
    let counted = &gate.metrics.shard_connections;
    let shards = match crate::base::shards::Shards::start_counted(workers.get() - 1, counted) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("fleetgate-proxy: failed to start the listener threads: {e}");
            return ExitCode::from(1);
        }
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let (bound, tasks) = match start_listeners(&args, &shared, &listen, &stop_rx, &shards).await {
        Ok(started) => started,
        Err(code) => return code,
    };

    // 3. Announce, reload, wait, drain.
    println!("{}", json!({"listening": bound}));
    let _ = std::io::stdout().flush();
    tracing::info!(listeners = %json!(bound), "fleetgate-proxy serving");
    if let Some(path) = args.policy.clone() {
        let interval = Duration::from_millis(args.reload_interval_ms.max(100));
        tokio::spawn(reload::poll_policy_file(gate.clone(), path, interval));
    }
    wait_for_shutdown().await;
    tracing::info!("shutting down: draining connections");
    let _ = stop_tx.send(true);
    let drain = futures_util::future::join_all(tasks);
    let grace = Duration::from_millis(args.drain_timeout_ms) + Duration::from_secs(1);
    let _ = tokio::time::timeout(grace, drain).await;
    ExitCode::SUCCESS
}

/// Load the policy, build its runtime and the state every listener shares; the exit code
/// when any of it fails.
fn start_state(args: &ServeArgs) -> Result<(Arc<Shared>, ListenPolicy), ExitCode> {
    let policy = match load_policy(args.policy.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            print_policy_errors(args.policy.as_deref(), &e);
            return Err(ExitCode::from(64));
        }
    };
    let listen = policy.listen.clone();
    let runtime = match Runtime::build(policy) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fleetgate-proxy: {e}");
            return Err(ExitCode::from(1));
        }
    };
    for w in &runtime.warnings {
        tracing::warn!(warning = %w, "policy loaded with a warning");
    }

    let shared = match Shared::new(runtime) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fleetgate-proxy: failed to set up metrics: {e}");
            return Err(ExitCode::from(1));
        }
    };
    tokio::spawn(Arc::clone(&shared.llm.spend).keep_written());
    Ok((shared, listen))
}

/// Bind and start every listener the policy names (api and admin, then transparent capture,
/// then the forward proxy), each stopping when `stop_rx` flips: the addresses bound by name
/// and the listener tasks, or the exit code when one cannot be bound.
async fn start_listeners(
    args: &ServeArgs,
    shared: &Arc<Shared>,
    listen: &ListenPolicy,
    stop_rx: &watch::Receiver<bool>,
    shards: &Arc<crate::base::shards::Shards>,
) -> Result<
    (
        serde_json::Map<String, serde_json::Value>,
        Vec<JoinHandle<()>>,
    ),
    ExitCode,
> {
    let gate = &shared.gate;
    let mut bound = serde_json::Map::new();
    let mut tasks = Vec::new();
    for name in ["api", "admin"] {
        let addr = if name == "api" {
            listen.api
        } else {
            listen.admin
        };
        let Some(listener) = bind(name, addr).await else {
            return Err(ExitCode::from(1));
        };
        let local = listener.local_addr().unwrap_or(addr);
        bound.insert(name.to_string(), json!(local.to_string()));
        gate.bound(name, local);
        let s = shared.clone();
        let acceptor = Acceptor::new(name, Some(gate.metrics.accept_errors.clone()));
        let rx = stop_rx.clone();
        let limits = args.listener_limits(name);
        tasks.push(if name == "api" {
            tokio::spawn(api::serve_http(
                listener,
                acceptor,
                move |r| api::api_or_llm(s.clone(), r),
                rx,
                shards.clone(),
                gate.clone(),
                limits,
            ))
        } else {
            tokio::spawn(api::serve_http(
                listener,
                acceptor,
                move |r| admin::admin(s.clone(), r),
                rx,
                shards.clone(),
                gate.clone(),
                limits,
            ))
        });
    }
    // Transparent capture is bound before the forward proxy, so the forward proxy's loop
    // check knows these listeners too.
    if let Some(addr) = listen.transparent {
        match crate::egress::transparent::spawn(addr, gate, stop_rx, shards).await {
            Ok(started) => {
                for (name, local, task) in started {
                    bound.insert(name.to_string(), json!(local.to_string()));
                    tasks.push(task);
                }
            }
            Err(e) => {
                eprintln!(
                    "fleetgate-proxy: failed to bind the transparent listener on {addr}: {e}"
                );
                return Err(ExitCode::from(1));
            }
        }
    }
    if let Some(addr) = listen.forward_proxy {
        let Some(listener) = bind("forward_proxy", addr).await else {
            return Err(ExitCode::from(1));
        };
        let local = listener.local_addr().unwrap_or(addr);
        bound.insert("forward_proxy".to_string(), json!(local.to_string()));
        gate.bound("forward_proxy", local);
        let own: OwnListeners = gate.own_listeners();
        let limits = forward_limits(args);
        let proxy = forward::ForwardProxy::new(gate.clone(), limits, own, stop_rx.clone());
        tasks.push(tokio::spawn(forward::serve(
            proxy,
            listener,
            shards.clone(),
        )));
    }
    Ok((bound, tasks))
}

/// Bind listener `name` on `addr`, saying on stderr why not.
async fn bind(name: &str, addr: std::net::SocketAddr) -> Option<TcpListener> {
    match TcpListener::bind(addr).await {
        Ok(l) => Some(l),
        Err(e) => {
            eprintln!("fleetgate-proxy: failed to bind the {name} listener on {addr}: {e}");
            None
        }
    }
}

fn forward_limits(args: &ServeArgs) -> forward::Limits {
    forward::Limits {
        max_tunnels: args.max_tunnels,
        idle_timeout: args
            .tunnel_idle_timeout_ms
            .map(|ms| Duration::from_millis(ms.max(1))),
        drain_timeout: Duration::from_millis(args.drain_timeout_ms),
        ..forward::Limits::default()
    }
}

async fn wait_for_shutdown() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}
