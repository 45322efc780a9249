//! The provider's own usage, read from a response body as it streams past: every
//! `"usage": {...}` object of a JSON body or of SSE events, across chunk boundaries, merged
//! field by field (the last value of a field wins). That covers each shape the route speaks:
//!
//! - OpenAI chat completions: `usage` of the answer, or of the final chunk of a stream
//!   (`stream_options.include_usage`); earlier chunks carry `"usage": null`.
//! - OpenAI responses: `usage` of the answer, or of the `response.completed` event.
//! - Anthropic messages: `usage` of the answer; streamed, `message_start` carries the input
//!   counts and `message_delta` the final (cumulative) output count.
//!
//! Memory is bounded whatever the body: a few bytes of a key split across chunks, and one
//! usage object being read (at most [`MAX_OBJECT`] bytes; a larger one is dropped). The
//! route never changes a request to get usage: an answer without it is `None`, counted as
//! unknown by the caller.

use memchr::memmem;
use serde_json::Value;

use crate::policy::llm::{ProviderKind, Usage};

const KEY: &[u8] = b"\"usage\"";
/// Largest usage object read.
const MAX_OBJECT: usize = 16 * 1024;

/// The raw counts seen so far, as the provider names them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Raw {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    /// `prompt_tokens_details.cached_tokens` or `input_tokens_details.cached_tokens`.
    cached_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    /// `completion_tokens_details.reasoning_tokens` or `output_tokens_details.reasoning_tokens`.
    reasoning_tokens: Option<u64>,
}

/// Where the scanner is.
#[derive(Debug)]
enum State {
    /// Looking for the key; `matched` bytes of `"usage"` ended the last chunk.
    Key { matched: usize },
    /// After the key: white space, then `:`, white space, then `{` (anything else drops it).
    Colon { seen_colon: bool },
    /// Reading the object.
    Object {
        buf: Vec<u8>,
        depth: u32,
        in_string: bool,
        escaped: bool,
    },
}

/// Incremental usage reader.
#[derive(Debug)]
pub(crate) struct UsageScanner {
    state: State,
    /// The byte before the current position (a key after `\` is text, not a field).
    last: u8,
    raw: Raw,
    seen: bool,
}

impl Default for UsageScanner {
    fn default() -> Self {
        Self::new()
    }
}

// === impl UsageScanner ===

impl UsageScanner {
    /// A scanner with nothing seen.
    pub(crate) fn new() -> Self {
        Self {
            state: State::Key { matched: 0 },
            last: 0,
            raw: Raw::default(),
            seen: false,
        }
    }

