//! The cron cost report, kept between reports: what a settled past added up to is kept per
//! job and ten-minute bucket, and each report reads only what is new.
//!
//! A report counts the runs anchored (claimed, or started for a run without a ledger row) in
//! each job's span `[span_start, until]`. The cache splits that axis in three:
//!
//! - **Settled buckets** `[k·10 min, (k+1)·10 min)` below a boundary `c1`: per job the
//!   [`Totals`] of the runs anchored there, plus what re-reading the bucket needs (the latest
//!   instant one of its runs can own a turn, `turn_hi`, and the latest start of a session of
//!   its lineages, `lineage_hi`). A bucket settles when it ended five minutes ago, every
//!   execution claimed in it is terminal, and every lineage that can belong to its runs has
//!   ended and has not been billed for five minutes.
//! - **The head**: the bucket holding a span's start is only partly in the span. Its runs are
//!   re-read from the databases by range (its executions by claim text, its sessions by
//!   start) and kept one record per run, for that bucket only.
//! - **The tail** from `c1` to now is read on every report: the executions claimed in it,
//!   the sessions started in it (auxiliary usage by one index probe per lineage session) and
//!   the replies of its turns. Buckets that settled meanwhile are folded in.
//!
//! Everything is exact, not estimated, under three rules Hermes keeps: a terminal execution
//! row never changes (§ ledger), a session's counters and auxiliary rows stop changing a few
//! seconds after it ends (five minutes are allowed), and rows are inserted with the clock
//! of their insertion (a new execution is not claimed in the settled past, a new session
//! does not start there). Each report checks what it can afford to: both files are the same
//! (device, inode, schema cookie, so a replaced home, a migration or a VACUUM is seen), the
//! newest row of each table read last time is still there, no new execution or session
//! lands below `c1`, the claim texts stay regular timestamps with one separator (text ranges
//! are widened by the spread of their UTC offsets, two after a daylight-saving change, and
//! filtered by instant), and on a ledger Hermes prunes (under 50,000 terminal rows) that no
//! settled row in use was deleted.
//! Any doubt recomputes the report in full and rebuilds the cache. A full recompute also
//! runs every six hours whatever happens; the incremental figures are then compared with
//! it and a difference is counted ([`Counters::mismatches`]) and logged.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use rusqlite::Connection;
use rustc_hash::{FxHashMap, FxHashSet};

use super::cost::{
    CostSection, RunRecord, Totals, Window, group_executions_of, group_turns, job_runs,
};
use super::crons::{CronCostReport, FullRead, read_full};
use super::jobs::CronJob;
use super::ledger::{ClaimShape, ClaimTexts, Execution, LedgerSnapshot, coverage_from};
use super::options::ReportOptions;
use super::time::parse_iso;
use super::turns::{AgentTurn, AuxRead, StateSnapshot, TurnRange, job_ids};

/// Width of a bucket in seconds.
pub const BUCKET_SECONDS: f64 = 600.0;
/// How long a lineage must have been still before its figures count as final.
pub const SETTLE_SECONDS: f64 = 300.0;
/// How often the report is recomputed in full whatever the checks say.
pub const VERIFY_EVERY_SECONDS: f64 = 6.0 * 3600.0;
/// Terminal rows below which the ledger is recounted on each report (Hermes keeps 1,000).
const SMALL_LEDGER_ROWS: u64 = 50_000;

/// How the reports of a [`CostCache`] were computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Reports computed in full (first report, a check that failed, the periodic one).
    pub full: u64,
    /// Reports computed from the cache.
    pub incremental: u64,
    /// Periodic full recomputes whose figures differed from the cache's.
    pub mismatches: u64,
}

/// The cron cost report with its figures kept between calls.
#[derive(Debug, Default)]
pub struct CostCache {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    cached: Option<Cached>,
    counters: Counters,
}

