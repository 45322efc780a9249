//! The `report` subcommand: `fleetgate-proxy report --hermes-home DIR [--days N] [--json]`.

use std::path::PathBuf;

use anyhow::Context;

use super::fleet::fleet_report;
use super::managed::ManagedDir;
use super::options::{DEFAULT_DAYS, ReportOptions};
use super::table::render_table;

/// Arguments of `fleetgate-proxy report`.
#[derive(Clone, Debug, clap::Args)]
pub struct ReportArgs {
    /// The Hermes home to read (`$HERMES_HOME` of the agent, mounted read-only).
    #[arg(long, value_name = "DIR")]
    pub hermes_home: PathBuf,
    /// Cost window in days.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_DAYS,
          value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub days: u32,
    /// Print the JSON report (`{"status": ..., "crons": ...}`) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// The agent's managed directory as mounted here; default: `HERMES_MANAGED_DIR`, else
    /// `/etc/hermes`, as Hermes resolves it.
    #[arg(long, value_name = "DIR")]
    pub managed_dir: Option<PathBuf>,
}

impl ReportArgs {
    /// The report options these arguments select.
    pub fn options(&self) -> ReportOptions {
        let mut opts = ReportOptions::new(&self.hermes_home);
        opts.days = self.days;
        if let Some(dir) = &self.managed_dir {
            opts.managed_dir = ManagedDir::At(dir.clone());
        }
        opts
    }
}

/// Build the report and return what the command prints.
pub fn run(args: &ReportArgs) -> anyhow::Result<String> {
    anyhow::ensure!(
        args.hermes_home.is_dir(),
        "failed to read the Hermes home {}: not a directory",
        args.hermes_home.display()
    );
    let report = fleet_report(&args.options());
    if args.json {
        let mut text =
            serde_json::to_string_pretty(&report).context("failed to encode the report")?;
        text.push('\n');
        Ok(text)
    } else {
        Ok(render_table(&report))
    }
}
