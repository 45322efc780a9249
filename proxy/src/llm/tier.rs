//! The served service tier, read from a response body as it streams past: a scanner that
//! finds `"service_tier": "<value>"` in JSON bodies and SSE chunks alike, across chunk
//! boundaries, keeping only a fixed-size carry (bounded memory whatever the body size).

use memchr::memmem;

const KEY: &[u8] = b"\"service_tier\"";
/// Bytes kept from the previous chunk: longer than any complete match.
const CARRY: usize = 128;
/// Longest tier value accepted.
const MAX_VALUE: usize = 64;

/// Incremental scanner; the last non-null value wins (the final chunk carries the tier the
/// request was served with).
#[derive(Clone, Debug, Default)]
pub(crate) struct TierScanner {
    carry: Vec<u8>,
    last: Option<String>,
}

/// Result of reading one match.
enum Match {
    Value(String),
    Null,
    Incomplete,
    Invalid,
}

// === impl TierScanner ===

impl TierScanner {
    /// A scanner with nothing seen.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Feed the next chunk of the body.
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        if !self.carry.is_empty() {
            // Matches starting in the carry may end inside this chunk's head.
            let head = &chunk[..chunk.len().min(CARRY)];
            let mut joined = Vec::with_capacity(self.carry.len() + head.len());
            joined.extend_from_slice(&self.carry);
            joined.extend_from_slice(head);
            self.scan(&joined, Some(self.carry.len()));
        }
        self.scan(chunk, None);
        if chunk.len() >= CARRY {
            self.carry.clear();
            self.carry.extend_from_slice(&chunk[chunk.len() - CARRY..]);
        } else {
            self.carry.extend_from_slice(chunk);
            let excess = self.carry.len().saturating_sub(CARRY);
            self.carry.drain(..excess);
        }
    }

    /// The last tier seen.
    pub(crate) fn served(&self) -> Option<&str> {
        self.last.as_deref()
    }

    fn scan(&mut self, window: &[u8], starts_before: Option<usize>) {
        for at in memmem::find_iter(window, KEY) {
            if starts_before.is_some_and(|limit| at >= limit) {
                break;
            }
            // An escaped key is text inside a string (model output), not a field.
            if at > 0 && window[at - 1] == b'\\' {
                continue;
            }
            if let Match::Value(v) = read_value(&window[at + KEY.len()..]) {
                self.last = Some(v);
            }
        }
    }
}

/// Read `\s*:\s*("value"|null)` after the key.
fn read_value(rest: &[u8]) -> Match {
    let mut i = skip_ws(rest, 0);
    match rest.get(i) {
        None => return Match::Incomplete,
        Some(b':') => i += 1,
        Some(_) => return Match::Invalid,
    }
    i = skip_ws(rest, i);
    match rest.get(i) {
        None => Match::Incomplete,
        Some(b'"') => {
            let body = &rest[i + 1..];
            let len = body
                .iter()
                .take(MAX_VALUE + 1)
                .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')));
            match len {
                None if body.len() <= MAX_VALUE => Match::Incomplete,
                Some(n) if n > 0 && body[n] == b'"' => {
                    Match::Value(String::from_utf8_lossy(&body[..n]).into_owned())
                }
                _ => Match::Invalid,
            }
        }
        Some(b'n') if rest[i..].starts_with(b"null") => Match::Null,
        Some(b'n') if b"null".starts_with(&rest[i..]) => Match::Incomplete,
        Some(_) => Match::Invalid,
    }
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_in_chunks(body: &str, size: usize) -> Option<String> {
        let mut s = TierScanner::new();
        for chunk in body.as_bytes().chunks(size) {
            s.feed(chunk);
        }
        s.served().map(str::to_string)
    }

    #[test]
    fn the_served_tier_is_found_whatever_the_chunk_boundaries() {
        let cases = [
            (
                r#"{"id":"x","service_tier":"priority","usage":{}}"#,
                Some("priority"),
            ),
            (
                "data: {\"a\":1}\n\ndata: {\"service_tier\" : \"flex\"}\n\ndata: [DONE]\n\n",
                Some("flex"),
            ),
            (r#"{"usage":{"service_tier":"standard"}}"#, Some("standard")),
            (r#"{"service_tier":null}"#, None),
            (
                r#"{"content":"say \"service_tier\":\"priority\" please"}"#,
                None,
            ),
            (
                r#"{"service_tier":"default"} {"service_tier":null}"#,
                Some("default"),
            ),
            (
                r#"{"service_tier":"auto"}{"x":1}{"service_tier":"priority"}"#,
                Some("priority"),
            ),
            (r#"{"nothing":"here"}"#, None),
        ];
        for (body, want) in cases {
            for size in [1, 2, 3, 7, 16, 200, 10_000] {
                assert_eq!(
                    scan_in_chunks(body, size).as_deref(),
                    want,
                    "the tier of {body} read in chunks of {size} must be {want:?}"
                );
            }
        }
    }

    #[test]
    fn the_carry_stays_bounded_on_a_large_body() {
        let mut s = TierScanner::new();
        let filler = "x".repeat(10_000);
        for _ in 0..100 {
            s.feed(filler.as_bytes());
            assert!(
                s.carry.len() <= CARRY,
                "the carry must stay within {CARRY} bytes"
            );
        }
        s.feed(br#""service_tier":"scale""#);
        assert_eq!(
            s.served(),
            Some("scale"),
            "a tier after a large body must still be found"
        );
    }
}
