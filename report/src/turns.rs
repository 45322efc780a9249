//! Cron agent turns from `state.db`: one per `cron_<job_id>_<YYYYmmdd>_<HHMMSS>` session, with
//! the cost and tokens of its whole lineage and its final reply.
//!
//! - Lineage: the session plus every descendant by `parent_session_id` (delegated
//!   sub-agents, compression continuations), walked with a recursive query.
//! - Cost: per session `COALESCE(actual_cost_usd, estimated_cost_usd, 0)`, plus the
//!   auxiliary rows of `session_model_usage` (`task != ''`), which Hermes records only there.
//!   Main-loop rows (`task = ''`) duplicate the session totals and are not added.
//! - Tokens: input + output + cache read + cache write, as Hermes' insights count them.
//! - Final reply: the last active message of the session (of its compression tip when the
//!   session was rotated). An assistant message without tool calls is the reply; anything else
//!   last means the turn ended mid-way.
//!
//! Every column beyond `id` and `started_at` is probed, so older schemas read with zeros.
//! The work is bounded by the window: one range scan of the sessions that started in it (a
//! run's descendants start after the run), one pass over the auxiliary usage rows touched
//! since, and one index probe per turn for its last message.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;
use rustc_hash::FxHashMap;

use super::sqlite::{DbError, column_or, columns, open_read_only, real_at, str_at, text_at};

/// How a turn ended, as far as `state.db` tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinalReply {
    /// The final assistant reply.
    Text(String),
    /// No reply, or a blank one.
    Empty,
    /// The last message is not a final assistant reply (tool call, tool result, user).
    Interrupted,
    /// The schema has no readable messages table.
    Unknown,
}

/// One cron agent turn.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentTurn {
    /// The job, parsed from the session id.
    pub job_id: String,
    /// The root session id.
    pub session_id: String,
    /// Session start, Unix seconds.
    pub started_at: f64,
    /// Cost of the lineage in nano-dollars (integers: sums do not depend on their order).
    pub cost_nanos: i64,
    /// Tokens of the lineage.
    pub tokens: u64,
    /// The final reply.
    pub reply: FinalReply,
    /// When the lineage last changed as far as `state.db` tells: the latest end of its
    /// sessions and last use of its auxiliary rows; `None` while a session of it has not
    /// ended (or the schema cannot tell).
    pub settled_at: Option<f64>,
    /// The latest start of a session of the lineage.
    pub last_start: f64,
}

impl AgentTurn {
    /// Cost of the lineage in USD.
    pub fn cost_usd(&self) -> f64 {
        self.cost_nanos as f64 / 1e9
    }
}

/// Which cron turns to read, and how.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TurnRange {
    /// Sessions that started from here on are read.
    pub lo: f64,
    /// Cron roots that started after this are left out.
    pub roots_hi: f64,
    /// Sessions that started after this are not read (`INFINITY`: no bound).
    pub sessions_hi: f64,
    /// Auxiliary usage: one scan of the table (a whole window), or one probe per session
    /// of a lineage (a short range).
    pub aux: AuxRead,
}

/// How the auxiliary usage rows are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuxRead {
    /// One pass over the table.
    Scan,
    /// One index probe per lineage session.
    Probe,
}

impl TurnRange {
    /// A whole window: sessions from `since`, roots up to `until`, the table scanned.
    pub fn window(since: f64, until: f64) -> Self {
        Self {
            lo: since,
            roots_hi: until,
            sessions_hi: f64::INFINITY,
            aux: AuxRead::Scan,
        }
    }

    /// What a full report reads: the window, from `covered` on when a pruned ledger is
    /// complete only from there. Such a span holds about a thousand runs: their auxiliary
    /// rows are probed per session instead of scanning the whole table.
    pub fn covered(since: f64, until: f64, covered: Option<f64>) -> Self {
        match covered {
            Some(from) if from > since => Self {
                lo: from,
                aux: AuxRead::Probe,
                ..Self::window(since, until)
            },
            _ => Self::window(since, until),
        }
    }
}

