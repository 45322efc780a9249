//! `fleetgate-proxy watch --policy FILE NAME [--dry-run]`: one run, printed as the route
//! would answer. Exit 0 on success, 1 when the run fails, 2 on an invalid policy or an
//! unknown watch.

// Printing to stdout is this module's job: it is the command-line output.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{WatchError, Watches};
use crate::judge::metrics::ProxyMetrics;
use crate::live::runtime::Runtime;
use crate::policy::Policy;

/// `watch` options.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The policy file declaring the watch.
    #[arg(long)]
    pub(crate) policy: PathBuf,
    /// The watch to run.
    pub(crate) name: String,
    /// Print what would be reported without writing the state.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// Run one watch from the command line.
pub(crate) async fn run(args: &WatchArgs) -> ExitCode {
    let policy = match Policy::load(&args.policy) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("fleetgate-proxy: invalid policy {}:", args.policy.display());
            for fe in &e.errors {
                eprintln!("  {}: {}", fe.field, fe.message);
            }
            return ExitCode::from(2);
        }
    };
    let setup = Runtime::build(policy)
        .map_err(|e| e.to_string())
        .and_then(|rt| {
            let registry = prometheus::Registry::new();
            let metrics = ProxyMetrics::unregistered().map_err(|e| e.to_string())?;
            let watches = Watches::register(&registry).map_err(|e| e.to_string())?;
            Ok((rt, metrics, watches))
        });
    let (rt, metrics, watches) = match setup {
        Ok(v) => v,
        Err(e) => {
            eprintln!("fleetgate-proxy: {e}");
            return ExitCode::from(1);
        }
    };
    match watches
        .run(
            &rt,
            &metrics,
            &crate::base::dialer::OwnListeners::default(),
            &args.name,
            args.dry_run,
        )
        .await
    {
        Ok(out) => {
            print!("{}", out.text);
            ExitCode::SUCCESS
        }
        Err(e @ WatchError::Unknown(_)) => {
            eprintln!("fleetgate-proxy: watch {}: {e}", args.name);
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("fleetgate-proxy: watch {}: {e}", args.name);
            ExitCode::from(1)
        }
    }
}
