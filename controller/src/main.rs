//! `fleetgate-controller`: the FleetPolicy controller binary. Thin: the library's
//! [`fleetgate_controller::app`] parses the command line and runs it.

use std::process::ExitCode;

fn main() -> ExitCode {
    fleetgate_controller::app::main()
}
