//! `fleetgate-controller`: the FleetPolicy controller binary.
//!
//! Thin: parse the command line, then hand over to the library. `crd` and `render` need no
//! cluster. Exit codes: 0 success, 1 failure, 64 bad usage (clap).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The fleetgate controller.
#[derive(Debug, Parser)]
#[command(name = "fleetgate-controller", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the FleetPolicy CRD as YAML.
    Crd,
    /// Render the ConfigMaps of FleetPolicy files offline and print them as YAML.
    Render {
        /// FleetPolicy YAML files (several documents per file are fine).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
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
        Command::Crd => fleetgate_controller::crd::crd_yaml()
            .map_err(|e| format!("failed to print the CRD: {e}")),
        Command::Render { files } => {
            fleetgate_controller::cli::render_files(&files).map_err(|e| e.to_string())
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
