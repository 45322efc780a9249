//! The command line: `serve`, `check-policy`, `check-url`, `extract`, `init-iptables`, `watch`.
//!
//! Exit codes: 0 success; 1 a URL was refused (`check-url`) or a command failed at run time;
//! 2 an invalid policy for the one-shot commands; 64 (`EX_USAGE`) an invalid policy for `serve`.

// Printing to stdout is this module's job: it is the command-line output.
#![allow(clippy::print_stdout)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::accept::Acceptor;
use crate::connect::OwnListeners;
use crate::forward;
use crate::metrics::ProxyMetrics;
use crate::pipeline::{ExtractOutcome, Pipeline};
use crate::policy::Policy;
use crate::runtime::Runtime;
use crate::server::{self, Shared};
use crate::{admin, reload, telemetry};

/// fleetgate-proxy: the egress gate sidecar for Hermes Agents.
#[derive(Debug, Parser)]
#[command(name = "fleetgate-proxy", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gate's listeners until SIGTERM / Ctrl-C.
    Serve(ServeArgs),
    /// Validate a policy file and print what it configures.
    CheckPolicy {
        /// The policy file.
        file: PathBuf,
    },
    /// Run the URL gates (secret, SSRF, blocklist) on URLs without fetching; one JSON line each.
    CheckUrl {
        /// Policy file (default: the embedded default).
        #[arg(long)]
        policy: Option<PathBuf>,
        /// URLs to check.
        #[arg(required = true)]
        urls: Vec<String>,
    },
    /// Print the fleet report of a Hermes home (status, cron cost); read-only.
    Report(crate::report::cli::ReportArgs),
    /// Install (or `--cleanup`, or `--dry-run` print) the nat-table rules that redirect the
    /// pod's outbound TCP to the transparent listener. Needs NET_ADMIN and NET_RAW.
    InitIptables(crate::iptables::Args),
    /// Run one watch of the policy once and print its output (new item lines or
    /// `{"wakeAgent": false}`).
    Watch(crate::watch::cli::WatchArgs),
    /// Run the extract pipeline once and print the JSON result.
    Extract {
        /// Policy file (default: the embedded default).
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Character limit (2000..500000).
        #[arg(long)]
        char_limit: Option<u64>,
        /// URLs to extract (at most five are processed).
        #[arg(required = true)]
        urls: Vec<String>,
    },
}

/// `serve` options.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Policy file, watched for changes (default: the embedded default).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// How often the policy file is checked for changes, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub reload_interval_ms: u64,
    /// Concurrent CONNECT tunnels on the forward proxy; past it a CONNECT gets 429
    /// `too_many_tunnels` with `Retry-After: 1`.
    /// Overrides `egress.maxTunnels` (default 1024).
    #[arg(long)]
    pub max_tunnels: Option<usize>,
    /// Idle timeout of a forward-proxy tunnel or relayed body, in milliseconds.
    /// Overrides `egress.timeouts.idleSeconds` (default 300 s).
    #[arg(long)]
    pub tunnel_idle_timeout_ms: Option<u64>,
    /// How long SIGTERM waits for in-flight requests and tunnels, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub drain_timeout_ms: u64,
}

/// Run the parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    let level = if matches!(cli.command, Command::Serve(_)) {
        "info"
    } else {
        "warn"
    };
    let _log = telemetry::init(level);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fleetgate-proxy: failed to start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match cli.command {
        Command::Serve(args) => rt.block_on(serve(args)),
        Command::CheckPolicy { file } => check_policy(&file),
        Command::Report(args) => match crate::report::cli::run(&args) {
            Ok(out) => {
                println!("{out}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("fleetgate-proxy: {e:#}");
                ExitCode::from(1)
            }
        },
        Command::InitIptables(args) => crate::iptables::run(&args),
        Command::Watch(args) => rt.block_on(crate::watch::cli::run(&args)),
        Command::CheckUrl { policy, urls } => rt.block_on(check_url(policy.as_deref(), &urls)),
        Command::Extract {
            policy,
            char_limit,
            urls,
        } => rt.block_on(extract(policy.as_deref(), char_limit, &urls)),
    }
}

fn load_policy(path: Option<&Path>) -> Result<Policy, crate::policy::PolicyError> {
    match path {
        Some(p) => Policy::load(p),
        None => Policy::embedded_default(),
    }
}

fn print_policy_errors(path: Option<&Path>, err: &crate::policy::PolicyError) {
    let name = path
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "<embedded default>".into());
    eprintln!("fleetgate-proxy: invalid policy {name}:");
    for e in &err.errors {
        eprintln!("  {}: {}", e.field, e.message);
    }
}

fn check_policy(file: &Path) -> ExitCode {
    match Policy::load(file) {
        Ok(p) => {
            let (list, warnings) = crate::gates::website_blocklist::Blocklist::load(
                p.blocklist.enabled,
                &p.blocklist.domains,
                &p.blocklist.shared_files,
                Path::new("."),
            );
            for w in &warnings {
                eprintln!("warning: {}", w.0);
            }
            let summary = json!({
                "valid": true,
                "sha256": p.sha256,
                "extractBackend": p.web.extract_backend,
                "charLimit": p.web.char_limit,
                "blocklistRules": list.len(),
                "storeRoot": p.store.root,
                "listen": {"api": p.listen.api.to_string(), "admin": p.listen.admin.to_string()},
            });
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            print_policy_errors(Some(file), &e);
            ExitCode::from(2)
        }
    }
}

