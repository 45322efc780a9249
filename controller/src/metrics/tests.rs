use std::collections::BTreeSet;

use prometheus::{Encoder, TextEncoder};

use super::*;
use crate::crd::PodCounts;

fn exposition(reg: &Registry) -> String {
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&reg.gather(), &mut out)
        .expect("metrics must encode");
    String::from_utf8(out).expect("the exposition is UTF-8")
}

fn status(cost: f64, flagged: u32, selected: u32) -> FleetPolicyStatus {
    FleetPolicyStatus {
        total_cost_per_day: Some(cost),
        flagged: Some(flagged),
        pods: Some(PodCounts {
            selected,
            reporting: selected.saturating_sub(1),
            current: 1,
        }),
        ..FleetPolicyStatus::default()
    }
}

#[test]
fn fleet_gauges_follow_the_status_and_deleted_policies_disappear() {
    let reg = Registry::new();
    let m = Metrics::register(&reg).expect("metrics must register");
    m.observe_fleet("team-a", "fleet", &status(1.25, 2, 3));
    m.observe_fleet("team-b", "fleet", &status(0.5, 0, 1));
    let text = exposition(&reg);
    for line in [
        "fleetgate_controller_fleet_cost_per_day_usd{namespace=\"team-a\",policy=\"fleet\"} 1.25",
        "fleetgate_controller_fleet_flagged_jobs{namespace=\"team-a\",policy=\"fleet\"} 2",
        "fleetgate_controller_fleet_pods{namespace=\"team-a\",policy=\"fleet\",state=\"selected\"} 3",
        "fleetgate_controller_fleet_pods{namespace=\"team-a\",policy=\"fleet\",state=\"reporting\"} 2",
        "fleetgate_controller_fleet_cost_per_day_usd{namespace=\"team-b\",policy=\"fleet\"} 0.5",
    ] {
        assert!(
            text.contains(line),
            "the exposition must carry {line}:\n{text}"
        );
    }

    m.observe_fleet("team-a", "fleet", &status(2.0, 0, 3));
    let text = exposition(&reg);
    assert!(
        text.contains(
            "fleetgate_controller_fleet_cost_per_day_usd{namespace=\"team-a\",policy=\"fleet\"} 2"
        ),
        "a new status must replace the gauge value:\n{text}"
    );

    let live: BTreeSet<(String, String)> = [("team-b".to_string(), "fleet".to_string())].into();
    m.retain_fleet(&live);
    let text = exposition(&reg);
    assert!(
        !text.contains("namespace=\"team-a\""),
        "a deleted policy's series must be removed:\n{text}"
    );
    assert!(
        text.contains("namespace=\"team-b\""),
        "a live policy's series must stay:\n{text}"
    );
}

#[test]
fn a_status_without_fleet_fields_removes_the_series() {
    let reg = Registry::new();
    let m = Metrics::register(&reg).expect("metrics must register");
    m.observe_fleet("team-a", "fleet", &status(1.0, 1, 1));
    m.observe_fleet("team-a", "fleet", &FleetPolicyStatus::default());
    let text = exposition(&reg);
    assert!(
        !text.contains("fleetgate_controller_fleet_cost_per_day_usd{"),
        "an invalid or unscraped policy must not keep a stale cost:\n{text}"
    );
}
