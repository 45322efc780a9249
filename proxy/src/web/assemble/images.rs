//! Base64 inline images become `[IMAGE: alt]` / `[IMAGE]`; http(s) image links are kept.
//!
//! Three passes run in order, each over the previous one's output, with the exact match
//! semantics of Hermes' regular expressions (case-sensitive, leftmost, non-overlapping):
//! 1. `![alt](<ws>data:image/<type>;base64,<[A-Za-z0-9+/=ws]+>)` → `[IMAGE: alt]` (`[IMAGE]` if blank);
//! 2. `(<ws>data:image/<type>;base64,<[A-Za-z0-9+/=ws]+>)` → `[IMAGE]`;
//! 3. `data:image/<type>;base64,<[A-Za-z0-9+/=]+>` → `[IMAGE]`.
//!
//! `<type>` is any run without `;` (so `svg+xml` qualifies); `ws` is Python's Unicode whitespace.
//! Every match contains `data:image/`, so each pass walks the occurrences of that literal and
//! checks the surroundings; the caches in [`Payloads`] keep a pass linear in the input even when
//! many occurrences share one long payload or one distant `;`.

use std::borrow::Cow;

use memchr::memmem;

const DATA_IMAGE: &str = "data:image/";
const BASE64_MARK: &str = ";base64,";
const PLACEHOLDER: &str = "[IMAGE]";

/// Hermes' `convert_base64_images_to_links`: borrowed when nothing changes.
pub fn convert_base64_images_to_links(s: &str) -> Cow<'_, str> {
    if !s.contains(DATA_IMAGE) {
        return Cow::Borrowed(s);
    }
    let mut out = Cow::Borrowed(s);
    for pass in [Pass::Markdown, Pass::Parenthesised, Pass::Bare] {
        if let Some(next) = pass.apply(&out) {
            out = Cow::Owned(next);
        }
    }
    out
}

/// Python's `str.isspace()`, which is also what `\s` and `str.strip()` use.
pub(crate) fn is_python_space(c: char) -> bool {
    matches!(
        c,
        '\t'..='\r'
            | '\u{1c}'..='\u{20}'
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

#[derive(Clone, Copy, Debug)]
enum Pass {
    Markdown,
    Parenthesised,
    Bare,
}

/// One replacement: the byte range it covers and the text it becomes.
struct Replacement<'a> {
    start: usize,
    end: usize,
    alt: Option<&'a str>,
}

// === impl Pass ===

impl Pass {
    /// The pass's output, or `None` when it matched nothing.
    fn apply(self, s: &str) -> Option<String> {
        let mut payloads = Payloads::new(s, !matches!(self, Pass::Bare));
        let finder = memmem::Finder::new(DATA_IMAGE);
        let mut out: Option<String> = None;
        let mut copied = 0; // bytes of `s` already accounted for in `out`
        let mut from = 0; // where the next match may start
        while let Some(found) = finder.find(&s.as_bytes()[from..]) {
            let d = from + found;
            let Some(rep) = self.match_at(s, copied, d, &mut payloads) else {
                from = d + 1;
                continue;
            };
            let buf = out.get_or_insert_with(|| String::with_capacity(s.len()));
            buf.push_str(&s[copied..rep.start]);
            push_placeholder(buf, rep.alt);
            copied = rep.end;
            from = rep.end;
        }
        let mut buf = out?;
        buf.push_str(&s[copied..]);
        Some(buf)
    }

    /// The match whose `data:image/` literal sits at `d`, starting no earlier than `floor`
    /// (the end of the previous match).
    fn match_at<'a>(
        self,
        s: &'a str,
        floor: usize,
        d: usize,
        payloads: &mut Payloads<'_>,
    ) -> Option<Replacement<'a>> {
        match self {
            Pass::Bare => {
                let end = payloads.end(d)?;
                Some(Replacement {
                    start: d,
                    end,
                    alt: None,
                })
            }
            Pass::Parenthesised => {
                let open = opening_paren(s, floor, d)?;
                let end = payloads.closed_end(d)?;
                Some(Replacement {
                    start: open,
                    end,
                    alt: None,
                })
            }
            Pass::Markdown => {
                let open = opening_paren(s, floor, d)?;
                // `](` : the alt text closes right before the parenthesis.
                let close = open
                    .checked_sub(1)
                    .filter(|&j| j >= floor && s.as_bytes()[j] == b']')?;
                let start = markdown_start(s, floor, close)?;
                let end = payloads.closed_end(d)?;
                let alt = s[start + 2..close].trim_matches(is_python_space);
                Some(Replacement {
                    start,
                    end,
                    alt: Some(alt),
                })
            }
        }
    }
}

