//! `fleetgate-proxy`: the sidecar binary. Thin: parse the command line, run it.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    fleetgate_proxy::cli::run(fleetgate_proxy::cli::Cli::parse())
}
