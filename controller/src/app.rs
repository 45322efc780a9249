//! The `fleetgate-controller` binary's work: parse the command line ([`crate::cli`]), run the
//! offline subcommands, or start the controller. `run` reads top to bottom in named steps:
//! check the flags, start logging and the runtime, then in the runtime the admin listener, the
//! CRD checks, the cluster baselines, the leader election, the webhook and the controller loop,
//! and the shutdown in reverse. Exit codes: 0 success, 1 failure, 64 bad usage (clap).

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use clap::Parser;
use futures_util::StreamExt;
use kube::api::{Api, ListParams};
use tokio::task::JoinHandle;

use crate::admin::{self, AdminState};
use crate::cli::{Cli, Command, RunArgs};
use crate::cluster_baselines::ClusterBaselines;
use crate::controller_loop;
use crate::crd::FleetPolicy;
use crate::crd::cluster_fleet_policy::ClusterFleetPolicy;
use crate::fleet_poll::FleetConfig;
use crate::leader::{Election, Leadership, LeaseConfig};
use crate::metrics::Metrics;
use crate::reconcile::Context;
use crate::webhook::server as webhook;

/// Parse the command line and run it; the process's exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(64)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let output = match cli.command {
        Command::Run(args) => {
            if args.namespace.is_none() && !args.all_namespaces {
                eprintln!(
                    "fleetgate-controller: run needs --namespace (or POD_NAMESPACE) or --all-namespaces"
                );
                return ExitCode::from(64);
            }
            run(*args).map(|()| String::new())
        }
        Command::Crd { kind } => {
            crate::cli::crd_yaml(kind).map_err(|e| format!("failed to print the CRD: {e}"))
        }
        Command::Render { files, baselines } => {
            crate::cli::render_files_with(&files, &baselines).map_err(|e| e.to_string())
        }
    };
    match output {
        Ok(text) => {
            let _ = std::io::stdout().write_all(text.as_bytes());
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("fleetgate-controller: {message}");
            ExitCode::from(1)
        }
    }
}

/// What `run` starts with, checked before the runtime starts.
struct Plan {
    webhook: Option<webhook::Setup>,
    lease: Option<LeaseConfig>,
    fleet: Option<FleetConfig>,
    namespace: Option<String>,
    admin_addr: std::net::SocketAddr,
    instance: Option<String>,
    cluster_baseline: bool,
}

/// Start the runtime, the admin listener and the controller loop; return on shutdown.
pub fn run(args: RunArgs) -> Result<(), String> {
    let plan = plan(args)?;
    init_logging();
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("failed to start the runtime: {e}"))?;
    runtime.block_on(serve(plan))
}

/// Check the flags: the webhook's files, the lease, the fleet scrape.
fn plan(args: RunArgs) -> Result<Plan, String> {
    let webhook = webhook::Setup::from_args(
        args.webhook_addr,
        args.webhook_cert.as_deref(),
        args.webhook_key.as_deref(),
        args.injector_config.as_deref(),
    )
    .map_err(|e| e.to_string())?;
    let lease = lease_config(&args)?;
    let RunArgs {
        namespace,
        admin_addr,
        instance,
        cluster_baseline,
        ..
    } = args;
    let fleet = args.report_token_secret.map(|token_secret| FleetConfig {
        token_secret,
        token_key: args.report_token_key,
        admin_port: crate::gate_poll::ADMIN_PORT,
        per_pod_timeout: Duration::from_millis(args.scrape_timeout_ms),
        concurrency: args.scrape_concurrency,
    });
    Ok(Plan {
        webhook,
        lease,
        fleet,
        namespace,
        admin_addr,
        instance,
        cluster_baseline,
    })
}

/// The lease of the leader election, or `None` with `--leader-elect=false`.
fn lease_config(args: &RunArgs) -> Result<Option<LeaseConfig>, String> {
    if !args.leader_elect {
        return Ok(None);
    }
    let cfg = LeaseConfig {
        name: args.lease_name.clone(),
        namespace: args
            .lease_namespace
            .clone()
            .or_else(|| args.namespace.clone())
            .ok_or("leader election needs --lease-namespace with --all-namespaces")?,
        identity: args.instance.clone().unwrap_or_default(),
        duration: Duration::from_secs(args.lease_duration_seconds),
        grace: Duration::from_secs(args.lease_grace_seconds),
    };
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(Some(cfg))
}

/// JSON logs, filtered by `RUST_LOG` (default `info`).
fn init_logging() {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
}

/// The tasks `run` aborts when the controller loop ends.
struct Tasks {
    admin: JoinHandle<()>,
    probe: JoinHandle<()>,
    baselines: Option<JoinHandle<()>>,
    election: Option<Election>,
    webhook: Option<JoinHandle<()>>,
}