/// Why the cache cannot answer: the report is recomputed in full.
#[derive(Debug)]
struct Stale(#[allow(dead_code)] &'static str);

/// Identity of a database file: device, inode, schema cookie.
type FileId = (u64, u64, i64);

#[derive(Debug)]
struct Cached {
    home: PathBuf,
    days: u32,
    ledger_file: FileId,
    state_file: FileId,
    /// How every claim text read so far is written; `None` before the first one.
    shape: Option<ClaimShape>,
    ledger_newest: Option<(i64, String)>,
    sessions_newest: Option<(i64, String)>,
    /// Terminal rows at the last count.
    terminal_rows: u64,
    /// Buckets below this index are settled.
    c1: i64,
    buckets: BTreeMap<i64, Bucket>,
    /// Per job, the sum of every cached bucket.
    sums: FxHashMap<String, Totals>,
    /// Per-run records of head buckets, kept while they stay heads (large ledgers only).
    heads: FxHashMap<i64, Vec<(String, RunRecord)>>,
    verified_at: f64,
}

#[derive(Debug, Default)]
struct Bucket {
    jobs: FxHashMap<String, Totals>,
    /// Terminal executions claimed in the bucket.
    exec_rows: u64,
    /// No run of the bucket owns a turn that started after this.
    turn_hi: f64,
    /// No lineage of its runs has a session that started after this.
    lineage_hi: f64,
}

impl Cached {
    /// Cache settled bucket `k`.
    fn add(&mut self, k: i64, bucket: Bucket) {
        for (id, totals) in &bucket.jobs {
            self.sums.entry(id.clone()).or_default().add(totals);
        }
        self.buckets.insert(k, bucket);
    }

    /// Forget the buckets below `k` (they fell out of every span).
    fn drop_below(&mut self, k: i64) {
        let kept = self.buckets.split_off(&k);
        for bucket in std::mem::replace(&mut self.buckets, kept).into_values() {
            for (id, totals) in &bucket.jobs {
                if let Some(sum) = self.sums.get_mut(id) {
                    sum.sub(totals);
                }
            }
        }
        self.sums.retain(|_, sum| *sum != Totals::default());
    }

    /// Job `id`'s totals over the cached buckets after `h`.
    fn settled_after(&self, id: &str, h: i64) -> Totals {
        let mut sum = self.sums.get(id).copied().unwrap_or_default();
        for (_, bucket) in self.buckets.range(..=h) {
            if let Some(totals) = bucket.jobs.get(id) {
                sum.sub(totals);
            }
        }
        sum
    }
}

fn bucket_of(t: f64) -> i64 {
    (t / BUCKET_SECONDS).floor() as i64
}

fn bucket_start(k: i64) -> f64 {
    k as f64 * BUCKET_SECONDS
}

impl CostCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// How the reports so far were computed.
    pub fn counters(&self) -> Counters {
        self.lock().counters
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| {
            // A report that panicked may have left the cache half updated: start afresh.
            let mut state = poisoned.into_inner();
            state.cached = None;
            state
        })
    }

    /// The cron cost report of `opts`: from the cache when it can answer, else in full.
    pub fn cron_cost(&self, opts: &ReportOptions) -> CronCostReport {
        let until = opts.now_unix();
        let since = until - f64::from(opts.days) * super::time::DAY_SECONDS;
        let mut state = self.lock();
        let mine = state
            .cached
            .as_mut()
            .filter(|c| c.home == opts.hermes_home && c.days == opts.days);
        let mut check = None;
        // Offsets seen before outlive a rebuild: a full read does not read every old row.
        let mut seen_shape = None;
        if let Some(cached) = mine {
            let due = until - cached.verified_at >= VERIFY_EVERY_SECONDS;
            match incremental(cached, opts, since, until) {
                Ok(report) if !due => {
                    state.counters.incremental += 1;
                    return report;
                }
                Ok(report) => check = Some(report),
                Err(Stale(why)) => tracing::debug!(reason = why, "report cache stale"),
            }
            seen_shape = cached.shape;
        }
        let read = read_full(opts, since, until);
        let (report, cached) = match build(&read, opts, since, until, seen_shape) {
            Some((cached, cost)) => (read.finish(cost), Some(cached)),
            None => (read.report(opts, since, until), None),
        };
        if let Some(check) = check
            && check.cost != report.cost
        {
            state.counters.mismatches += 1;
            tracing::warn!(
                home = %opts.hermes_home.display(),
                "the incremental cron cost differed from a full recompute; the cache is rebuilt"
            );
        }
        state.counters.full += 1;
        state.cached = cached;
        report
    }
}

