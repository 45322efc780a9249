//! `fleetgate-controller`: the FleetPolicy controller binary.
//!
//! Thin: parse the command line, then hand over to the library. `crd` and `render` need no
//! cluster; `run` starts the controller loop and the admin listener. Exit codes: 0 success,
//! 1 failure, 64 bad usage (clap).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{Parser, Subcommand};
use fleetgate_controller::admin::{self, AdminState};
use fleetgate_controller::cluster_baselines::ClusterBaselines;
use fleetgate_controller::crd::FleetPolicy;
use fleetgate_controller::crd::cluster_fleet_policy::ClusterFleetPolicy;
use fleetgate_controller::leader::{Leadership, LeaseConfig};
use fleetgate_controller::metrics::Metrics;
use fleetgate_controller::reconcile::{self, Context, FleetConfig};
use fleetgate_controller::webhook::server as webhook;
use futures_util::StreamExt;
use kube::api::{Api, ListParams};

/// The fleetgate controller.
#[derive(Debug, Parser)]
#[command(name = "fleetgate-controller", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the controller: reconcile FleetPolicies, serve /live /ready /metrics.
    Run(Box<RunArgs>),
    /// Print a CRD as YAML: the FleetPolicy's (default) or the ClusterFleetPolicy's.
    Crd {
        /// Which CRD.
        #[arg(value_enum, default_value = "fleet-policy")]
        kind: CrdKind,
    },
    /// Render the ConfigMaps of FleetPolicy files offline and print them as YAML.
    Render {
        /// FleetPolicy YAML files (several documents per file are fine).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// ClusterFleetPolicy YAML files: render each FleetPolicy under these baselines, as a
        /// controller with `--cluster-baseline` would (repeat the flag for several files).
        #[arg(long = "baseline", value_name = "FILE")]
        baselines: Vec<PathBuf>,
    },
}

/// The CRDs the controller defines.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum CrdKind {
    /// `fleetpolicies.fleetgate.dev` (namespaced).
    FleetPolicy,
    /// `clusterfleetpolicies.fleetgate.dev` (cluster-scoped).
    ClusterFleetPolicy,
}

/// `run` options.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Namespace to watch (the chart passes the release namespace).
    #[arg(long, env = "POD_NAMESPACE", conflicts_with = "all_namespaces")]
    namespace: Option<String>,
    /// Watch every namespace instead.
    #[arg(long)]
    all_namespaces: bool,
    /// Address of the admin listener.
    #[arg(long, env = "FLEETGATE_ADMIN_ADDR", default_value = "0.0.0.0:8080")]
    admin_addr: SocketAddr,
    /// Events name this instance (the pod name).
    #[arg(long, env = "POD_NAME")]
    instance: Option<String>,
    /// Secret holding the gates' report bearer token; fleet scraping is off without it.
    #[arg(long, env = "FLEETGATE_REPORT_TOKEN_SECRET")]
    report_token_secret: Option<String>,
    /// Key of the token in that Secret.
    #[arg(long, default_value = "token")]
    report_token_key: String,
    /// Deadline of one pod's scrape, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    scrape_timeout_ms: u64,
    /// Pods scraped at once.
    #[arg(long, default_value_t = 8)]
    scrape_concurrency: usize,
    /// Address of the sidecar-injection webhook's HTTPS listener.
    #[arg(long, env = "FLEETGATE_WEBHOOK_ADDR", default_value = "0.0.0.0:9443")]
    webhook_addr: SocketAddr,
    /// Serving certificate chain (PEM) of the webhook; the webhook is off without it.
    #[arg(
        long,
        env = "FLEETGATE_WEBHOOK_CERT",
        requires = "webhook_key",
        requires = "injector_config"
    )]
    webhook_cert: Option<PathBuf>,
    /// Private key (PEM) of the webhook certificate; both files are re-read when they change.
    #[arg(long, env = "FLEETGATE_WEBHOOK_KEY", requires = "webhook_cert")]
    webhook_key: Option<PathBuf>,
    /// Injector configuration (YAML) the chart renders: image, uid, resources, volumes.
    #[arg(long, env = "FLEETGATE_INJECTOR_CONFIG")]
    injector_config: Option<PathBuf>,
    /// Render every FleetPolicy under the cluster's ClusterFleetPolicies (needs their CRD and
    /// get/list/watch on them): nothing is rendered until they are listed.
    #[arg(long, env = "FLEETGATE_CLUSTER_BASELINE", default_value_t = false, action = clap::ArgAction::Set)]
    cluster_baseline: bool,
    /// Elect one leader through a Lease among the replicas; `false` makes this replica
    /// reconcile unconditionally (run exactly one replica then).
    #[arg(long, env = "FLEETGATE_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// Name of the Lease.
    #[arg(
        long,
        env = "FLEETGATE_LEASE_NAME",
        default_value = "fleetgate-controller"
    )]
    lease_name: String,
    /// Namespace of the Lease; defaults to the watched namespace.
    #[arg(long, env = "FLEETGATE_LEASE_NAMESPACE")]
    lease_namespace: Option<String>,
    /// Seconds one renewal keeps the lease; a new leader takes over at most this long after
    /// the old one stopped renewing.
    #[arg(long, default_value_t = 15)]
    lease_duration_seconds: u64,
    /// Seconds before the lease runs out that the holder renews it; also the clock skew
    /// tolerated between nodes.
    #[arg(long, default_value_t = 5)]
    lease_grace_seconds: u64,
}

