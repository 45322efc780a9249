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

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

use super::sqlite::{DbError, column_or, columns, open_read_only, real_at, text_at};

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
        && stamp[1..9].iter().chain(&stamp[10..]).all(u8::is_ascii_digit);
    (shape && !job.is_empty()).then_some(job)
}

/// Read the cron turns that started in `[since, until]`.
pub fn read_turns(
    path: &Path,
    since: f64,
    until: f64,
    busy: Duration,
) -> Result<Vec<AgentTurn>, DbError> {
    let (conn, _) = open_read_only(path, busy)?;
    let err = |e| DbError::sqlite(path, e);
    let schema = Schema::probe(&conn).map_err(err)?;
    let mut totals = lineage_totals(&conn, &schema, since, until).map_err(err)?;
    let roots = read_roots(&conn, &schema, since, until).map_err(err)?;
    let mut turns = Vec::with_capacity(roots.len());
    for root in roots {
        let Some(job_id) = cron_job_id(&root.id) else { continue };
        let reply = match (&root.last, root.end_reason.as_deref()) {
            (_, Some("compression")) => tip_reply(&conn, &schema, &root.id).map_err(err)?,
            (Some(last), _) => last.clone(),
            (None, _) => FinalReply::Unknown,
        };
        let (cost_usd, tokens) = totals.remove(&root.id).unwrap_or((0.0, 0));
        turns.push(AgentTurn {
            job_id: job_id.to_string(),
            started_at: root.started_at,
            cost_usd,
            tokens,
            reply,
            session_id: root.id,
        });
    }
    Ok(turns)
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
                return Err(rusqlite::Error::InvalidColumnName(format!("sessions.{needed}")));
            }
        }
        Ok(Self {
            sessions,
            messages: columns(conn, "messages")?,
            usage: columns(conn, "session_model_usage")?,
        })
    }

    fn has_messages(&self) -> bool {
        ["session_id", "role", "content"].iter().all(|c| self.messages.contains(*c))
    }

    fn has_aux(&self) -> bool {
        self.usage.contains("session_id") && self.usage.contains("task")
    }
}

/// Roots are selected by an id range (`cron_` up to `cron` + the byte after `_`) and window.
const ROOTS: &str = "SELECT s.id FROM sessions s \
     WHERE s.id >= 'cron_' AND s.id < 'cron`' AND s.started_at >= ?1 AND s.started_at <= ?2";

fn lineage_totals(
    conn: &Connection,
    schema: &Schema,
    since: f64,
    until: f64,
) -> rusqlite::Result<HashMap<String, (f64, u64)>> {
    let cols = &schema.sessions;
    let children = if cols.contains("parent_session_id") {
        " UNION SELECT l.root, c.id FROM sessions c JOIN lineage l ON c.parent_session_id = l.id"
    } else {
        ""
    };
    let cost = format!(
        "COALESCE({}, {}, 0)",
        column_or(cols, "s", "actual_cost_usd", "NULL"),
        column_or(cols, "s", "estimated_cost_usd", "NULL")
    );
    let tokens = token_sum(cols, "s");
    let (aux_cost, aux_tokens) = aux_terms(schema);
    let sql = format!(
        "WITH RECURSIVE roots(id) AS ({ROOTS}), \
         lineage(root, id) AS (SELECT id, id FROM roots{children}) \
         SELECT l.root, SUM({cost} + {aux_cost}), SUM({tokens} + {aux_tokens}) \
         FROM lineage l JOIN sessions s ON s.id = l.id GROUP BY l.root"
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([since, until])?;
    let mut totals = HashMap::new();
    while let Some(row) = rows.next()? {
        let Some(root) = text_at(row, 0)? else { continue };
        let cost = real_at(row, 1)?.unwrap_or(0.0);
        let tokens = real_at(row, 2)?.unwrap_or(0.0).max(0.0) as u64;
        totals.insert(root, (cost, tokens));
    }
    Ok(totals)
}

fn token_sum(cols: &HashSet<String>, alias: &str) -> String {
    ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]
        .iter()
        .map(|c| format!("COALESCE({}, 0)", column_or(cols, alias, c, "0")))
        .collect::<Vec<_>>()
        .join(" + ")
}