/// Build the cache from a full read, with the cost object of that read; `None` when its
/// sources do not allow a cache (the caller then computes the report plainly).
fn build(
    read: &FullRead,
    opts: &ReportOptions,
    since: f64,
    until: f64,
    seen_shape: Option<ClaimShape>,
) -> Option<(Cached, CostSection)> {
    let (ledger, turns) = (read.ledger.as_ref()?, read.turns.as_deref()?);
    let (lsnap, ssnap) = (
        read.ledger_snapshot.as_ref()?,
        read.state_snapshot.as_ref()?,
    );
    // Claim texts are compared as text: every one read must be a regular timestamp. An
    // empty ledger has no shape yet; its first rows give it one.
    let shape = match lsnap.shapes().claims() {
        ClaimTexts::Irregular => return None,
        ClaimTexts::None => seen_shape,
        ClaimTexts::Shaped(shape) => match seen_shape {
            Some(seen) => Some(shape.merge(seen)?),
            None => Some(shape),
        },
    };
    // Without end times nothing ever settles: every report would read the whole window.
    if !ssnap.dated() {
        return None;
    }
    let coverage = ledger.coverage_from(since);
    let start = coverage.map_or(since, |c| c.max(since));
    let mut cached = Cached {
        home: opts.hermes_home.clone(),
        days: opts.days,
        ledger_file: file_id(lsnap.conn(), &opts.hermes_home.join("cron/executions.db")).ok()?,
        state_file: file_id(ssnap.conn(), &opts.hermes_home.join("state.db")).ok()?,
        shape,
        ledger_newest: newest(lsnap.conn(), "executions").ok()?,
        sessions_newest: newest(ssnap.conn(), "sessions").ok()?,
        terminal_rows: ledger.terminal_rows,
        // The bucket holding the span start is only ever read as a head: its aggregate may
        // miss runs before the window, which no span includes.
        c1: bucket_of(start),
        buckets: BTreeMap::new(),
        sums: FxHashMap::default(),
        heads: FxHashMap::default(),
        verified_at: until,
    };
    // The runs are computed once, from the start of the first bucket: the report counts
    // those in each job's span, the cache keeps the settled buckets.
    let runs = runs_from(&cached, &ledger.executions, turns, until, &read.jobs);
    let window = read_window(since, until, opts.days, coverage);
    let mut ids: Vec<&str> = read.jobs.iter().map(|j| j.id.as_str()).collect();
    let mut orphans: Vec<&str> = runs
        .keys()
        .map(String::as_str)
        .filter(|id| read.jobs.iter().all(|j| j.id != *id))
        .collect();
    orphans.sort_unstable();
    ids.extend(orphans);
    let totals: Vec<(String, Totals)> = ids
        .into_iter()
        .map(|id| {
            let lo = window.span_start(&read.jobs, id);
            let mut sum = Totals::default();
            for run in runs
                .get(id)
                .into_iter()
                .flatten()
                .filter(|r| r.anchor >= lo)
            {
                sum.add_run(run);
            }
            (id.to_string(), sum)
        })
        .collect();
    let cost = window.section(&read.jobs, &totals);
    fold(&mut cached, &runs, &ledger.executions, turns, until);
    Some((cached, cost))
}