fn main() -> ExitCode {
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
        Command::Crd { kind } => match kind {
            CrdKind::FleetPolicy => fleetgate_controller::crd::crd_yaml(),
            CrdKind::ClusterFleetPolicy => {
                fleetgate_controller::crd::cluster_fleet_policy::crd_yaml()
            }
        }
        .map_err(|e| format!("failed to print the CRD: {e}")),
        Command::Render { files, baselines } => {
            fleetgate_controller::cli::render_files_with(&files, &baselines)
                .map_err(|e| e.to_string())
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

/// Start the runtime, the admin listener and the controller loop; return on shutdown.
fn run(args: RunArgs) -> Result<(), String> {
    let webhook = webhook::Setup::from_args(
        args.webhook_addr,
        args.webhook_cert.as_deref(),
        args.webhook_key.as_deref(),
        args.injector_config.as_deref(),
    )
    .map_err(|e| e.to_string())?;
    let lease = match args.leader_elect {
        false => None,
        true => {
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
            Some(cfg)
        }
    };
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
        admin_port: fleetgate_controller::gate_poll::ADMIN_PORT,
        per_pod_timeout: std::time::Duration::from_millis(args.scrape_timeout_ms),
        concurrency: args.scrape_concurrency,
    });
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("failed to start the runtime: {e}"))?;
    runtime.block_on(async move {
        let client = kube::Client::try_default()
            .await
            .map_err(|e| format!("failed to build the Kubernetes client: {e}"))?;
        let mut state = AdminState::default();
        let metrics = Metrics::register(&state.registry).map_err(|e| format!("failed to register metrics: {e}"))?;
        state.accept_errors = Some(metrics.accept_errors.clone());
        let answered = Arc::new(std::sync::atomic::AtomicI64::new(0));
        state.api_answered_at = Some(answered.clone());
        let probe = tokio::spawn(admin::probe_api_server(client.clone(), answered));
        let listener = tokio::net::TcpListener::bind(admin_addr)
            .await
            .map_err(|e| format!("failed to bind the admin listener {admin_addr}: {e}"))?;
        let reconciler_synced = Arc::new(AtomicBool::new(false));
        state.synced.push(("the reconciler's FleetPolicy reflector", reconciler_synced.clone()));
        if let Some(setup) = &webhook {
            state.synced.push(("the webhook's FleetPolicy reflector", setup.serving()));
        }
        let admin = tokio::spawn(admin::serve(listener, state.clone()));
        let fps: Api<FleetPolicy> = match &namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        fps.list(&ListParams::default().limit(1)).await.map_err(|e| {
            format!("failed to list FleetPolicies ({e}); is the CRD installed? `fleetgate-controller crd | kubectl apply -f -`")
        })?;
        let (baselines, baseline_changes, baseline_task) = match cluster_baseline {
            false => (None, None, None),
            true => {
                let cfps: Api<ClusterFleetPolicy> = Api::all(client.clone());
                cfps.list(&ListParams::default().limit(1)).await.map_err(|e| {
                    format!("failed to list ClusterFleetPolicies ({e}); install the cluster part (charts/fleetgate-baseline) or turn clusterBaseline off")
                })?;
                let (view, changes, task) = ClusterBaselines::watch(client.clone());
                state.synced.push(("the ClusterFleetPolicy reflector", view.synced()));
                (Some(view), Some(changes), Some(task))
            }
        };
        let (leader, election) = match lease {
            None => (Leadership::sole(Some(metrics.clone())), None),
            Some(cfg) => {
                let (leader, election) = Leadership::elect(client.clone(), cfg, Some(metrics.clone()))
                    .await
                    .map_err(|e| format!("failed to join the leader election: {e}"))?;
                (leader, Some(election))
            }
        };
        let webhook_task = match webhook {
            Some(setup) => Some(
                setup
                    .spawn(
                        client.clone(),
                        namespace.as_deref(),
                        Some(metrics.clone()),
                        baselines.clone(),
                    )
                    .await
                    .map_err(|e| e.to_string())?,
            ),
            None => None,
        };
        state.ready.store(true, Ordering::Relaxed);
        let mut ctx = Context::new(client, metrics, instance).with_leader(leader);
        if let Some(fleet) = fleet {
            ctx = ctx.with_fleet(fleet);
        }
        if let Some(baselines) = baselines {
            ctx = ctx.with_baselines(baselines);
        }
        let ctx = Arc::new(ctx);
        let changes = match baseline_changes {
            Some(changes) => changes.left_stream(),
            None => futures_util::stream::pending().right_stream(),
        };
        reconcile::run(ctx, namespace.as_deref(), reconciler_synced, changes).await;
        if let Some(task) = baseline_task {
            task.abort();
        }
        if let Some(election) = election {
            election.step_down().await;
        }
        admin.abort();
        probe.abort();
        if let Some(task) = webhook_task {
            task.abort();
        }
        Ok(())
    })
}
