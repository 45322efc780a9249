//! `fleetgate-controller`: the FleetPolicy controller binary.

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!(
        "fleetgate-controller: the controller is not part of this build yet (gate policy format {})",
        fleetgate_controller::RENDERED_POLICY_VERSION
    );
    ExitCode::from(64)
}