/// Every job's runs anchored from the cache's `c1` on.
fn runs_from(
    cached: &Cached,
    executions: &[Execution],
    turns: &[AgentTurn],
    until: f64,
    jobs: &[CronJob],
) -> FxHashMap<String, Vec<RunRecord>> {
    runs_between(bucket_start(cached.c1), until, executions, turns, jobs)
}

fn runs_between(
    lo: f64,
    hi: f64,
    executions: &[Execution],
    turns: &[AgentTurn],
    jobs: &[CronJob],
) -> FxHashMap<String, Vec<RunRecord>> {
    let execs = group_executions_of(executions);
    let turns = group_turns(Some(turns));
    let ids: FxHashSet<&str> = jobs
        .iter()
        .map(|j| j.id.as_str())
        .chain(execs.keys().copied())
        .chain(turns.keys().copied())
        .collect();
    ids.into_iter()
        .map(|id| {
            let runs = job_runs(
                lo,
                hi,
                execs.get(id).map_or(&[][..], Vec::as_slice),
                turns.get(id).map_or(&[][..], Vec::as_slice),
            );
            (id.to_string(), runs)
        })
        .collect()
}

/// What one pass over the rows learns about each bucket from `c1` on.
#[derive(Debug)]
struct Pending {
    bucket: Bucket,
    /// Every execution claimed in it is terminal.
    terminal: bool,
    /// A terminal execution claimed in it has no end and no later claim of its job.
    endless: bool,
    /// The latest lineage start of the turns that started in it.
    last_start: f64,
}

/// The claims of each job whose rows lack an end, sorted, to find the claim after one.
struct NextClaim<'a> {
    claims: FxHashMap<&'a str, Vec<f64>>,
}

impl<'a> NextClaim<'a> {
    fn of(executions: &'a [Execution]) -> Self {
        let endless: FxHashSet<&str> = executions
            .iter()
            .filter(|e| e.finished_at.is_none())
            .map(|e| e.job_id.as_str())
            .collect();
        let mut claims: FxHashMap<&str, Vec<f64>> = FxHashMap::default();
        for e in executions
            .iter()
            .filter(|e| endless.contains(e.job_id.as_str()))
        {
            claims
                .entry(e.job_id.as_str())
                .or_default()
                .push(e.claimed_at);
        }
        for list in claims.values_mut() {
            list.sort_by(f64::total_cmp);
        }
        Self { claims }
    }

    /// The first claim of `e`'s job after `e`'s.
    fn after(&self, e: &Execution) -> Option<f64> {
        let list = self.claims.get(e.job_id.as_str())?;
        list.get(list.partition_point(|c| *c <= e.claimed_at))
            .copied()
    }
}

impl Default for Pending {
    /// A bucket nothing was read in: settled as far as its rows go.
    fn default() -> Self {
        Self {
            bucket: Bucket::default(),
            terminal: true,
            endless: false,
            last_start: f64::MIN,
        }
    }
}

