//! Head/tail truncation with Hermes' footer (E7, after the image pass).
//!
//! A page longer than the budget keeps its first ~75% and last ~25% (in Unicode code points),
//! each cut snapped to a line boundary when one is near, with the exact middle marker and footer
//! that tell the agent how much it sees and which `read_file` call pages in the omitted middle of
//! the stored full text. Offsets are found by walking only as far as needed: forward over the
//! head budget, backward over the tail budget; the full character count is one counting pass.

use std::borrow::Cow;

use super::store::Store;
use super::thousands::thousands;

/// Between head and tail.
pub(crate) const MIDDLE_MARKER: &str = "\n\n[... middle omitted — see footer ...]\n\n";

const RULE_TITLE: &str = "──────── [TRUNCATED] ────────";
const RULE_END: &str = "─────────────────────────────";
const NOT_STORED: &str = "Full text could not be stored; re-run web_extract on a more specific URL or use browser_navigate for the complete page.";

/// Sizes of one truncated page, for debug metrics (`original_size`, `sent_size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TruncationStats {
    /// Characters of the clean page.
    pub(crate) original_chars: usize,
    /// Characters of the model text, footer included.
    pub(crate) sent_chars: usize,
    /// Whether the full text was written to the store.
    pub(crate) stored: bool,
}

/// Truncate `clean` to `limit` characters (75/25 head/tail) with the footer, storing the full
/// text when `store` is given. Returned borrowed when the page fits.
pub fn truncate_and_store<'a>(
    clean: &'a str,
    limit: usize,
    url: &str,
    store: Option<&Store>,
) -> Cow<'a, str> {
    truncate_with_stats(clean, limit, url, store).0
}

/// [`truncate_and_store`], plus the sizes when the page was truncated.
pub(crate) fn truncate_with_stats<'a>(
    clean: &'a str,
    limit: usize,
    url: &str,
    store: Option<&Store>,
) -> (Cow<'a, str>, Option<TruncationStats>) {
    // A page with no more bytes than the budget has no more characters either.
    if clean.len() <= limit {
        return (Cow::Borrowed(clean), None);
    }
    let total = clean.chars().count();
    if total <= limit {
        return (Cow::Borrowed(clean), None);
    }
    let window = Window::cut(clean, total, limit);
    let stored = store.and_then(|store| match store.write(url, clean) {
        Ok(path) => Some(path.to_string_lossy().into_owned()),
        Err(error) => {
            tracing::debug!(url, error = %error, "failed to store the full text of a truncated page");
            None
        }
    });
    let (text, sent_chars) = window.render(total, stored.as_deref());
    let stats = TruncationStats {
        original_chars: total,
        sent_chars,
        stored: stored.is_some(),
    };
    (Cow::Owned(text), Some(stats))
}

/// The shown parts of a truncated page and their sizes in characters.
struct Window<'a> {
    head: &'a str,
    tail: &'a str,
    head_chars: usize,
    tail_chars: usize,
}

// === impl Window ===

impl<'a> Window<'a> {
    /// Cuts `clean` (`total` characters, more than `limit`).
    fn cut(clean: &'a str, total: usize, limit: usize) -> Self {
        // int(limit * 0.75) without the float.
        let head_budget = limit / 4 * 3 + limit % 4 * 3 / 4;
        let tail_budget = limit - head_budget;
        let (head, head_chars) = snap_head(clean, head_budget);
        let (tail, tail_chars) = snap_tail(clean, total, tail_budget);
        Self {
            head,
            tail,
            head_chars,
            tail_chars,
        }
    }

    /// The model text and its length in characters.
    fn render(&self, total: usize, stored: Option<&str>) -> (String, usize) {
        let mut out = String::with_capacity(
            self.head.len() + self.tail.len() + 600 + 2 * stored.map_or(0, str::len),
        );
        out.push_str(self.head);
        out.push_str(MIDDLE_MARKER);
        out.push_str(self.tail);
        let footer_start = out.len();
        out.push_str("\n\n");
        out.push_str(RULE_TITLE);
        out.push_str("\nShowing ");
        out.push_str(&thousands(self.head_chars));
        out.push_str(" chars (head) + ");
        out.push_str(&thousands(self.tail_chars));
        out.push_str(" chars (tail) of ");
        out.push_str(&thousands(total));
        out.push_str(" total clean characters.\n");
        match stored {
            Some(path) => push_stored(&mut out, path, self.head),
            None => out.push_str(NOT_STORED),
        }
        out.push('\n');
        out.push_str(RULE_END);
        let sent = self.head_chars
            + MIDDLE_MARKER.chars().count()
            + self.tail_chars
            + out[footer_start..].chars().count();
        (out, sent)
    }
}

