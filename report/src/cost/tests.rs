use super::*;

const DAY: f64 = DAY_SECONDS;
const SINCE: f64 = 1_790_000_000.0;
const UNTIL: f64 = SINCE + 7.0 * DAY;

fn job(id: &str, gate: Option<Gate>) -> CronJob {
    CronJob {
        id: id.to_string(),
        name: format!("job {id}"),
        enabled: true,
        schedule: "every 1h".to_string(),
        provider: None,
        model: None,
        model_snapshot: None,
        reasoning_effort: None,
        last_status: None,
        failure_streak: 0,
        state: "scheduled".to_string(),
        created_at: None,
        gate,
    }
}

fn exec(job_id: &str, status: ExecStatus, at: f64) -> Execution {
    Execution {
        job_id: job_id.to_string(),
        status,
        claimed_at: at,
        finished_at: status.is_terminal().then_some(at + 60.0),
        not_started: false,
        seq: 0,
    }
}

fn turn(job_id: &str, at: f64, cost: f64, reply: FinalReply) -> AgentTurn {
    AgentTurn {
        job_id: job_id.to_string(),
        session_id: format!("cron_{job_id}_{at}"),
        started_at: at,
        cost_nanos: to_nanos(cost),
        tokens: 100,
        reply,
        settled_at: None,
        last_start: at,
    }
}

fn text(s: &str) -> FinalReply {
    FinalReply::Text(s.to_string())
}

fn run(jobs: &[CronJob], ledger: Option<&Ledger>, turns: Option<&[AgentTurn]>) -> CostSection {
    compute(&CostInputs {
        jobs,
        ledger,
        turns,
        since: SINCE,
        until: UNTIL,
        days: 7,
    })
}

fn ledger(executions: Vec<Execution>) -> Ledger {
    let terminal = executions.iter().filter(|e| e.status.is_terminal()).count() as u64;
    Ledger {
        executions,
        terminal_rows: terminal,
        oldest_terminal: None,
    }
}

#[test]
fn a_gated_job_counts_runs_without_a_session_as_empty() {
    let execs: Vec<_> = (0..10)
        .map(|i| exec("g", ExecStatus::Completed, SINCE + f64::from(i) * DAY / 2.0))
        .collect();
    let turns = [
        turn("g", execs[3].claimed_at + 5.0, 0.25, text("[SILENT]")),
        turn(
            "g",
            execs[7].claimed_at + 5.0,
            0.75,
            text("3 new invoices need approval"),
        ),
    ];
    let section = run(
        &[job("g", Some(Gate::Script))],
        Some(&ledger(execs)),
        Some(&turns),
    );
    let g = &section.jobs[0];
    assert_eq!(
        (g.runs, g.agent_turns, g.empty_runs),
        (10, 2, Some(9)),
        "8 gated + 1 silent"
    );
    assert_eq!(g.empty_share, Some(0.9), "9 of 10 runs told nothing");
    assert_eq!(
        (g.cost_usd, g.tokens),
        (1.0, 200),
        "both turns' cost and tokens"
    );
    assert_eq!(g.cost_per_run_usd, Some(0.1), "cost per run");
    assert_eq!(
        g.cost_per_day_usd,
        round(1.0 / 7.0, 4),
        "cost per day over the whole window"
    );
    assert_eq!(
        g.flags,
        [Flag::MostlyEmpty],
        "a script gate is a gate, but 90 % is mostly empty"
    );
    assert_eq!(section.flagged, ["g"], "the flagged list names the job");
}

#[test]
fn an_ungated_job_above_24_runs_a_day_is_flagged_frequent() {
    let cases = [(168, false), (169, true)];
    for (count, flagged) in cases {
        let execs: Vec<_> = (0..count)
            .map(|i| {
                exec(
                    "f",
                    ExecStatus::Completed,
                    SINCE + 10.0 + f64::from(i) * 3000.0,
                )
            })
            .collect();
        let turns: Vec<_> = execs
            .iter()
            .map(|e| turn("f", e.claimed_at + 1.0, 0.01, text("report")))
            .collect();
        let section = run(&[job("f", None)], Some(&ledger(execs)), Some(&turns));
        let f = &section.jobs[0];
        assert_eq!(f.runs, count as u64, "every execution is a run");
        assert_eq!(
            f.flags.contains(&Flag::FrequentWithoutGate),
            flagged,
            "{count} runs in 7 days"
        );
        assert_eq!(f.empty_runs, Some(0), "real replies are not empty");
    }
}

#[test]
fn failed_attempts_that_never_started_and_running_executions_are_not_runs() {
    let mut never = exec("j", ExecStatus::Failed, SINCE + 100.0);
    never.not_started = true;
    let execs = vec![
        exec("j", ExecStatus::Failed, SINCE + 1000.0),
        exec("j", ExecStatus::Unknown, SINCE + 2000.0),
        never,
        exec("j", ExecStatus::Running, SINCE + 3000.0),
        exec("j", ExecStatus::Completed, SINCE - 500.0),
    ];
    let turns = [
        turn("j", SINCE + 1001.0, 0.5, FinalReply::Empty),
        turn("j", SINCE + 3001.0, 9.0, text("still going")),
        turn("j", SINCE - 499.0, 9.0, text("before the window")),
    ];
    let section = run(&[job("j", None)], Some(&ledger(execs)), Some(&turns));
    let j = &section.jobs[0];
    assert_eq!(
        (j.runs, j.runs_failed),
        (2, 2),
        "failed and unknown are failed runs"
    );
    assert_eq!(
        (j.agent_turns, j.cost_usd),
        (1, 0.5),
        "only the turn of a counted run is billed"
    );
    assert_eq!(j.empty_runs, Some(0), "a failed run is never an empty run");
}

