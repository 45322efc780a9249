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
    /// Cost of the lineage in USD.
    pub cost_usd: f64,
    /// Tokens of the lineage.
    pub tokens: u64,
    /// The final reply.
    pub reply: FinalReply,
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
    let (conn, _) = open_read_only(path, busy)?;
    let err = |e| DbError::sqlite(path, e);
    // One read transaction: a consistent snapshot across the queries, and one lock instead
    // of one per statement (thousands of last-message probes).
    let _snapshot = conn.unchecked_transaction().map_err(err)?;
    start_snapshot(&conn).map_err(err)?;
    // A large file gets a second connection for half of the last-message probes, its read
    // transaction begun right after the first one's (so both read the same commit unless
    // Hermes commits in those microseconds; a reply probed a commit later is the same
    // report a moment later).
    let helper = (std::fs::metadata(path).map_or(0, |m| m.len()) >= split_from)
        .then(|| open_read_only(path, busy).ok())
        .flatten()
        .and_then(|(helper, _)| {
            helper.execute_batch("BEGIN").ok()?;
            start_snapshot(&helper).ok()?;
            Some(helper)
        });
    let schema = Schema::probe(&conn).map_err(err)?;
    // The auxiliary usage rows are read on the second connection while this one reads the
    // sessions; they are added once both are in.
    let (window, aux, helper) = match helper {
        Some(helper) => {
            let schema = &schema;
            let (window, aux) = std::thread::scope(|scope| {
                let aux = scope.spawn(move || {
                    let rows = read_aux(&helper, schema, since);
                    (rows, helper)
                });
                (read_window(&conn, schema, since), aux.join())
            });
            let (aux, helper) = match aux {
                Ok(done) => done,
                Err(panic) => std::panic::resume_unwind(panic),
            };
            (window, aux, Some(helper))
        }
        None => {
            let window = read_window(&conn, &schema, since);
            (window, read_aux(&conn, &schema, since), None)
        }
    };
    let mut window = window.map_err(err)?;
    let roots = window.roots(until);
    window.add_aux(aux.map_err(err)?);
    let totals = window.lineage_totals(&roots);
    let tips: Vec<&str> = roots
        .iter()
        .map(|(root, _)| window.sessions[window.compression_tip(*root)].id.as_str())
        .collect();
    let replies = match helper {
        Some(helper) if tips.len() >= 2 => {
            let (first, second) = tips.split_at(tips.len() / 2);
            let schema = &schema;
            let (mine, theirs) = std::thread::scope(|scope| {
                let theirs = scope.spawn(move || probe_replies(&helper, schema, second));
                (probe_replies(&conn, schema, first), theirs.join())
            });
            let mut replies = mine.map_err(err)?;
            match theirs {
                Ok(rest) => replies.extend(rest.map_err(err)?),
                Err(panic) => std::panic::resume_unwind(panic),
            }
            replies
        }
        _ => probe_replies(&conn, &schema, &tips).map_err(err)?,
    };
    drop(tips);
    let mut turns = Vec::with_capacity(roots.len());
    for (index, ((root, job_id), reply)) in roots.into_iter().zip(replies).enumerate() {
        // Each root is taken once and the window is dropped next: move its id out.
        let session = &mut window.sessions[root];
        let (cost_usd, tokens) = totals[index];
        turns.push(AgentTurn {
            job_id,
            session_id: std::mem::take(&mut session.id),
            started_at: session.started_at,
            cost_usd,
            tokens,
            reply,
        });
    }
    Ok(turns)
}

/// `state.db` size from which the last-message probes run on two connections.
const PARALLEL_PROBES_FILE_BYTES: u64 = 32 * 1024 * 1024;

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
    cost: f64,
    tokens: f64,
}

/// Every session that started in the window (a run's descendants start after it, so this
/// holds every lineage whose root is in the window), indexed by id.
struct Window {
    sessions: Vec<Session>,
    by_id: FxHashMap<String, usize>,
    /// Parent id → its newest child that is not a sub-agent (a compression continuation).
    continuation: FxHashMap<String, usize>,
}

fn read_window(conn: &Connection, schema: &Schema, since: f64) -> rusqlite::Result<Window> {
    let cols = &schema.sessions;
    let sql = format!(
        "SELECT s.id, {}, {}, s.started_at, {}, COALESCE({}, {}, 0), {} FROM sessions s \
         WHERE s.started_at >= ?1",
        column_or(cols, "s", "parent_session_id", "NULL"),
        column_or(cols, "s", "source", "NULL"),
        column_or(cols, "s", "end_reason", "NULL"),
        column_or(cols, "s", "actual_cost_usd", "NULL"),
        column_or(cols, "s", "estimated_cost_usd", "NULL"),
        token_sum(cols, "s"),
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([since])?;
    let mut window = Window {
        sessions: Vec::new(),
        by_id: FxHashMap::default(),
        continuation: FxHashMap::default(),
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
            cost: real_at(row, 5)?.unwrap_or(0.0),
            tokens: real_at(row, 6)?.unwrap_or(0.0),
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
    fn add_aux(&mut self, aux: Vec<(String, f64, f64)>) {
        for (id, cost, tokens) in aux {
            if let Some(&index) = self.by_id.get(&id) {
                self.sessions[index].cost += cost;
                self.sessions[index].tokens += tokens;
            }
        }
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

    /// Cost and tokens of each root's lineage (the root, then descendants by parent link).
    fn lineage_totals(&self, roots: &[(usize, String)]) -> Vec<(f64, u64)> {
        let mut slot_of_root: Vec<Option<usize>> = vec![None; self.sessions.len()];
        for (slot, (root, _)) in roots.iter().enumerate() {
            slot_of_root[*root] = Some(slot);
        }
        let mut totals = vec![(0.0, 0.0); roots.len()];
        for (index, session) in self.sessions.iter().enumerate() {
            if let Some(slot) = self.root_of(index).and_then(|r| slot_of_root[r].as_ref()) {
                totals[*slot].0 += session.cost;
                totals[*slot].1 += session.tokens;
            }
        }
        totals
            .into_iter()
            .map(|(c, t)| (c, t.max(0.0) as u64))
            .collect()
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

/// The auxiliary usage rows (`task != ''`): (session id, cost, tokens).
fn read_aux(
    conn: &Connection,
    schema: &Schema,
    since: f64,
) -> rusqlite::Result<Vec<(String, f64, f64)>> {
    let cols = &schema.usage;
    if !cols.contains("session_id") || !cols.contains("task") {
        return Ok(Vec::new());
    }
    let actual = column_or(cols, "u", "actual_cost_usd", "0");
    let estimated = column_or(cols, "u", "estimated_cost_usd", "0");
    // Rows last touched before the window cannot bill a session that started in it.
    let recent = if cols.contains("last_seen") {
        " AND COALESCE(u.last_seen, ?1) >= ?1"
    } else {
        ""
    };
    let sql = format!(
        "SELECT u.session_id, CASE WHEN COALESCE({actual}, 0) > 0 THEN {actual} \
         ELSE COALESCE({estimated}, 0) END, {} FROM session_model_usage u \
         WHERE u.task != ''{recent}",
        token_sum(cols, "u")
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = if recent.is_empty() {
        stmt.query([])?
    } else {
        stmt.query([since])?
    };
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let Some(id) = text_at(row, 0)? else { continue };
        out.push((
            id,
            real_at(row, 1)?.unwrap_or(0.0),
            real_at(row, 2)?.unwrap_or(0.0),
        ));
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

#[cfg(test)]
mod tests;