fn push_stored(out: &mut String, path: &str, head: &str) {
    // read_file is 1-indexed; +2 lands on the first line after the shown head.
    // memchr finds the newlines a vector at a time (a byte filter was 5% of a cache hit).
    let offset = memchr::memchr_iter(b'\n', head.as_bytes()).count() + 2;
    out.push_str("Full text saved to: ");
    out.push_str(path);
    out.push_str("\nTo read the omitted middle: read_file path=\"");
    out.push_str(path);
    out.push_str("\" offset=");
    out.push_str(&offset.to_string());
    out.push_str(
        " limit=200  (the file is the complete page; raise/lower offset to page through it).",
    );
}

/// The first `budget` characters, cut back to the last newline when that newline sits past
/// half the budget (the newline itself dropped).
fn snap_head(clean: &str, budget: usize) -> (&str, usize) {
    // A newline at character index i snaps when i > budget / 2, i.e. i >= threshold.
    let threshold = budget / 2 + 1;
    if threshold >= budget {
        let end = advance_chars(clean, 0, budget);
        return (&clean[..end], budget);
    }
    let at_threshold = advance_chars(clean, 0, threshold);
    let end = advance_chars(clean, at_threshold, budget - threshold);
    match clean[at_threshold..end].rfind('\n') {
        Some(nl) => {
            let cut = at_threshold + nl;
            (
                &clean[..cut],
                threshold + clean[at_threshold..cut].chars().count(),
            )
        }
        None => (&clean[..end], budget),
    }
}

/// The last `budget` characters, starting after the first newline when that newline sits
/// before half the budget. A zero budget takes the whole page, as Python's `s[-0:]` does.
fn snap_tail(clean: &str, total: usize, budget: usize) -> (&str, usize) {
    if budget == 0 {
        return (clean, total);
    }
    let start = retreat_chars(clean, budget);
    let tail = &clean[start..];
    // A newline at tail index i snaps when i < budget / 2, i.e. i < ceil(budget / 2).
    let window_end = advance_chars(tail, 0, budget.div_ceil(2));
    match tail[..window_end].find('\n') {
        Some(nl) => (&tail[nl + 1..], budget - tail[..nl].chars().count() - 1),
        None => (tail, budget),
    }
}

/// The byte offset `n` characters after byte offset `from` (or the end of `s`).
pub(crate) fn advance_chars(s: &str, from: usize, n: usize) -> usize {
    let bytes = &s.as_bytes()[from..];
    if n <= bytes.len() && bytes[..n].is_ascii() {
        return from + n;
    }
    let mut remaining = n;
    let mut base = 0;
    for chunk in bytes.chunks(64) {
        let starts = chunk.iter().filter(|&&b| is_char_start(b)).count();
        if starts <= remaining {
            remaining -= starts;
            base += chunk.len();
            continue;
        }
        // The (remaining + 1)-th character start in this chunk is the answer.
        let mut seen = 0;
        for (i, &b) in chunk.iter().enumerate() {
            if is_char_start(b) {
                if seen == remaining {
                    return from + base + i;
                }
                seen += 1;
            }
        }
    }
    s.len()
}

/// The byte offset where the last `n` characters of `s` begin (0 when `s` is shorter).
pub(crate) fn retreat_chars(s: &str, n: usize) -> usize {
    let bytes = s.as_bytes();
    if n <= bytes.len() && bytes[bytes.len() - n..].is_ascii() {
        return bytes.len() - n;
    }
    let mut remaining = n;
    let mut end = bytes.len();
    for chunk in bytes.rchunks(64) {
        let starts = chunk.iter().filter(|&&b| is_char_start(b)).count();
        if starts < remaining {
            remaining -= starts;
            end -= chunk.len();
            continue;
        }
        // The remaining-th character start from the end of this chunk is the answer.
        let chunk_start = end - chunk.len();
        let mut seen = 0;
        for (i, &b) in chunk.iter().enumerate().rev() {
            if is_char_start(b) {
                seen += 1;
                if seen == remaining {
                    return chunk_start + i;
                }
            }
        }
    }
    0
}

fn is_char_start(b: u8) -> bool {
    // Not a UTF-8 continuation byte (0b10xx_xxxx).
    (b as i8) >= -0x40
}

#[cfg(test)]
mod tests;