#[test]
fn without_a_ledger_agent_turns_are_the_runs() {
    let turns = [
        turn("t", SINCE + 10.0, 0.2, text("NO_REPLY")),
        turn("t", SINCE + 20.0, 0.2, text("hello")),
        turn("t", SINCE - 20.0, 0.2, text("hello")),
    ];
    let section = run(&[job("t", None)], None, Some(&turns));
    let t = &section.jobs[0];
    assert_eq!(
        (t.runs, t.agent_turns, t.empty_runs),
        (2, 2, Some(1)),
        "turns in the window"
    );
    assert!(
        !section.sources.executions && section.sources.state_db,
        "sources say what was read"
    );
}

#[test]
fn a_pruned_ledger_and_a_young_job_shorten_the_span() {
    let coverage = SINCE + 3.0 * DAY;
    let mut execs: Vec<_> = (0..4)
        .map(|i| {
            exec(
                "p",
                ExecStatus::Completed,
                SINCE + f64::from(i) * DAY + 60.0,
            )
        })
        .collect();
    execs.push(exec("p", ExecStatus::Completed, coverage));
    let pruned = Ledger {
        executions: execs,
        terminal_rows: 1000,
        oldest_terminal: Some(coverage),
    };
    let mut young = job("y", None);
    young.created_at = Some(UNTIL - DAY);
    let section = run(
        &[job("p", Some(Gate::Monitor)), young],
        Some(&pruned),
        Some(&[]),
    );
    let p = &section.jobs[0];
    assert_eq!(p.span_days, 4.0, "the span starts at the coverage");
    assert_eq!(p.runs, 2, "only runs from the coverage on count");
    assert_eq!(
        p.runs_per_day, 0.5,
        "runs per day divide by the covered span"
    );
    assert_eq!(
        section.jobs[1].span_days, 1.0,
        "created_at is later than the coverage"
    );
    assert_eq!(
        section.sources.executions_coverage_from,
        Some(format_iso_z(coverage)),
        "reported"
    );
    let full = Ledger {
        terminal_rows: 999,
        ..pruned.clone()
    };
    let section = run(&[job("p", None)], Some(&full), Some(&[]));
    assert_eq!(
        section.sources.executions_coverage_from, None,
        "under 1000 rows nothing was pruned"
    );
}

#[test]
fn empty_runs_are_unknown_for_no_agent_jobs_and_without_state_db() {
    let execs = vec![
        exec("n", ExecStatus::Completed, SINCE + 10.0),
        exec("a", ExecStatus::Completed, SINCE + 10.0),
    ];
    let l = ledger(execs);
    let section = run(
        &[job("n", Some(Gate::NoAgent)), job("a", None)],
        Some(&l),
        Some(&[]),
    );
    assert_eq!(
        section.jobs[0].empty_runs, None,
        "no agent, nothing to measure"
    );
    assert_eq!(
        section.jobs[1].empty_runs,
        Some(1),
        "an agent job without a session is empty"
    );
    let section = run(&[job("a", None)], Some(&l), None);
    assert_eq!(
        (section.jobs[0].empty_runs, section.jobs[0].empty_share),
        (None, None),
        "unknown"
    );
    assert!(!section.sources.state_db, "state.db is reported unread");
}

#[test]
fn jobs_gone_from_the_store_are_listed_after_the_others_without_flags() {
    let execs: Vec<_> = (0..200)
        .map(|i| exec("gone", ExecStatus::Completed, SINCE + f64::from(i) * 60.0))
        .collect();
    let section = run(&[job("kept", None)], Some(&ledger(execs)), Some(&[]));
    let ids: Vec<&str> = section.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["kept", "gone"], "the removed job comes last");
    let gone = &section.jobs[1];
    assert_eq!(
        (gone.name.as_deref(), gone.enabled, gone.runs),
        (None, false, 200),
        "orphan"
    );
    assert!(
        gone.flags.is_empty() && section.flagged.is_empty(),
        "removed jobs are not flagged"
    );
    let kept = &section.jobs[0];
    assert_eq!(
        (kept.runs, kept.cost_per_run_usd, kept.empty_share),
        (0, None, None),
        "no runs"
    );
}

#[test]
fn the_total_is_the_sum_of_the_jobs_per_day_cost() {
    let turns = [
        turn("a", SINCE + 10.0, 0.7, text("x")),
        turn("b", SINCE + 10.0, 1.4, text("y")),
    ];
    let section = run(&[job("a", None), job("b", None)], None, Some(&turns));
    assert_eq!(section.total_cost_per_day_usd, 0.3, "0.1 + 0.2 per day");
    assert_eq!(
        section.definition, DEFINITION,
        "the definition is always included"
    );
    assert_eq!(
        (section.since.as_str(), section.window_days),
        ("2026-09-21T14:13:20Z", 7),
        "window"
    );
}

#[test]
fn an_empty_home_totals_zero_not_negative_zero() {
    let section = run(&[], None, None);
    assert!(
        section.total_cost_per_day_usd.is_sign_positive(),
        "an empty sum is -0.0 in IEEE arithmetic; the report must say 0"
    );
    let json = serde_json::to_string(&section).expect("serialises");
    assert!(
        json.contains("\"total_cost_per_day_usd\":0.0") && !json.contains("-0.0"),
        "{json}"
    );
}
