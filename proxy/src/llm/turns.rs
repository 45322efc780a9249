//! Refusals per turn: which refused requests are further attempts of a turn already refused.
//!
//! A turn is what an agent does for one user message. Refused, it may still send more than
//! one request: a client retries the same body, and Hermes 0.20.1 sends, beside the turn's
//! own completion, its session-title call (the auxiliary `title_generation` task, on the main
//! runtime when it has no base URL of its own) carrying the same user message. Every refused
//! request is an attempt; the attempts of one turn are one refused turn.
//!
//! A refused (or, in observe mode, would-be refused) request is keyed by its role, its
//! provider path and its *anchor*: the start of the latest user message that has text
//! (`messages[]` of a chat or messages request, `input` of a responses request; a part list
//! reads its first text part), else the whole body. A refused request whose key was refused
//! within [`TURN_WINDOW`] is a further attempt of that turn (`retry_of_refusal` on its
//! decision line); it counts per attempt, not per turn. At most [`MAX_TURNS`] keys are kept,
//! the oldest forgotten first, so the memory is bounded whatever the agent sends.
//!
//! The anchor is read only when a request is refused, by one more validating pass over the
//! body that keeps slices of it and allocates nothing per message.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::scan::{self, ObjectScan, Schema};

/// How long a refused turn is remembered after its last refused attempt.
pub(crate) const TURN_WINDOW: Duration = Duration::from_secs(60);

/// Most refused turns remembered at once.
pub(crate) const MAX_TURNS: usize = 1024;

/// Bytes of the anchor's JSON text that key a turn: the start of the user message, which
/// Hermes' title call repeats (cut to 1000 characters there).
pub(crate) const ANCHOR_BYTES: usize = 256;

/// The key of a refused request's turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TurnKey([u8; 32]);

/// The refused turns of the last [`TURN_WINDOW`], oldest first.
#[derive(Debug, Default)]
pub(crate) struct RefusedTurns {
    seen: Mutex<VecDeque<(Instant, TurnKey)>>,
}

// === impl RefusedTurns ===

impl RefusedTurns {
    /// An empty memory.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Record a refused request of turn `key` at `now`; `true` when that turn was refused
    /// within [`TURN_WINDOW`] (the request is a further attempt of it).
    pub(crate) fn refused(&self, key: TurnKey, now: Instant) -> bool {
        let Ok(mut seen) = self.seen.lock() else {
            return false;
        };
        while seen
            .front()
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) > TURN_WINDOW)
        {
            seen.pop_front();
        }
        let before = seen.iter().position(|(_, k)| *k == key);
        if let Some(i) = before {
            seen.remove(i);
        }
        if seen.len() >= MAX_TURNS {
            seen.pop_front();
        }
        seen.push_back((now, key));
        before.is_some()
    }

    /// Turns remembered now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.seen.lock().map(|s| s.len()).unwrap_or(0)
    }
}

/// `messages` / `input` of a request, read for the turn's anchor.
static TURN: Schema = Schema {
    keys: &[("messages", None), ("input", None)],
};
/// One message (or responses input item).
static MESSAGE: Schema = Schema {
    keys: &[("role", None), ("content", None)],
};
/// One part of a message's content list.
static PART: Schema = Schema {
    keys: &[("text", None)],
};

/// The turn key of a request of `role` on the provider path `path` with `body`.
pub(crate) fn turn_key(role: &str, path: &str, body: &[u8]) -> TurnKey {
    let mut hash = Sha256::new();
    for part in [role.as_bytes(), b"\n", path.as_bytes(), b"\n"] {
        hash.update(part);
    }
    match anchor(body) {
        Some(text) => {
            hash.update(b"anchor\n");
            hash.update(cut(text, ANCHOR_BYTES));
        }
        None => {
            hash.update(b"body\n");
            hash.update(body);
        }
    }
    TurnKey(hash.finalize().into())
}

/// The JSON text of the latest user message's text, when the body has one.
pub(crate) fn anchor(body: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(body).ok()?;
    let scan = scan::scan_object(text, text, &TURN).ok()?;
    let list = scan
        .get("messages")
        .or_else(|| scan.get("input"))
        .map(|m| m.raw)?;
    if list.starts_with('"') {
        // A responses request whose `input` is the user's text itself.
        return Some(list);
    }
    let mut latest = None;
    let walked = scan::for_each_item(list, |_, item| {
        if let Some(text) = user_text(text, item) {
            latest = Some(text);
        }
        Ok::<(), ()>(())
    });
    matches!(walked, Ok(Ok(()))).then_some(latest).flatten()
}

/// The text of `item` when it is a user message that has one: its string content, or the
/// first text part of its part list (tool results alone have none).
fn user_text<'a>(body: &'a str, item: &'a str) -> Option<&'a str> {
    if !item.starts_with('{') {
        return None;
    }
    let message: ObjectScan<'a> = scan::scan_object(body, item, &MESSAGE).ok()?;
    if message.str_at(&["role"]).as_deref() != Some("user") {
        return None;
    }
    let content = message.get("content")?.raw;
    if content.starts_with('"') {
        return (content.len() > 2).then_some(content);
    }
    let mut first = None;
    let _ = scan::for_each_item(content, |_, part| {
        let text = part
            .starts_with('{')
            .then(|| scan::scan_object(body, part, &PART).ok())
            .flatten()
            .and_then(|p| p.get("text").map(|m| m.raw))
            .filter(|t| t.starts_with('"') && t.len() > 2);
        match text {
            Some(text) => {
                first = Some(text);
                Err(())
            }
            None => Ok(()),
        }
    });
    first
}

/// `text` cut to at most `max` bytes (on a character boundary).
fn cut(text: &str, max: usize) -> &[u8] {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text.as_bytes()[..end]
}

#[cfg(test)]
mod tests;