/// The job id of a cron session id `cron_<job_id>_<8 digits>_<6 digits>`, parsed from the right.
pub fn cron_job_id(session_id: &str) -> Option<&str> {
    let rest = session_id.strip_prefix("cron_")?;
    let cut = rest.len().checked_sub(16)?;
    let (job, stamp) = (rest.get(..cut)?, rest.get(cut..)?);
    let stamp = stamp.as_bytes();
    let shape = stamp[0] == b'_'
        && stamp[9] == b'_'
        && stamp[1..9]
            .iter()
            .chain(&stamp[10..])
            .all(u8::is_ascii_digit);
    (shape && !job.is_empty()).then_some(job)
}

/// The distinct job ids of `turns`, sorted.
pub fn job_ids(turns: &[AgentTurn]) -> Vec<&str> {
    let mut ids: Vec<&str> = turns.iter().map(|t| t.job_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Read the cron turns that started in `[since, until]`.
pub fn read_turns(
    path: &Path,
    since: f64,
    until: f64,
    busy: Duration,
) -> Result<Vec<AgentTurn>, DbError> {
    read_turns_split(path, since, until, busy, PARALLEL_PROBES_FILE_BYTES)
}

/// [`read_turns`], probing the last messages on two connections when the file has at least
/// `split_from` bytes.
fn read_turns_split(
    path: &Path,
    since: f64,
    until: f64,
    busy: Duration,
    split_from: u64,
) -> Result<Vec<AgentTurn>, DbError> {
    let snapshot = StateSnapshot::open(path, busy)?;
    // A large file gets a second connection for the auxiliary rows and half of the
    // last-message probes.
    let helper = (std::fs::metadata(path).map_or(0, |m| m.len()) >= split_from)
        .then(|| snapshot.helper(busy))
        .flatten();
    snapshot.turns(TurnRange::window(since, until), helper)
}

/// One read snapshot of `state.db`: every query through it sees the same commit.
pub struct StateSnapshot {
    conn: Connection,
    schema: Schema,
    path: std::path::PathBuf,
}

impl std::fmt::Debug for StateSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateSnapshot")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl StateSnapshot {
    /// Open `path` read-only, begin a read transaction and probe the schema.
    pub fn open(path: &Path, busy: Duration) -> Result<Self, DbError> {
        let (conn, _) = open_read_only(path, busy)?;
        let err = |e| DbError::sqlite(path, e);
        // One read transaction: a consistent snapshot across the queries, and one lock
        // instead of one per statement (thousands of last-message probes).
        conn.execute_batch("BEGIN").map_err(err)?;
        start_snapshot(&conn).map_err(err)?;
        let schema = Schema::probe(&conn).map_err(err)?;
        Ok(Self {
            conn,
            schema,
            path: path.to_path_buf(),
        })
    }

    /// The connection (for the caller's own probes in the same snapshot).
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Whether the schema says when a lineage stopped changing: sessions have `ended_at` and
    /// auxiliary usage rows (if the table exists) have `last_seen`.
    pub fn dated(&self) -> bool {
        self.schema.dated()
    }

    /// A second connection whose read transaction begins right after this one's (so both
    /// read the same commit unless Hermes commits in those microseconds; a reply probed a
    /// commit later is the same report a moment later).
    pub fn helper(&self, busy: Duration) -> Option<Connection> {
        let (helper, _) = open_read_only(&self.path, busy).ok()?;
        helper.execute_batch("BEGIN").ok()?;
        start_snapshot(&helper).ok()?;
        Some(helper)
    }

    /// The cron turns of `range`, in start order.
    pub fn turns(
        &self,
        range: TurnRange,
        helper: Option<Connection>,
    ) -> Result<Vec<AgentTurn>, DbError> {
        let (conn, schema, path) = (&self.conn, &self.schema, self.path.as_path());
        let err = |e| DbError::sqlite(path, e);
        let scan = range.aux == AuxRead::Scan;
        // The auxiliary usage rows are read on the second connection while this one reads
        // the sessions; they are added once both are in.
        let (window, aux, helper) = match helper {
            Some(helper) if scan => {
                let (window, aux) = std::thread::scope(|scope| {
                    let aux = scope.spawn(move || {
                        let rows = read_aux(&helper, schema, range.lo);
                        (rows, helper)
                    });
                    (read_window(conn, schema, &range), aux.join())
                });
                let (aux, helper) = match aux {
                    Ok(done) => done,
                    Err(panic) => std::panic::resume_unwind(panic),
                };
                (window, Some(aux), Some(helper))
            }
            helper => {
                let window = read_window(conn, schema, &range);
                let aux = scan.then(|| read_aux(conn, schema, range.lo));
                (window, aux, helper)
            }
        };
        let mut window = window.map_err(err)?;
        let roots = window.roots(range.roots_hi);
        let root_of = window.roots_of_all(&roots);
        match aux {
            Some(aux) => window.add_aux(aux.map_err(err)?),
            None => window.probe_aux(conn, schema, &root_of).map_err(err)?,
        }
        let totals = window.lineage_totals(&roots, &root_of);
        let tips: Vec<&str> = roots
            .iter()
            .map(|(root, _)| window.sessions[window.compression_tip(*root)].id.as_str())
            .collect();
        let replies = match helper {
            Some(helper) if tips.len() >= 2 => {
                let (first, second) = tips.split_at(tips.len() / 2);
                let (mine, theirs) = std::thread::scope(|scope| {
                    let theirs = scope.spawn(move || probe_replies(&helper, schema, second));
                    (probe_replies(conn, schema, first), theirs.join())
                });
                let mut replies = mine.map_err(err)?;
                match theirs {
                    Ok(rest) => replies.extend(rest.map_err(err)?),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
                replies
            }
            _ => probe_replies(conn, schema, &tips).map_err(err)?,
        };
        drop(tips);
        let mut turns = Vec::with_capacity(roots.len());
        for (index, ((root, job_id), reply)) in roots.into_iter().zip(replies).enumerate() {
            // Each root is taken once and the window is dropped next: move its id out.
            let session = &mut window.sessions[root];
            let lineage = totals[index];
            turns.push(AgentTurn {
                job_id,
                session_id: std::mem::take(&mut session.id),
                started_at: session.started_at,
                cost_nanos: lineage.cost_nanos,
                tokens: lineage.tokens,
                reply,
                settled_at: lineage.settled_at,
                last_start: lineage.last_start,
            });
        }
        Ok(turns)
    }
}

/// `state.db` size from which the last-message probes run on two connections.
pub(crate) const PARALLEL_PROBES_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// Begin the read snapshot of a connection in a transaction now (SQLite takes it at the
/// first read, not at `BEGIN`).
fn start_snapshot(conn: &Connection) -> rusqlite::Result<()> {
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
}

/// The final reply of each session id, in order.
fn probe_replies(
    conn: &Connection,
    schema: &Schema,
    ids: &[&str],
) -> rusqlite::Result<Vec<FinalReply>> {
    let mut last = LastMessage::new(conn, schema)?;
    ids.iter().map(|id| last.reply(id)).collect()
}

/// What the probe found in `state.db`.
struct Schema {
    sessions: HashSet<String>,
    messages: HashSet<String>,
    usage: HashSet<String>,
}

impl Schema {
    fn probe(conn: &Connection) -> rusqlite::Result<Self> {
        let sessions = columns(conn, "sessions")?;
        for needed in ["id", "started_at"] {
            if !sessions.contains(needed) {
                return Err(rusqlite::Error::InvalidColumnName(format!(
                    "sessions.{needed}"
                )));
            }
        }
        Ok(Self {
            sessions,
            messages: columns(conn, "messages")?,
            usage: columns(conn, "session_model_usage")?,
        })
    }

    fn dated(&self) -> bool {
        self.sessions.contains("ended_at")
            && (!self.has_usage() || self.usage.contains("last_seen"))
    }

    fn has_usage(&self) -> bool {
        self.usage.contains("session_id") && self.usage.contains("task")
    }

    fn has_messages(&self) -> bool {
        ["session_id", "role", "content"]
            .iter()
            .all(|c| self.messages.contains(*c))
    }
}

/// One session that started in the window.
struct Session {
    id: String,
    parent: Option<String>,
    subagent: bool,
    started_at: f64,
    compressed: bool,
    cost_nanos: i64,
    tokens: u64,
    /// When it ended and its auxiliary rows were last used; `None` while it runs.
    settled_at: Option<f64>,
}

/// Every session that started in the window (a run's descendants start after it, so this
/// holds every lineage whose root is in the window), indexed by id.
struct Window {
    sessions: Vec<Session>,
    by_id: FxHashMap<String, usize>,
    /// Parent id → its newest child that is not a sub-agent (a compression continuation).
    continuation: FxHashMap<String, usize>,
    /// Whether the schema can say when a lineage stopped changing.
    dated: bool,
}

/// What a root's lineage adds up to.
#[derive(Clone, Copy, Debug)]
struct Lineage {
    cost_nanos: i64,
    tokens: u64,
    settled_at: Option<f64>,
    last_start: f64,
}

fn read_window(conn: &Connection, schema: &Schema, range: &TurnRange) -> rusqlite::Result<Window> {
    let cols = &schema.sessions;
    let upper = if range.sessions_hi.is_finite() {
        " AND s.started_at <= ?2"
    } else {
        ""
    };
    let sql = format!(
        "SELECT s.id, {}, {}, s.started_at, {}, COALESCE({}, {}, 0), {}, {} FROM sessions s \
         WHERE s.started_at >= ?1{upper}",
        column_or(cols, "s", "parent_session_id", "NULL"),
        column_or(cols, "s", "source", "NULL"),
        column_or(cols, "s", "end_reason", "NULL"),
        column_or(cols, "s", "actual_cost_usd", "NULL"),
        column_or(cols, "s", "estimated_cost_usd", "NULL"),
        token_sum(cols, "s"),
        column_or(cols, "s", "ended_at", "NULL"),
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = if upper.is_empty() {
        stmt.query([range.lo])?
    } else {
        stmt.query(rusqlite::params![range.lo, range.sessions_hi])?
    };
    let mut window = Window {
        sessions: Vec::new(),
        by_id: FxHashMap::default(),
        continuation: FxHashMap::default(),
        dated: schema.dated(),
    };
    while let Some(row) = rows.next()? {
        let (Some(id), Some(started_at)) = (text_at(row, 0)?, real_at(row, 3)?) else {
            continue;
        };
        window.by_id.insert(id.clone(), window.sessions.len());
        window.sessions.push(Session {
            id,
            parent: text_at(row, 1)?,
            subagent: str_at(row, 2)? == Some("subagent"),
            started_at,
            compressed: str_at(row, 4)? == Some("compression"),
            cost_nanos: to_nanos(real_at(row, 5)?.unwrap_or(0.0)),
            tokens: real_at(row, 6)?.unwrap_or(0.0).max(0.0) as u64,
            settled_at: real_at(row, 7)?,
        });
    }
    for (index, session) in window.sessions.iter().enumerate() {
        let Some(parent) = session.parent.as_ref().filter(|_| !session.subagent) else {
            continue;
        };
        let newer = |current: &usize| window.sessions[*current].started_at <= session.started_at;
        if window.continuation.get(parent).is_none_or(newer) {
            window.continuation.insert(parent.clone(), index);
        }
    }
    Ok(window)
}

impl Window {
    /// Add the auxiliary usage rows to the sessions of the window they bill.
    fn add_aux(&mut self, aux: Vec<AuxRow>) {
        for row in aux {
            if let Some(&index) = self.by_id.get(&row.session_id) {
                self.sessions[index].bill(&row);
            }
        }
    }

    /// Read the auxiliary usage rows of every session of a lineage, one probe each.
    fn probe_aux(
        &mut self,
        conn: &Connection,
        schema: &Schema,
        root_of: &[Option<usize>],
    ) -> rusqlite::Result<()> {
        let Some(sql) = aux_select(schema, " AND u.session_id = ?1") else {
            return Ok(());
        };
        let mut stmt = conn.prepare(&sql)?;
        for (index, root) in root_of.iter().enumerate() {
            if root.is_none() {
                continue;
            }
            let mut rows = stmt.query([self.sessions[index].id.as_str()])?;
            while let Some(row) = rows.next()? {
                let aux = aux_row(row)?;
                self.sessions[index].bill(&aux);
            }
        }
        Ok(())
    }

    /// Cron sessions that started by `until`, with their job ids, in start order.
    fn roots(&self, until: f64) -> Vec<(usize, String)> {
        let mut roots: Vec<(usize, String)> = self
            .sessions
            .iter()
            .enumerate()
            .filter(|(_, s)| s.started_at <= until)
            .filter_map(|(i, s)| cron_job_id(&s.id).map(|job| (i, job.to_string())))
            .collect();
        roots.sort_by(|a, b| {
            self.sessions[a.0]
                .started_at
                .total_cmp(&self.sessions[b.0].started_at)
        });
        roots
    }

    /// For each session, the slot in `roots` of the root whose lineage it is in.
    fn roots_of_all(&self, roots: &[(usize, String)]) -> Vec<Option<usize>> {
        let mut slot_of_root: Vec<Option<usize>> = vec![None; self.sessions.len()];
        for (slot, (root, _)) in roots.iter().enumerate() {
            slot_of_root[*root] = Some(slot);
        }
        (0..self.sessions.len())
            .map(|index| self.root_of(index).and_then(|r| slot_of_root[r]))
            .collect()
    }

    /// Cost, tokens and settlement of each root's lineage (the root, then descendants by
    /// parent link).
    fn lineage_totals(&self, roots: &[(usize, String)], root_of: &[Option<usize>]) -> Vec<Lineage> {
        let mut totals: Vec<Lineage> = roots
            .iter()
            .map(|(root, _)| Lineage {
                cost_nanos: 0,
                tokens: 0,
                settled_at: self.dated.then_some(f64::MIN),
                last_start: self.sessions[*root].started_at,
            })
            .collect();
        for (session, slot) in self.sessions.iter().zip(root_of) {
            let Some(total) = slot.map(|slot| &mut totals[slot]) else {
                continue;
            };
            total.cost_nanos += session.cost_nanos;
            total.tokens += session.tokens;
            total.last_start = total.last_start.max(session.started_at);
            total.settled_at = match (total.settled_at, session.settled_at) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
        }
        totals
    }

    /// The cron root a session descends from (itself for a root), if it is in the window.
    fn root_of(&self, mut index: usize) -> Option<usize> {
        // Bounded: a parent cycle in a damaged file must not loop forever.
        for _ in 0..64 {
            let session = &self.sessions[index];
            if cron_job_id(&session.id).is_some() {
                return Some(index);
            }
            index = *self.by_id.get(session.parent.as_deref()?)?;
        }
        None
    }

    /// The session holding the end of a rotated conversation: follow compression
    /// continuations (children that are not sub-agents), newest first.
    fn compression_tip(&self, root: usize) -> usize {
        let mut tip = root;
        // Bounded like `root_of`.
        for _ in 0..64 {
            if !self.sessions[tip].compressed {
                break;
            }
            match self.continuation.get(&self.sessions[tip].id) {
                Some(&child) => tip = child,
                None => break,
            }
        }
        tip
    }
}

impl Session {
    /// Add an auxiliary usage row billed to this session; a row last used before the
    /// session started is a damaged one and bills nothing.
    fn bill(&mut self, row: &AuxRow) {
        if row.last_seen.is_some_and(|seen| seen < self.started_at) {
            return;
        }
        self.cost_nanos += row.cost_nanos;
        self.tokens += row.tokens;
        self.settled_at = match (self.settled_at, row.last_seen) {
            (Some(ended), Some(seen)) => Some(ended.max(seen)),
            // A row that does not say when it was last used could still grow.
            _ => None,
        };
    }
}

fn token_sum(cols: &HashSet<String>, alias: &str) -> String {
    [
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
    ]
    .iter()
    .map(|c| format!("COALESCE({}, 0)", column_or(cols, alias, c, "0")))
    .collect::<Vec<_>>()
    .join(" + ")
}

/// One auxiliary usage row (`task != ''`).
struct AuxRow {
    session_id: String,
    cost_nanos: i64,
    tokens: u64,
    last_seen: Option<f64>,
}

/// The SELECT of auxiliary rows with `extra` conditions, `None` when the table cannot hold
/// any.
fn aux_select(schema: &Schema, extra: &str) -> Option<String> {
    let cols = &schema.usage;
    if !schema.has_usage() {
        return None;
    }
    let actual = column_or(cols, "u", "actual_cost_usd", "0");
    let estimated = column_or(cols, "u", "estimated_cost_usd", "0");
    Some(format!(
        "SELECT u.session_id, CASE WHEN COALESCE({actual}, 0) > 0 THEN {actual} \
         ELSE COALESCE({estimated}, 0) END, {}, {} FROM session_model_usage u \
         WHERE u.task != ''{extra}",
        token_sum(cols, "u"),
        column_or(cols, "u", "last_seen", "NULL"),
    ))
}

fn aux_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<AuxRow> {
    Ok(AuxRow {
        session_id: text_at(row, 0)?.unwrap_or_default(),
        cost_nanos: to_nanos(real_at(row, 1)?.unwrap_or(0.0)),
        tokens: real_at(row, 2)?.unwrap_or(0.0).max(0.0) as u64,
        last_seen: real_at(row, 3)?,
    })
}

/// The auxiliary usage rows (`task != ''`) that can bill a session started from `lo` on.
fn read_aux(conn: &Connection, schema: &Schema, lo: f64) -> rusqlite::Result<Vec<AuxRow>> {
    // Rows last used before `lo` cannot bill a session that started after it.
    let recent = if schema.usage.contains("last_seen") {
        " AND COALESCE(u.last_seen, ?1) >= ?1"
    } else {
        " AND ?1 = ?1"
    };
    let Some(sql) = aux_select(schema, recent) else {
        return Ok(Vec::new());
    };
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([lo])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        if text_at(row, 0)?.is_none() {
            continue;
        }
        out.push(aux_row(row)?);
    }
    Ok(out)
}

/// Looks up the final reply of a session.
struct LastMessage<'c> {
    /// The newest message by id, whatever its `active` flag (one index probe).
    newest: Option<rusqlite::CachedStatement<'c>>,
    /// The newest active message, for the rare session whose newest row was archived.
    newest_active: Option<rusqlite::CachedStatement<'c>>,
}

impl<'c> LastMessage<'c> {
    fn new(conn: &'c Connection, schema: &Schema) -> rusqlite::Result<Self> {
        if !schema.has_messages() {
            return Ok(Self {
                newest: None,
                newest_active: None,
            });
        }
        let cols = &schema.messages;
        let tool_calls = column_or(cols, "m", "tool_calls", "NULL");
        let active = column_or(cols, "m", "active", "1");
        let select = format!("SELECT m.role, m.content, {tool_calls}, {active} FROM messages m");
        let newest = conn.prepare_cached(&format!(
            "{select} WHERE m.rowid = (SELECT MAX(rowid) FROM messages WHERE session_id = ?1)"
        ))?;
        let newest_active = if cols.contains("active") {
            Some(conn.prepare_cached(&format!(
                "{select} WHERE m.rowid = (SELECT MAX(rowid) FROM messages \
                 WHERE session_id = ?1 AND active = 1)"
            ))?)
        } else {
            None
        };
        Ok(Self {
            newest: Some(newest),
            newest_active,
        })
    }

    fn reply(&mut self, session_id: &str) -> rusqlite::Result<FinalReply> {
        let Some(newest) = self.newest.as_mut() else {
            return Ok(FinalReply::Unknown);
        };
        let found = newest.query_row([session_id], |row| Ok((classify(row)?, real_at(row, 3)?)));
        match found {
            Ok((reply, active)) if active != Some(0.0) => Ok(reply),
            Ok(_) => match self.newest_active.as_mut() {
                Some(stmt) => match stmt.query_row([session_id], classify) {
                    Err(rusqlite::Error::QueryReturnedNoRows) => Ok(FinalReply::Empty),
                    other => other,
                },
                None => Ok(FinalReply::Empty),
            },
            Err(rusqlite::Error::QueryReturnedNoRows) => Ok(FinalReply::Empty),
            Err(e) => Err(e),
        }
    }
}

/// Classify a last message from its role, content and tool calls (columns 0, 1, 2).
fn classify(row: &rusqlite::Row<'_>) -> rusqlite::Result<FinalReply> {
    let Some(role) = text_at(row, 0)? else {
        return Ok(FinalReply::Empty);
    };
    let tool_calls = text_at(row, 2)?.unwrap_or_default();
    let calls_tools = !matches!(tool_calls.trim(), "" | "[]" | "null");
    if role != "assistant" || calls_tools {
        return Ok(FinalReply::Interrupted);
    }
    Ok(match text_at(row, 1)? {
        Some(content) if !content.trim().is_empty() => FinalReply::Text(content),
        _ => FinalReply::Empty,
    })
}

/// A cost in USD as nano-dollars.
pub fn to_nanos(usd: f64) -> i64 {
    if usd.is_finite() {
        (usd * 1e9).round() as i64
    } else {
        0
    }
}

#[cfg(test)]
mod tests;