/// Fold the buckets from `c1` on that have settled by `now` into the cache, in order, and
/// stop at the first that has not. One pass over the rows sorts them into buckets.
fn fold(
    cached: &mut Cached,
    runs: &FxHashMap<String, Vec<RunRecord>>,
    executions: &[Execution],
    turns: &[AgentTurn],
    now: f64,
) {
    let still = now - SETTLE_SECONDS;
    let (from, last) = (cached.c1, bucket_of(still));
    if last <= from {
        return;
    }
    let mut pending: FxHashMap<i64, Pending> = FxHashMap::default();
    let next_claim = NextClaim::of(executions);
    fn slot(pending: &mut FxHashMap<i64, Pending>, k: i64) -> &mut Pending {
        pending.entry(k).or_default()
    }
    for e in executions
        .iter()
        .filter(|e| bucket_of(e.claimed_at) >= from)
    {
        let at = slot(&mut pending, bucket_of(e.claimed_at));
        at.bucket.exec_rows += 1;
        at.terminal &= e.status.is_terminal();
        // A terminal row without an end owns turns up to the job's next claim.
        let end = e.finished_at.or_else(|| next_claim.after(e));
        match end {
            Some(end) => at.bucket.turn_hi = at.bucket.turn_hi.max(end),
            None => at.endless = true,
        }
    }
    // No bucket settles past the first turn whose lineage may still change.
    let mut unsettled = f64::INFINITY;
    for t in turns.iter().filter(|t| bucket_of(t.started_at) >= from) {
        let at = slot(&mut pending, bucket_of(t.started_at));
        at.last_start = at.last_start.max(t.last_start);
        if t.settled_at.is_none_or(|at| at > still) {
            unsettled = unsettled.min(t.started_at);
        }
    }
    for (id, list) in runs {
        for run in list.iter().filter(|r| bucket_of(r.anchor) >= from) {
            let jobs = &mut slot(&mut pending, bucket_of(run.anchor)).bucket.jobs;
            match jobs.get_mut(id) {
                Some(totals) => totals.add_run(run),
                None => {
                    jobs.insert(id.clone(), Totals::of(std::slice::from_ref(run)));
                }
            }
        }
    }
    // The latest lineage start of the turns up to each bucket's end.
    let mut reach = f64::MIN;
    let mut reaches: BTreeMap<i64, f64> = BTreeMap::new();
    for k in from..=last {
        if let Some(p) = pending.get(&k) {
            reach = reach.max(p.last_start);
        }
        reaches.insert(k, reach);
    }
    while cached.c1 < last {
        let k = cached.c1;
        let mut p = pending.remove(&k).unwrap_or_default();
        let turn_hi = p.bucket.turn_hi.max(bucket_start(k + 1));
        if !p.terminal || p.endless || turn_hi > still || unsettled <= turn_hi {
            return;
        }
        // Every turn up to `turn_hi` started in a bucket up to its own: their lineages
        // started by then (a bound, not the least one; a head re-read merely reads more).
        let lineage_hi = reaches
            .range(..=bucket_of(turn_hi))
            .next_back()
            .map_or(turn_hi, |(_, r)| r.max(turn_hi));
        p.bucket.turn_hi = turn_hi;
        p.bucket.lineage_hi = lineage_hi;
        cached.add(k, p.bucket);
        cached.c1 += 1;
    }
}

