//! Secrets in prompts: a request body on the route is scanned with gate E1's rule set
//! (Hermes' prefix families, the built-in gitleaks-breadth rules and JWTs, the policy's rule
//! files and exemptions) before anything else judges it. The whole body is scanned, so
//! message contents, tool results, system prompts and every other field are covered.
//!
//! The body is scanned as sent, and — when it holds JSON escapes that could hide a secret
//! (`\uXXXX`, `\/`) — once more with its escapes decoded. `redact` replaces each secret by
//! `[redacted:<rule>]` in the body itself (the replacement is plain JSON string text, so the
//! body stays the same JSON with the secret gone); a secret visible only once decoded, or a
//! redaction that would break the JSON, is refused instead. Nothing here ever logs, counts
//! or answers with the secret: only its rule id.

use std::borrow::Cow;
use std::ops::Range;

use crate::judge::gates::secret_url::{Found, find_in_text};
use crate::policy::SecretsPolicy;

/// Most secrets redacted in one body; past it the body is refused.
pub(crate) const MAX_REDACTIONS: usize = 256;

/// What the scan found.
#[derive(Debug, PartialEq, Eq)]
pub enum Finding {
    /// No secret.
    Clean,
    /// Secrets, by rule id in order of place; `redacted` is the body with each one replaced
    /// when that is possible.
    Secrets {
        /// The rule ids, first one first (deduplicated).
        rules: Vec<String>,
        /// The rules only report (rule files in `secrets.mode: report`): count, never act.
        report_only: bool,
        /// The body with every secret replaced, when each one could be.
        redacted: Option<String>,
    },
}

/// Scan `body` (UTF-8 text; other bodies are not scanned) under the policy's `secrets:`.
pub fn scan(body: &str, secrets: &SecretsPolicy) -> Finding {
    let mut rules: Vec<String> = Vec::new();
    let mut report_only = true;
    let mut out = String::new();
    let mut from = 0;
    let mut redactable = true;
    let mut count = 0;
    while let Some((span, found)) = find_in_text(&body[from..], Some(secrets)) {
        let span = from + span.start..from + span.end;
        note(&mut rules, &mut report_only, &found);
        count += 1;
        if count > MAX_REDACTIONS || !replaceable(body, &span) {
            redactable = false;
        }
        if !redactable {
            break;
        }
        out.push_str(&body[from..span.start]);
        out.push_str(&format!("[redacted:{}]", found.rule));
        from = span.end.max(span.start + 1).min(body.len());
        if from >= body.len() {
            break;
        }
    }
    // The redacted body exists only once a secret was replaced: a clean body is not copied.
    let replaced = redactable && count > 0;
    if replaced {
        out.push_str(&body[from.min(body.len())..]);
    }
    // A secret hidden behind JSON escapes is found in the decoded text around them; it
    // cannot be replaced in place.
    let scanned = if replaced { out.as_str() } else { body };
    for window in escaped_windows(scanned) {
        let decoded = unescape(&scanned[window]);
        if let Some((_, found)) = find_in_text(&decoded, Some(secrets)) {
            note(&mut rules, &mut report_only, &found);
            redactable = false;
            break;
        }
    }
    if rules.is_empty() {
        return Finding::Clean;
    }
    let redacted = redactable.then_some(out).filter(|r| is_json(r));
    Finding::Secrets {
        rules,
        report_only,
        redacted,
    }
}

fn note(rules: &mut Vec<String>, report_only: &mut bool, found: &Found) {
    *report_only &= found.report;
    if !rules.contains(&found.rule) {
        rules.push(found.rule.clone());
    }
}

/// A span can be replaced inside a JSON string when it holds no quote or escape.
fn replaceable(body: &str, span: &Range<usize>) -> bool {
    !span.is_empty() && !body[span.clone()].bytes().any(|b| b == b'"' || b == b'\\')
}

