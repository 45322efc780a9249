//! Is a cron run's final reply a silence marker? Hermes' cron rule, re-implemented.
//!
//! A reply is silence when, after trimming, it is non-empty and either
//! 1. the whole reply, its first non-blank line or its last non-blank line is a marker
//!    (`[SILENT]`, `SILENT`, `NO_REPLY`, `NO REPLY`) once upper-cased with whitespace runs
//!    collapsed to one space, or
//! 2. the upper-cased reply starts with the bracketed `[SILENT]` (`[SILENT] nothing new`).
//!
//! A marker inside a sentence is content, not silence. Whitespace and line breaks follow
//! Python's `str.strip`, `str.split` and `str.splitlines`, which Hermes uses.

/// The markers Hermes' cron scheduler treats as "nothing to report".
pub const MARKERS: [&str; 4] = ["[SILENT]", "SILENT", "NO_REPLY", "NO REPLY"];

/// Whether `reply` is a cron silence response.
pub fn is_silence(reply: &str) -> bool {
    let trimmed = reply.trim_matches(is_py_space);
    if trimmed.is_empty() {
        return false;
    }
    if is_marker(trimmed) {
        return true;
    }
    let mut lines =
        py_splitlines(trimmed).filter(|line| !line.trim_matches(is_py_space).is_empty());
    let first = lines.next();
    let last = lines.last().or(first);
    if first.is_some_and(is_marker) || last.is_some_and(is_marker) {
        return true;
    }
    // `upper(trimmed).starts_with("[SILENT]")`: the marker is 8 ASCII characters and an
    // upper-cased non-ASCII character is never ASCII bytes, so the first 8 upper-cased
    // characters decide, without upper-casing the whole reply.
    trimmed
        .chars()
        .flat_map(char::to_uppercase)
        .take(8)
        .eq("[SILENT]".chars())
}

/// Most non-space characters a marker has (`[SILENT]`, `NO_REPLY`).
const MARKER_MAX_CHARS: usize = 8;

fn is_marker(line: &str) -> bool {
    // Upper-casing never shortens a character, so a line with more non-space characters
    // than the longest marker cannot be one (replies are mostly long: no allocation then).
    if line
        .chars()
        .filter(|c| !is_py_space(*c))
        .nth(MARKER_MAX_CHARS)
        .is_some()
    {
        return false;
    }
    let upper = line.to_uppercase();
    let canonical = upper
        .split(is_py_space)
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>();
    MARKERS.contains(&canonical.join(" ").as_str())
}

/// Python's `str.isspace`: Unicode White_Space plus the ASCII separators U+001C..U+001F.
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.splitlines` boundaries (`\r\n` counts as one).
fn py_splitlines(text: &str) -> impl Iterator<Item = &str> {
    let is_break = |c: char| {
        matches!(
            c,
            '\n' | '\r'
                | '\u{b}'
                | '\u{c}'
                | '\u{1c}'
                | '\u{1d}'
                | '\u{1e}'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        )
    };
    // Splitting on every break char turns "\r\n" into an extra empty line; blank lines are
    // dropped by the caller, so that is harmless here.
    text.split(is_break)
}

#[cfg(test)]
pub(crate) mod tests;