/// The report from the cache, or why it cannot answer.
fn incremental(
    cached: &mut Cached,
    opts: &ReportOptions,
    since: f64,
    until: f64,
) -> Result<CronCostReport, Stale> {
    let ledger_path = opts.hermes_home.join("cron").join("executions.db");
    let state_path = opts.hermes_home.join("state.db");
    let lsnap = LedgerSnapshot::open(&ledger_path, opts.busy_timeout)
        .map_err(|_| Stale("the ledger did not open"))?;
    let ssnap = StateSnapshot::open(&state_path, opts.busy_timeout)
        .map_err(|_| Stale("state.db did not open"))?;
    if file_id(lsnap.conn(), &ledger_path).map_err(db)? != cached.ledger_file
        || file_id(ssnap.conn(), &state_path).map_err(db)? != cached.state_file
    {
        return Err(Stale("a database was replaced, migrated or vacuumed"));
    }
    let c1_time = bucket_start(cached.c1);
    check_new_rows(cached, &lsnap, &ssnap, c1_time)?;
    let shape = text_shape(cached.shape);

    // Coverage, as a full read computes it.
    let small = cached.terminal_rows < SMALL_LEDGER_ROWS;
    let terminal_rows = if small {
        lsnap.terminal_count().map_err(db)?
    } else {
        cached.terminal_rows
    };
    let oldest = lsnap.oldest_terminal().map_err(db)?;
    let coverage = coverage_from(terminal_rows, oldest.as_deref().and_then(parse_iso), since);
    let start = coverage.map_or(since, |c| c.max(since));
    let head = bucket_of(start);
    let first = cached.buckets.keys().next().copied().unwrap_or(cached.c1);
    if head < first.min(cached.c1) || head > cached.c1 {
        return Err(Stale("the window moved off the cached buckets"));
    }
    // What fell out of the window for good.
    cached.drop_below(head);
    cached.heads.retain(|k, _| *k >= head);
    if small {
        check_deletions(cached, &lsnap, head)?;
        // Pruning can remove rows of a head bucket: read heads afresh.
        cached.heads.clear();
    }
    cached.terminal_rows = terminal_rows;

    let read = FullRead::jobs(opts);
    let jobs = read.jobs.as_slice();

    // The tail: everything anchored from c1 on, read on every report (with mixed offsets,
    // a few rows claimed just before c1 too: they only serve as owners of turns).
    let c1_text = shape.from_text(c1_time as i64);
    let mut executions = lsnap.rows(&c1_text, None, true).map_err(db)?;
    let range = TurnRange {
        lo: c1_time,
        roots_hi: until,
        sessions_hi: f64::INFINITY,
        aux: AuxRead::Probe,
    };
    let turns = ssnap.turns(range, None).map_err(db)?;
    executions.extend(
        lsnap
            .priors(&job_ids(&turns), &c1_text, cached.shape)
            .map_err(db)?,
    );
    let runs = runs_from(cached, &executions, &turns, until, jobs);
    fold(cached, &runs, &executions, &turns, until);

    // The head buckets: one per distinct span start below c1.
    let window = read_window(since, until, opts.days, coverage);
    let mut ids: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
    let mut others: FxHashSet<&str> = FxHashSet::default();
    others.extend(runs.keys().map(String::as_str));
    others.extend(cached.sums.keys().map(String::as_str));
    let mut heads_needed: Vec<i64> = Vec::new();
    for id in ids.iter().map(String::as_str).chain(others.iter().copied()) {
        let h = bucket_of(window.span_start(jobs, id));
        if h < cached.c1 && !heads_needed.contains(&h) {
            heads_needed.push(h);
        }
    }
    for h in heads_needed {
        if cached.heads.contains_key(&h) {
            continue;
        }
        let Some(bucket) = cached.buckets.get(&h) else {
            return Err(Stale("a head bucket is not cached"));
        };
        let records = read_bucket(&lsnap, &ssnap, shape, h, bucket, jobs)?;
        cached.heads.insert(h, records);
    }
    let heads = &cached.heads;
    for head in heads.values() {
        others.extend(head.iter().map(|(id, _)| id.as_str()));
    }
    let mut orphans: Vec<String> = others
        .into_iter()
        .filter(|id| jobs.iter().all(|j| j.id != *id))
        .map(str::to_string)
        .collect();
    orphans.sort_unstable();
    ids.extend(orphans);

    let c1_time = bucket_start(cached.c1);
    let mut totals: Vec<(String, Totals)> = Vec::with_capacity(ids.len());
    for id in ids {
        let lo = window.span_start(jobs, &id);
        let mut sum = Totals::default();
        let h = bucket_of(lo);
        if h < cached.c1 {
            let head = heads.get(&h).ok_or(Stale("a head bucket was not read"))?;
            for (_, run) in head.iter().filter(|(j, r)| *j == id && r.anchor >= lo) {
                sum.add_run(run);
            }
            sum.add(&cached.settled_after(&id, h));
        }
        for run in runs.get(&id).into_iter().flatten() {
            if run.anchor >= c1_time && run.anchor >= lo {
                sum.add_run(run);
            }
        }
        totals.push((id, sum));
    }
    // An older row read through a prior can carry an offset not seen before: the text
    // bounds used may have been too narrow. Keep the wider shape and read again in full.
    if let Some(wider) = widened(cached.shape, &lsnap)? {
        cached.shape = Some(wider);
        cached.heads.clear();
        return Err(Stale("an older claim text has another offset"));
    }
    let cost = window.section(jobs, &totals);
    cached.ledger_newest = newest(lsnap.conn(), "executions").map_err(db)?;
    cached.sessions_newest = newest(ssnap.conn(), "sessions").map_err(db)?;
    Ok(read.finish(cost))
}