    /// Feed the next chunk of the body.
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        let mut i = 0;
        while i < chunk.len() {
            i = match &mut self.state {
                State::Key { matched: 0 } => match memmem::find(&chunk[i..], KEY) {
                    Some(at) => {
                        let at = i + at;
                        let before = if at == 0 { self.last } else { chunk[at - 1] };
                        if before != b'\\' {
                            self.state = State::Colon { seen_colon: false };
                        }
                        at + KEY.len()
                    }
                    None => {
                        // A key cut by the chunk's end: remember how much of it ended it.
                        let tail = &chunk[i..];
                        let keep = (1..KEY.len().min(tail.len() + 1))
                            .rev()
                            .find(|&n| tail.ends_with(&KEY[..n]))
                            .unwrap_or(0);
                        let escaped = keep > 0
                            && match tail.len().checked_sub(keep + 1) {
                                Some(p) => tail[p] == b'\\',
                                None => self.last == b'\\',
                            };
                        if keep > 0 && !escaped {
                            self.state = State::Key { matched: keep };
                        }
                        chunk.len()
                    }
                },
                State::Key { matched } => {
                    let want = &KEY[*matched..];
                    let have = &chunk[i..];
                    let n = want.len().min(have.len());
                    if have[..n] != want[..n] {
                        // Not the key after all: search again from here.
                        self.state = State::Key { matched: 0 };
                        i
                    } else if n == want.len() {
                        self.state = State::Colon { seen_colon: false };
                        i + n
                    } else {
                        *matched += n;
                        i + n
                    }
                }
                State::Colon { seen_colon } => {
                    let b = chunk[i];
                    match b {
                        b' ' | b'\t' | b'\r' | b'\n' => {}
                        b':' if !*seen_colon => *seen_colon = true,
                        b'{' if *seen_colon => {
                            self.state = State::Object {
                                buf: vec![b'{'],
                                depth: 1,
                                in_string: false,
                                escaped: false,
                            }
                        }
                        // `null`, a number, or the key as a value: not a usage object.
                        _ => self.state = State::Key { matched: 0 },
                    }
                    i + 1
                }
                State::Object {
                    buf,
                    depth,
                    in_string,
                    escaped,
                } => {
                    let mut j = i;
                    let mut closed = false;
                    while j < chunk.len() {
                        let b = chunk[j];
                        j += 1;
                        if *in_string {
                            match (b, *escaped) {
                                (_, true) => *escaped = false,
                                (b'\\', false) => *escaped = true,
                                (b'"', false) => *in_string = false,
                                _ => {}
                            }
                        } else {
                            match b {
                                b'"' => *in_string = true,
                                b'{' | b'[' => *depth += 1,
                                b'}' | b']' => {
                                    *depth -= 1;
                                    if *depth == 0 {
                                        closed = true;
                                        break;
                                    }
                                }
                                _ => {}
                            }
                        }
                    }
                    let room = MAX_OBJECT.saturating_sub(buf.len());
                    let take = (j - i).min(room);
                    buf.extend_from_slice(&chunk[i..i + take]);
                    if take < j - i {
                        // Larger than any usage object: not one.
                        self.state = State::Key { matched: 0 };
                    } else if closed {
                        let object = std::mem::take(buf);
                        self.state = State::Key { matched: 0 };
                        self.merge(&object);
                    }
                    j
                }
            };
            if i > 0 && i <= chunk.len() {
                self.last = chunk[i - 1];
            }
        }
    }

    fn merge(&mut self, object: &[u8]) {
        let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(object) else {
            return;
        };
        let n = |v: Option<&Value>| v.and_then(Value::as_u64);
        let detail = |outer: &str, inner: &str| n(map.get(outer).and_then(|d| d.get(inner)));
        let r = &mut self.raw;
        let mut any = false;
        let mut set = |slot: &mut Option<u64>, v: Option<u64>| {
            if v.is_some() {
                *slot = v;
                any = true;
            }
        };
        set(&mut r.prompt_tokens, n(map.get("prompt_tokens")));
        set(&mut r.completion_tokens, n(map.get("completion_tokens")));
        set(&mut r.input_tokens, n(map.get("input_tokens")));
        set(&mut r.output_tokens, n(map.get("output_tokens")));
        set(
            &mut r.cached_tokens,
            detail("prompt_tokens_details", "cached_tokens")
                .or_else(|| detail("input_tokens_details", "cached_tokens")),
        );
        set(
            &mut r.cache_read_input_tokens,
            n(map.get("cache_read_input_tokens")),
        );
        set(
            &mut r.cache_creation_input_tokens,
            n(map.get("cache_creation_input_tokens")),
        );
        set(
            &mut r.reasoning_tokens,
            detail("completion_tokens_details", "reasoning_tokens")
                .or_else(|| detail("output_tokens_details", "reasoning_tokens")),
        );
        self.seen |= any;
    }

    /// The usage read, normalised for `kind` ([`Usage`]: input without the cached part);
    /// `None` when the body carried no usage object with a count.
    pub(crate) fn usage(&self, kind: ProviderKind) -> Option<Usage> {
        if !self.seen {
            return None;
        }
        let r = &self.raw;
        let v = |o: Option<u64>| o.unwrap_or(0);
        let reasoning = v(r.reasoning_tokens);
        let usage = if kind == ProviderKind::Anthropic || r.cache_creation_input_tokens.is_some() {
            // Anthropic: input_tokens excludes both cache counts.
            Usage {
                input: v(r.input_tokens.or(r.prompt_tokens)),
                cache_read: v(r.cache_read_input_tokens.or(r.cached_tokens)),
                cache_write: v(r.cache_creation_input_tokens),
                output: v(r.output_tokens.or(r.completion_tokens)),
                reasoning,
            }
        } else if let Some(prompt) = r.prompt_tokens {
            // Chat completions: prompt_tokens includes the cached tokens.
            let cached = v(r.cached_tokens.or(r.cache_read_input_tokens));
            Usage {
                input: prompt.saturating_sub(cached),
                cache_read: cached.min(prompt),
                cache_write: 0,
                output: v(r.completion_tokens.or(r.output_tokens)),
                reasoning,
            }
        } else {
            // Responses: input_tokens includes the cached tokens.
            let total = v(r.input_tokens);
            let cached = v(r.cached_tokens);
            Usage {
                input: total.saturating_sub(cached),
                cache_read: cached.min(total),
                cache_write: 0,
                output: v(r.output_tokens),
                reasoning,
            }
        };
        Some(usage)
    }
}

#[cfg(test)]
mod tests;
