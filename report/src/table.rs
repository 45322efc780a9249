//! The fleet report as plain-text tables, for people at a terminal.

use std::fmt::Write;

use serde_json::Value;

use super::cost::{Flag, JobCost};
use super::fleet::FleetReport;
use super::jobs::Gate;

/// Render both reports as aligned text tables.
pub fn render_table(report: &FleetReport) -> String {
    let mut out = String::new();
    managed_section(report, &mut out);
    effective_section(report, &mut out);
    observed_section(report, &mut out);
    cost_section(report, &mut out);
    let errors = report.status.errors.iter().chain(&report.crons.errors);
    for (i, error) in errors.enumerate() {
        if i == 0 {
            out.push_str("\nErrors\n");
        }
        let _ = writeln!(out, "  {error}");
    }
    out
}

fn managed_section(report: &FleetReport, out: &mut String) {
    let managed = &report.status.managed;
    let _ = match &managed.dir {
        None => writeln!(out, "Managed scope: none"),
        Some(dir) => writeln!(
            out,
            "Managed scope: {dir} (pinned keys: {}, config.yaml: {})",
            managed.keys,
            managed
                .sha256
                .as_deref()
                .map_or("absent".to_string(), |s| format!("sha256 {s}")),
        ),
    };
    if let Some(error) = &managed.error {
        let _ = writeln!(out, "  NOT APPLIED: {error}");
    }
}

fn effective_section(report: &FleetReport, out: &mut String) {
    out.push_str("\nEffective config\n");
    let rows = report
        .status
        .effective
        .0
        .iter()
        .map(|(k, v)| vec![k.to_string(), scalar(v)]);
    out.push_str(&grid(&["KEY", "VALUE"], rows.collect()));
}

fn observed_section(report: &FleetReport, out: &mut String) {
    out.push_str("\nObserved requests\n");
    if report.status.observed.is_empty() {
        out.push_str("  none recorded\n");
        return;
    }
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_string());
    let rows = report.status.observed.roles().map(|(role, o)| {
        let cells = [
            &o.model,
            &o.reasoning_effort,
            &o.service_tier,
            &o.response_service_tier,
        ];
        let mut row = vec![role.to_string()];
        row.extend(cells.into_iter().map(dash));
        row.push(dash(&o.ts));
        row
    });
    let headers = ["ROLE", "MODEL", "EFFORT", "TIER", "SERVED", "SEEN"];
    out.push_str(&grid(&headers, rows.collect()));
}

fn cost_section(report: &FleetReport, out: &mut String) {
    let cost = &report.crons.cost;
    let _ = writeln!(
        out,
        "\nCron cost, {} days ({} to {})",
        cost.window_days, cost.since, cost.until
    );
    let headers = [
        "ID", "NAME", "ON", "GATE", "RUNS", "FAILED", "EMPTY", "RUNS/DAY", "$/DAY", "$/RUN",
        "FLAGS",
    ];
    out.push_str(&grid(&headers, cost.jobs.iter().map(job_row).collect()));
    let flagged = if cost.flagged.is_empty() {
        "none".to_string()
    } else {
        cost.flagged.join(", ")
    };
    let _ = writeln!(
        out,
        "Total: ${:.4}/day; flagged: {flagged}",
        cost.total_cost_per_day_usd
    );
    let yes_no = |b: bool| if b { "read" } else { "unavailable" };
    let _ = write!(
        out,
        "Sources: executions.db {}, state.db {}",
        yes_no(cost.sources.executions),
        yes_no(cost.sources.state_db)
    );
    if let Some(from) = &cost.sources.executions_coverage_from {
        let _ = write!(out, " (ledger pruned: complete from {from})");
    }
    out.push('\n');
}

fn job_row(job: &JobCost) -> Vec<String> {
    let gate = match job.gate {
        None => "-",
        Some(Gate::NoAgent) => "no_agent",
        Some(Gate::Monitor) => "monitor",
        Some(Gate::Script) => "script",
    };
    let empty = match (job.empty_runs, job.empty_share) {
        (Some(n), Some(share)) => format!("{n} ({:.0}%)", share * 100.0),
        (Some(n), None) => n.to_string(),
        _ => "-".to_string(),
    };
    let flags: Vec<&str> = job
        .flags
        .iter()
        .map(|f| match f {
            Flag::FrequentWithoutGate => "frequent_without_gate",
            Flag::MostlyEmpty => "mostly_empty",
        })
        .collect();
    vec![
        job.id.clone(),
        job.name.clone().unwrap_or_else(|| "(removed)".to_string()),
        if job.enabled { "yes" } else { "no" }.to_string(),
        gate.to_string(),
        job.runs.to_string(),
        job.runs_failed.to_string(),
        empty,
        format!("{:.2}", job.runs_per_day),
        format!("{:.4}", job.cost_per_day_usd),
        job.cost_per_run_usd
            .map_or("-".to_string(), |c| format!("{c:.4}")),
        if flags.is_empty() {
            "-".to_string()
        } else {
            flags.join(",")
        },
    ]
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Null => "(unset)".to_string(),
        Value::String(s) if s.is_empty() => "\"\"".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Left-aligned columns separated by two spaces, indented by two.
fn grid(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header_row: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    let mut out = String::new();
    for row in std::iter::once(&header_row).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        let _ = writeln!(out, "  {}", cells.join("  ").trim_end());
    }
    out
}