/// The newest rows read last time are still there, and nothing inserted since lands in
/// the settled past or writes its claim irregularly; the offsets of new claim texts join
/// the shape (a daylight-saving change, or the first rows of an empty ledger).
fn check_new_rows(
    cached: &mut Cached,
    lsnap: &LedgerSnapshot,
    ssnap: &StateSnapshot,
    c1_time: f64,
) -> Result<(), Stale> {
    let ledger_from = still_there(lsnap.conn(), "executions", cached.ledger_newest.as_ref())?;
    let sessions_from = still_there(ssnap.conn(), "sessions", cached.sessions_newest.as_ref())?;
    let mut stmt = lsnap
        .conn()
        .prepare("SELECT claimed_at FROM executions WHERE rowid > ?1")
        .map_err(db)?;
    let mut rows = stmt.query([ledger_from]).map_err(db)?;
    let mut shapes = super::ledger::Shapes::default();
    while let Some(row) = rows.next().map_err(db)? {
        let claimed: Option<String> = row.get(0).map_err(db)?;
        let Some(claimed) = claimed else { continue };
        shapes.note(&claimed);
        if parse_iso(&claimed).is_some_and(|t| t < c1_time) {
            return Err(Stale("a new execution is claimed in the settled past"));
        }
    }
    let shape = match (shapes.claims(), cached.shape) {
        (ClaimTexts::None, shape) => shape,
        (ClaimTexts::Irregular, _) => return Err(Stale("a new claim text is irregular")),
        (ClaimTexts::Shaped(new), None) => Some(new),
        (ClaimTexts::Shaped(new), Some(seen)) => Some(
            seen.merge(new)
                .ok_or(Stale("a new claim text has another separator"))?,
        ),
    };
    if shape != cached.shape {
        // New rows are claimed from c1 on: nothing read below it (the heads) missed them,
        // but heads are read again with the wider bounds all the same.
        cached.shape = shape;
        cached.heads.clear();
    }
    let below: i64 = ssnap
        .conn()
        .query_row(
            // `+started_at`: walk the new row ids, not the start-time index.
            "SELECT COUNT(*) FROM sessions WHERE rowid > ?1 AND +started_at < ?2",
            rusqlite::params![sessions_from, c1_time],
            |row| row.get(0),
        )
        .map_err(db)?;
    if below > 0 {
        return Err(Stale("a new session starts in the settled past"));
    }
    Ok(())
}

/// The shape text bounds are written in: the claim texts' own, or any before the first.
fn text_shape(shape: Option<ClaimShape>) -> ClaimShape {
    // Without a claim text read there is no row a bound could misplace.
    shape.unwrap_or(ClaimShape {
        sep: b'T',
        min_offset: 0,
        max_offset: 0,
    })
}

/// The shape of every claim text this snapshot read, when it is wider than `shape`.
fn widened(shape: Option<ClaimShape>, lsnap: &LedgerSnapshot) -> Result<Option<ClaimShape>, Stale> {
    match lsnap.shapes().claims() {
        ClaimTexts::None => Ok(None),
        ClaimTexts::Irregular => Err(Stale("a claim text read is irregular")),
        ClaimTexts::Shaped(read) => {
            let merged = match shape {
                Some(shape) => shape
                    .merge(read)
                    .ok_or(Stale("a claim text read has another separator"))?,
                None => read,
            };
            Ok((Some(merged) != shape).then_some(merged))
        }
    }
}