fn push_placeholder(buf: &mut String, alt: Option<&str>) {
    match alt {
        Some(alt) if !alt.is_empty() => {
            buf.push_str("[IMAGE: ");
            buf.push_str(alt);
            buf.push(']');
        }
        _ => buf.push_str(PLACEHOLDER),
    }
}

/// The `(` that opens `(<ws>data:image/` for the literal at `d`, if it lies at or after `floor`.
fn opening_paren(s: &str, floor: usize, d: usize) -> Option<usize> {
    let before = s[floor..d].trim_end_matches(is_python_space);
    before.ends_with('(').then(|| floor + before.len() - 1)
}

/// The earliest `![` whose alt text (no `]` inside) runs up to the `]` at `close`.
fn markdown_start(s: &str, floor: usize, close: usize) -> Option<usize> {
    // A start before the previous `]` would stop its alt text there instead.
    let lo = s[floor..close].rfind(']').map_or(floor, |r| floor + r + 1);
    memmem::find(&s.as_bytes()[lo..close], b"![").map(|i| lo + i)
}

/// Finds where `data:image/<type>;base64,<payload>` ends, remembering the last `;` looked up and
/// the last payload scanned so repeated occurrences cost nothing extra.
struct Payloads<'a> {
    s: &'a str,
    allow_space: bool,
    /// `(searched from, first ';' at or after it)`.
    semicolon: Option<(usize, Option<usize>)>,
    /// `(position of ';', end of its payload or None)`.
    payload: Option<(usize, Option<usize>)>,
}

// === impl Payloads ===

impl<'a> Payloads<'a> {
    fn new(s: &'a str, allow_space: bool) -> Self {
        Self {
            s,
            allow_space,
            semicolon: None,
            payload: None,
        }
    }

    /// End of the payload for the literal at `d` (exclusive), or `None` when there is no match.
    fn end(&mut self, d: usize) -> Option<usize> {
        let type_start = d + DATA_IMAGE.len();
        let semi = self.next_semicolon(type_start)?;
        // `[^;]+`: the type needs at least one character.
        if semi == type_start {
            return None;
        }
        match self.payload {
            Some((cached, end)) if cached == semi => end,
            _ => {
                let end = self.scan_payload(semi);
                self.payload = Some((semi, end));
                end
            }
        }
    }

    /// End of `<payload>)` (past the parenthesis) for the parenthesised forms.
    fn closed_end(&mut self, d: usize) -> Option<usize> {
        let end = self.end(d)?;
        (self.s.as_bytes().get(end) == Some(&b')')).then_some(end + 1)
    }

    fn next_semicolon(&mut self, from: usize) -> Option<usize> {
        if let Some((searched, found)) = self.semicolon
            && searched <= from
            && found.is_none_or(|p| p >= from)
        {
            return found;
        }
        let found = self.s[from..].find(';').map(|i| from + i);
        self.semicolon = Some((from, found));
        found
    }

    fn scan_payload(&self, semi: usize) -> Option<usize> {
        let rest = self.s[semi..].strip_prefix(BASE64_MARK)?;
        let start = semi + BASE64_MARK.len();
        let len = self.payload_len(rest);
        (len > 0).then_some(start + len)
    }

    /// Bytes of the leading run of payload characters in `rest`.
    fn payload_len(&self, rest: &str) -> usize {
        let bytes = rest.as_bytes();
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            if b.is_ascii() {
                let keep = b.is_ascii_alphanumeric()
                    || matches!(b, b'+' | b'/' | b'=')
                    || (self.allow_space && is_python_space(char::from(b)));
                if !keep {
                    break;
                }
                i += 1;
                continue;
            }
            // Only whitespace outside ASCII can continue a payload.
            match rest[i..].chars().next() {
                Some(c) if self.allow_space && is_python_space(c) => i += c.len_utf8(),
                _ => break,
            }
        }
        i
    }
}

#[cfg(test)]
mod tests;