/// In the runtime: start everything, run the controller loop, shut down.
async fn serve(plan: Plan) -> Result<(), String> {
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("failed to build the Kubernetes client: {e}"))?;
    let mut state = AdminState::default();
    let metrics = Metrics::register(&state.registry)
        .map_err(|e| format!("failed to register metrics: {e}"))?;
    state.accept_errors = Some(metrics.accept_errors.clone());
    let answered = Arc::new(AtomicI64::new(0));
    state.api_answered_at = Some(answered.clone());
    let probe = tokio::spawn(admin::probe_api_server(client.clone(), answered));
    let admin_addr = plan.admin_addr;
    let listener = tokio::net::TcpListener::bind(admin_addr)
        .await
        .map_err(|e| format!("failed to bind the admin listener {admin_addr}: {e}"))?;
    let reconciler_synced = Arc::new(AtomicBool::new(false));
    state.synced.push((
        "the reconciler's FleetPolicy reflector",
        reconciler_synced.clone(),
    ));
    if let Some(setup) = &plan.webhook {
        state
            .synced
            .push(("the webhook's FleetPolicy reflector", setup.serving()));
    }
    let admin = tokio::spawn(admin::serve(listener, state.clone()));
    check_fleet_policy_crd(&client, plan.namespace.as_deref()).await?;
    let (baselines, baseline_changes, baseline_task) = match plan.cluster_baseline {
        false => (None, None, None),
        true => {
            let (view, changes, task) = watch_cluster_baselines(&client).await?;
            state
                .synced
                .push(("the ClusterFleetPolicy reflector", view.synced()));
            (Some(view), Some(changes), Some(task))
        }
    };
    let (leader, election) = match plan.lease {
        None => (Leadership::sole(Some(metrics.clone())), None),
        Some(cfg) => {
            let (leader, election) = Leadership::elect(client.clone(), cfg, Some(metrics.clone()))
                .await
                .map_err(|e| format!("failed to join the leader election: {e}"))?;
            (leader, Some(election))
        }
    };
    let webhook_task = match plan.webhook {
        Some(setup) => Some(
            setup
                .spawn(
                    client.clone(),
                    plan.namespace.as_deref(),
                    Some(metrics.clone()),
                    baselines.clone(),
                )
                .await
                .map_err(|e| e.to_string())?,
        ),
        None => None,
    };
    state.ready.store(true, Ordering::Relaxed);
    let mut ctx = Context::new(client, metrics, plan.instance).with_leader(leader);
    if let Some(fleet) = plan.fleet {
        ctx = ctx.with_fleet(fleet);
    }
    if let Some(baselines) = baselines {
        ctx = ctx.with_baselines(baselines);
    }
    let changes = match baseline_changes {
        Some(changes) => changes.left_stream(),
        None => futures_util::stream::pending().right_stream(),
    };
    controller_loop::run(
        Arc::new(ctx),
        plan.namespace.as_deref(),
        reconciler_synced,
        changes,
    )
    .await;
    shut_down(Tasks {
        admin,
        probe,
        baselines: baseline_task,
        election,
        webhook: webhook_task,
    })
    .await;
    Ok(())
}

/// List one FleetPolicy: fails with the fix when the CRD is not installed.
async fn check_fleet_policy_crd(
    client: &kube::Client,
    namespace: Option<&str>,
) -> Result<(), String> {
    let fps: Api<FleetPolicy> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    fps.list(&ListParams::default().limit(1)).await.map_err(|e| {
        format!("failed to list FleetPolicies ({e}); is the CRD installed? `fleetgate-controller crd | kubectl apply -f -`")
    })?;
    Ok(())
}

/// Check the ClusterFleetPolicy CRD is installed, then start its reflector.
async fn watch_cluster_baselines(
    client: &kube::Client,
) -> Result<
    (
        ClusterBaselines,
        impl futures_util::Stream<Item = ()> + Send + 'static,
        JoinHandle<()>,
    ),
    String,
> {
    let cfps: Api<ClusterFleetPolicy> = Api::all(client.clone());
    cfps.list(&ListParams::default().limit(1)).await.map_err(|e| {
        format!("failed to list ClusterFleetPolicies ({e}); install the cluster part (charts/fleetgate-baseline) or turn clusterBaseline off")
    })?;
    Ok(ClusterBaselines::watch(client.clone()))
}

/// Stop what `serve` started, the baselines first and the webhook last.
async fn shut_down(tasks: Tasks) {
    if let Some(task) = tasks.baselines {
        task.abort();
    }
    if let Some(election) = tasks.election {
        election.step_down().await;
    }
    tasks.admin.abort();
    tasks.probe.abort();
    if let Some(task) = tasks.webhook {
        task.abort();
    }
}