/// The settled buckets after the head still hold every terminal row they counted.
fn check_deletions(cached: &Cached, lsnap: &LedgerSnapshot, head: i64) -> Result<(), Stale> {
    if head + 1 >= cached.c1 {
        return Ok(());
    }
    let expected: u64 = cached
        .buckets
        .range(head + 1..cached.c1)
        .map(|(_, b)| b.exec_rows)
        .sum();
    let found = lsnap
        .terminal_between(
            bucket_start(head + 1) as i64,
            bucket_start(cached.c1) as i64,
            text_shape(cached.shape),
        )
        .map_err(|_| Stale("a query failed"))?;
    if found == expected {
        Ok(())
    } else {
        Err(Stale("settled ledger rows were deleted"))
    }
}

/// Re-read the runs of settled bucket `k` from the databases, one record per run.
fn read_bucket(
    lsnap: &LedgerSnapshot,
    ssnap: &StateSnapshot,
    shape: ClaimShape,
    k: i64,
    bucket: &Bucket,
    jobs: &[CronJob],
) -> Result<Vec<(String, RunRecord)>, Stale> {
    let (b0, b1) = (bucket_start(k), bucket_start(k + 1));
    let lo = shape.from_text(b0 as i64);
    let hi = shape.before_text(bucket.turn_hi.floor() as i64 + 1);
    let mut executions = lsnap.rows(&lo, Some(&hi), true).map_err(db)?;
    let range = TurnRange {
        lo: b0,
        roots_hi: bucket.turn_hi,
        sessions_hi: bucket.lineage_hi,
        aux: AuxRead::Probe,
    };
    let turns = ssnap.turns(range, None).map_err(db)?;
    executions.extend(
        lsnap
            .priors(&job_ids(&turns), &lo, Some(shape))
            .map_err(db)?,
    );
    let runs = runs_between(b0, b1, &executions, &turns, jobs);
    let mut records = Vec::new();
    for (id, list) in runs {
        for run in list.into_iter().filter(|r| r.anchor < b1) {
            records.push((id.clone(), run));
        }
    }
    Ok(records)
}

/// The window of a report whose two databases were read.
fn read_window(since: f64, until: f64, days: u32, coverage: Option<f64>) -> Window {
    Window {
        since,
        until,
        days,
        coverage,
        executions_read: true,
        turns_read: true,
    }
}

/// A failed query: the cache cannot answer.
fn db<E>(_: E) -> Stale {
    Stale("a query failed")
}

/// Device, inode and schema cookie (bumped by every schema change and by VACUUM).
fn file_id(conn: &Connection, path: &std::path::Path) -> rusqlite::Result<FileId> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    let cookie: i64 = conn.query_row("PRAGMA schema_version", [], |row| row.get(0))?;
    Ok((meta.dev(), meta.ino(), cookie))
}

/// The newest row of `table` by row id, with its `id`.
fn newest(conn: &Connection, table: &str) -> rusqlite::Result<Option<(i64, String)>> {
    let sql = format!("SELECT rowid, CAST(id AS TEXT) FROM {table} ORDER BY rowid DESC LIMIT 1");
    match conn.query_row(&sql, [], |row| Ok((row.get(0)?, row.get(1)?))) {
        Ok(found) => Ok(Some(found)),
        Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The row id after which rows are new, once the newest row read last time is found
/// unchanged.
fn still_there(
    conn: &Connection,
    table: &str,
    newest: Option<&(i64, String)>,
) -> Result<i64, Stale> {
    let Some((rowid, id)) = newest else {
        return Ok(0);
    };
    let sql = format!("SELECT CAST(id AS TEXT) FROM {table} WHERE rowid = ?1");
    match conn.query_row(&sql, [rowid], |row| row.get::<_, String>(0)) {
        Ok(found) if found == *id => Ok(*rowid),
        Ok(_) | Err(rusqlite::Error::QueryReturnedNoRows) => {
            Err(Stale("the newest row read last time is gone"))
        }
        Err(_) => Err(Stale("a query failed")),
    }
}

#[cfg(test)]
mod tests;