fn aux_terms(schema: &Schema) -> (String, String) {
    if !schema.has_aux() {
        return ("0".to_string(), "0".to_string());
    }
    let cols = &schema.usage;
    let actual = column_or(cols, "u", "actual_cost_usd", "0");
    let estimated = column_or(cols, "u", "estimated_cost_usd", "0");
    let from = "FROM session_model_usage u WHERE u.session_id = s.id AND u.task != ''";
    (
        format!(
            "(SELECT COALESCE(SUM(CASE WHEN COALESCE({actual}, 0) > 0 THEN {actual} \
             ELSE COALESCE({estimated}, 0) END), 0) {from})"
        ),
        format!("(SELECT COALESCE(SUM({}), 0) {from})", token_sum(cols, "u")),
    )
}

struct Root {
    id: String,
    started_at: f64,
    end_reason: Option<String>,
    last: Option<FinalReply>,
}

fn read_roots(
    conn: &Connection,
    schema: &Schema,
    since: f64,
    until: f64,
) -> rusqlite::Result<Vec<Root>> {
    let end_reason = column_or(&schema.sessions, "r", "end_reason", "NULL");
    let (last_cols, last_join) = if schema.has_messages() {
        let tool_calls = column_or(&schema.messages, "m", "tool_calls", "NULL");
        (format!(", m.role, m.content, {tool_calls}"), last_message_join(schema, "r.id"))
    } else {
        (String::new(), String::new())
    };
    let sql = format!(
        "WITH roots(id) AS ({ROOTS}) SELECT r.id, r.started_at, {end_reason}{last_cols} \
         FROM roots JOIN sessions r ON r.id = roots.id{last_join}"
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([since, until])?;
    let mut roots = Vec::new();
    while let Some(row) = rows.next()? {
        let (Some(id), Some(started_at)) = (text_at(row, 0)?, real_at(row, 1)?) else {
            continue;
        };
        let last = if schema.has_messages() { Some(classify(row, 3)?) } else { None };
        roots.push(Root { id, started_at, end_reason: text_at(row, 2)?, last });
    }
    Ok(roots)
}

fn last_message_join(schema: &Schema, session: &str) -> String {
    let active = if schema.messages.contains("active") { " AND m2.active = 1" } else { "" };
    format!(
        " LEFT JOIN messages m ON m.rowid = (SELECT MAX(m2.rowid) FROM messages m2 \
         WHERE m2.session_id = {session}{active})"
    )
}

/// Classify the last message from columns `at` (role), `at + 1` (content), `at + 2` (tool calls).
fn classify(row: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<FinalReply> {
    let Some(role) = text_at(row, at)? else { return Ok(FinalReply::Empty) };
    let tool_calls = text_at(row, at + 2)?.unwrap_or_default();
    let calls_tools = !matches!(tool_calls.trim(), "" | "[]" | "null");
    if role != "assistant" || calls_tools {
        return Ok(FinalReply::Interrupted);
    }
    Ok(match text_at(row, at + 1)? {
        Some(content) if !content.trim().is_empty() => FinalReply::Text(content),
        _ => FinalReply::Empty,
    })
}

/// The final reply of a rotated session: follow compression continuations to the tip.
fn tip_reply(conn: &Connection, schema: &Schema, root: &str) -> rusqlite::Result<FinalReply> {
    if !schema.has_messages() {
        return Ok(FinalReply::Unknown);
    }
    let cols = &schema.sessions;
    let mut tip = root.to_string();
    if cols.contains("parent_session_id") && cols.contains("end_reason") {
        let source = column_or(cols, "c", "source", "NULL");
        let sql = format!(
            "SELECT c.id, c.end_reason FROM sessions c WHERE c.parent_session_id = ?1 \
             AND COALESCE({source}, '') != 'subagent' ORDER BY c.started_at DESC LIMIT 1"
        );
        let mut stmt = conn.prepare(&sql)?;
        // Bounded: a parent cycle in a damaged file must not loop forever.
        for _ in 0..64 {
            let next = stmt.query_row([&tip], |row| Ok((text_at(row, 0)?, text_at(row, 1)?)));
            match next {
                Ok((Some(child), reason)) => {
                    tip = child;
                    if reason.as_deref() != Some("compression") {
                        break;
                    }
                }
                Ok((None, _)) | Err(rusqlite::Error::QueryReturnedNoRows) => break,
                Err(e) => return Err(e),
            }
        }
    }
    let tool_calls = column_or(&schema.messages, "m", "tool_calls", "NULL");
    let sql = format!(
        "SELECT m.role, m.content, {tool_calls} FROM (SELECT ?1 AS id) t{}",
        last_message_join(schema, "t.id")
    );
    conn.query_row(&sql, [&tip], |row| classify(row, 0))
}

#[cfg(test)]
mod tests;