fn one_shot_runtime(path: Option<&Path>) -> Result<(Arc<Runtime>, ProxyMetrics), ExitCode> {
    let policy = load_policy(path).map_err(|e| {
        print_policy_errors(path, &e);
        ExitCode::from(2)
    })?;
    let runtime = Runtime::build(policy).map_err(|e| {
        eprintln!("fleetgate-proxy: {e}");
        ExitCode::from(1)
    })?;
    let metrics = ProxyMetrics::unregistered().map_err(|e| {
        eprintln!("fleetgate-proxy: failed to set up metrics: {e}");
        ExitCode::from(1)
    })?;
    Ok((runtime, metrics))
}

async fn check_url(path: Option<&Path>, urls: &[String]) -> ExitCode {
    let (runtime, metrics) = match one_shot_runtime(path) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let pipeline = Pipeline::new(&runtime, &metrics);
    let mut any_denied = false;
    let mut out = std::io::stdout().lock();
    for url in urls {
        let check = pipeline.check_url(url).await;
        let line = match &check.refusal {
            None => {
                json!({"url": url, "verdict": "allow", "scope": null, "code": null, "message": null,
                           "addresses": check.addresses})
            }
            Some(r) => {
                any_denied = true;
                let scope = if r.ends_call() { "call" } else { "item" };
                json!({"url": url, "verdict": "deny", "scope": scope, "code": r.code(),
                       "message": r.message(), "addresses": check.addresses})
            }
        };
        let _ = writeln!(out, "{line}");
    }
    if any_denied {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

async fn extract(path: Option<&Path>, char_limit: Option<u64>, urls: &[String]) -> ExitCode {
    let (runtime, metrics) = match one_shot_runtime(path) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let pipeline = Pipeline::new(&runtime, &metrics);
    let urls = Value::from(urls.to_vec());
    let limit = char_limit.map(Value::from);
    let body = match pipeline.extract(&urls, limit.as_ref()).await {
        ExtractOutcome::Refused(r) => {
            json!({"success": false, "error": r.message(), "code": r.code()})
        }
        ExtractOutcome::Rows(rows) => json!({"results": rows}),
    };
    match serde_json::to_string_pretty(&body) {
        Ok(s) => {
            println!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fleetgate-proxy: failed to serialise the result: {e}");
            ExitCode::from(1)
        }
    }
}

async fn serve(args: ServeArgs) -> ExitCode {
    let policy = match load_policy(args.policy.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            print_policy_errors(args.policy.as_deref(), &e);
            return ExitCode::from(64);
        }
    };
    let listen = policy.listen.clone();
    let runtime = match Runtime::build(policy) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fleetgate-proxy: {e}");
            return ExitCode::from(1);
        }
    };
    for w in &runtime.warnings {
        tracing::warn!(warning = %w, "policy loaded with a warning");
    }
    let shared = match Shared::new(runtime) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fleetgate-proxy: failed to set up metrics: {e}");
            return ExitCode::from(1);
        }
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut bound = serde_json::Map::new();
    let mut tasks = Vec::new();
    for (name, addr) in [("api", listen.api), ("admin", listen.admin)] {
        let listener = match TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("fleetgate-proxy: failed to bind the {name} listener on {addr}: {e}");
                return ExitCode::from(1);
            }
        };
        let local = listener.local_addr().unwrap_or(addr);
        bound.insert(name.to_string(), json!(local.to_string()));
        if let Ok(mut l) = shared.gate.listeners.lock() {
            l.push((name.to_string(), local));
        }
        let s = shared.clone();
        let rx = stop_rx.clone();
        let acceptor = Acceptor::new(name, Some(shared.gate.metrics.accept_errors.clone()));
        tasks.push(match name {
            "api" => tokio::spawn(server::serve_http(
                listener,
                acceptor,
                move |r| server::api_or_llm(s.clone(), r),
                rx,
            )),
            _ => tokio::spawn(server::serve_http(
                listener,
                acceptor,
                move |r| admin::admin(s.clone(), r),
                rx,
            )),
        });
    }
    // Transparent capture (`listen.transparent`): bound before the forward proxy so
    // the forward proxy's loop check knows these listeners too.
    if let Some(addr) = listen.transparent {
        match crate::transparent::spawn(addr, &shared.gate, &stop_rx).await {
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
                return ExitCode::from(1);
            }
        }
    }
    if let Some(addr) = listen.forward_proxy {
        let listener = match TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!(
                    "fleetgate-proxy: failed to bind the forward_proxy listener on {addr}: {e}"
                );
                return ExitCode::from(1);
            }
        };
        let local = listener.local_addr().unwrap_or(addr);
        bound.insert("forward_proxy".to_string(), json!(local.to_string()));
        let own = match shared.gate.listeners.lock() {
            Ok(mut l) => {
                l.push(("forward_proxy".to_string(), local));
                OwnListeners::new(l.iter().map(|(_, a)| *a))
            }
            Err(_) => OwnListeners::new([local, listen.api, listen.admin]),
        };
        let proxy = forward::ForwardProxy::new(
            shared.gate.clone(),
            forward_limits(&args),
            own,
            stop_rx.clone(),
        );
        tasks.push(tokio::spawn(forward::serve(proxy, listener)));
    }
    println!("{}", json!({"listening": bound}));
    let _ = std::io::stdout().flush();
    tracing::info!(listeners = %json!(bound), "fleetgate-proxy serving");
    if let Some(path) = args.policy.clone() {
        let interval = Duration::from_millis(args.reload_interval_ms.max(100));
        tokio::spawn(reload::watch(shared.gate.clone(), path, interval));
    }
    wait_for_shutdown().await;
    tracing::info!("shutting down: draining connections");
    let _ = stop_tx.send(true);
    let drain = futures_util::future::join_all(tasks);
    let grace = Duration::from_millis(args.drain_timeout_ms) + Duration::from_secs(1);
    let _ = tokio::time::timeout(grace, drain).await;
    ExitCode::SUCCESS
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