fn is_json(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

/// Bytes of text kept on each side of an escape that decodes to ASCII: longer than any
/// secret a rule bounds (a private key block, unbounded, is found in the text as sent,
/// escapes and all).
const WINDOW: usize = 1024;

/// The stretches of `text` around each escape that could hide part of a secret: `\/`, and
/// `\uXXXX` of a printable ASCII character (JSON encoders write those only to hide them;
/// the escapes they do write, of non-ASCII and control characters, cannot be part of a
/// token). Overlapping stretches are merged; each range is on character boundaries.
/// The window around the backslash at `at`, merged into `windows` (kept in order of place),
/// when it starts an escape [`escaped_windows`] looks for.
fn add_window(text: &str, at: usize, windows: &mut Vec<Range<usize>>) {
    let bytes = text.as_bytes();
    let suspicious = match bytes.get(at + 1) {
        Some(b'/') => true,
        Some(b'u') => hex4(text.get(at + 2..at + 6)).is_some_and(|c| (0x20..0x7f).contains(&c)),
        _ => false,
    };
    // An escaped backslash (`\\u0041`) is not an escape: the scan of the text as sent
    // and the decoded window both see its bytes as written.
    if !suspicious || !escaped_at(bytes, at) {
        return;
    }
    let mut start = at.saturating_sub(WINDOW);
    let mut end = (at + WINDOW).min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    while !text.is_char_boundary(end) {
        end += 1;
    }
    match windows.last_mut() {
        Some(last) if last.end >= start => last.end = last.end.max(end),
        _ => windows.push(start..end),
    }
}

fn escaped_windows(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut windows: Vec<Range<usize>> = Vec::new();
    // Only a backslash before `u` or `/` can start such an escape: those are searched for
    // (a JSON body holds many `\"`, which need no look), in order of place.
    let mut unicode = memchr::memmem::find_iter(bytes, b"\\u").peekable();
    let mut slash = memchr::memmem::find_iter(bytes, b"\\/").peekable();
    let escapes = std::iter::from_fn(|| match (unicode.peek(), slash.peek()) {
        (Some(u), Some(s)) if s < u => slash.next(),
        (Some(_), _) => unicode.next(),
        (None, _) => slash.next(),
    });
    for at in escapes {
        add_window(text, at, &mut windows);
    }
    windows
}

/// Whether the backslash at `at` starts an escape (an even number of backslashes before it).
fn escaped_at(bytes: &[u8], at: usize) -> bool {
    bytes[..at]
        .iter()
        .rev()
        .take_while(|&&b| b == b'\\')
        .count()
        % 2
        == 0
}

/// `text` with the JSON escapes that could hide a secret decoded: `\uXXXX` (surrogate
/// pairs joined; a lone surrogate becomes U+FFFD) and `\/`. Other escapes stay as written
/// (`\n` in a PEM block is what the rules expect). Borrowed when there is nothing to decode.
pub(crate) fn unescape(text: &str) -> Cow<'_, str> {
    if !text.contains("\\u") && !text.contains("\\/") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let bytes = tail.as_bytes();
        match bytes.get(1) {
            Some(b'/') => {
                out.push('/');
                rest = &tail[2..];
            }
            Some(b'u') => match hex4(tail.get(2..6)) {
                Some(hi @ 0xD800..=0xDBFF) => {
                    let lo = tail
                        .get(6..8)
                        .filter(|p| *p == "\\u")
                        .and_then(|_| hex4(tail.get(8..12)))
                        .filter(|lo| (0xDC00..=0xDFFF).contains(lo));
                    match lo {
                        Some(lo) => {
                            let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                            out.push(char::from_u32(c).unwrap_or('\u{FFFD}'));
                            rest = &tail[12..];
                        }
                        None => {
                            out.push('\u{FFFD}');
                            rest = &tail[6..];
                        }
                    }
                }
                Some(c) => {
                    out.push(char::from_u32(c).unwrap_or('\u{FFFD}'));
                    rest = &tail[6..];
                }
                None => {
                    out.push_str("\\u");
                    rest = &tail[2..];
                }
            },
            Some(_) => {
                // Keep the escape pair whole (`\\u` is a backslash then `u`, not an escape).
                let next = tail[1..].chars().next().map_or(1, char::len_utf8);
                out.push_str(&tail[..1 + next]);
                rest = &tail[1 + next..];
            }
            None => {
                out.push('\\');
                rest = "";
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

fn hex4(digits: Option<&str>) -> Option<u32> {
    let d = digits?;
    if d.len() != 4 || !d.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(d, 16).ok()
}

#[cfg(test)]
mod tests;
