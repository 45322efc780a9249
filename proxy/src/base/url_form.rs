//! Hermes' URL forms: `normalize_url_for_request` and Python-`unquote` percent-decoding.
//!
//! E1 tests secrets on four forms of every URL (raw, decoded, normalised, decoded
//! normalised); these functions produce them with Hermes' exact semantics. Hermes is written in
//! Python, so its forms follow `urllib.parse` (3.11) rather than the WHATWG URL standard: the
//! splitting rules live in [`split`], the host encoding in [`idna2003`], the escaping in `quote`.

use std::borrow::Cow;

pub(crate) mod idna2003;
mod quote;
pub(crate) mod split;

pub use idna2003::encode_host as idna_encode_host;
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) use split::{SplitUrl, urlsplit, urlunsplit};

#[cfg(test)]
mod tests;

/// Hermes' `normalize_url_for_request`: repair whitespace after the scheme, IDNA-encode the
/// host, percent-encode path, query and fragment keeping existing escapes.
///
/// Steps, in Hermes' order: strip (Python `str.strip`); drop whitespace right after a leading
/// `scheme://`; split with Python `urlsplit` semantics (an unparseable URL or a scheme other than
/// `http`/`https` returns the repaired string unchanged); replace the first occurrence of the
/// lowercased host name in the netloc by its IDNA form ([`idna_encode_host`]; a host that occurs
/// only with other case stays as typed, as in Hermes); percent-encode path, query and fragment;
/// reassemble with `urlunsplit` (an empty `?` or `#` disappears, the scheme is lowercased).
pub fn normalize_url_for_request(raw: &str) -> String {
    let stripped = py_strip(raw);
    // Most URLs agents fetch are already in this form: skip the split, quote and rebuild.
    if is_request_form(stripped) {
        return stripped.to_string();
    }
    normalize_in_full(stripped)
}

/// Every step of [`normalize_url_for_request`] on a stripped URL.
fn normalize_in_full(stripped: &str) -> String {
    if stripped.is_empty() {
        return String::new();
    }
    let repaired = repair_scheme_whitespace(stripped);
    let Ok(parts) = urlsplit(&repaired) else {
        return repaired.into_owned();
    };
    if !parts.is_http_or_https() {
        return repaired.to_string();
    }
    let netloc = encode_netloc_host(parts.netloc(), parts.hostname().as_deref());
    let mut path = String::with_capacity(parts.path().len());
    quote::quote_into(&mut path, parts.path(), &quote::PATH_KEEPS);
    let mut query = String::with_capacity(parts.query().len());
    quote::quote_into(&mut query, parts.query(), &quote::QUERY_KEEPS);
    let mut fragment = String::with_capacity(parts.fragment().len());
    quote::quote_into(&mut fragment, parts.fragment(), &quote::QUERY_KEEPS);
    let scheme = parts.scheme().to_ascii_lowercase();
    urlunsplit(&scheme, &netloc, &path, &query, &fragment)
}

/// Whether `url` is its own normalised form, so that no step of
/// [`normalize_url_for_request`] changes it: a lowercase `http://` or `https://` scheme
/// followed by a host (no whitespace to repair, nothing for `urlunsplit` to re-prefix), only
/// bytes `quote` keeps in every part (so ASCII: the host needs no IDNA), brackets only in the
/// netloc (an IPv6 literal; one Python's split refuses leaves the URL unchanged too), at most
/// one `#`, and no empty query or fragment (`urlunsplit` drops an empty one).
fn is_request_form(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return false;
    };
    let bytes = rest.as_bytes();
    if matches!(bytes.first(), None | Some(b'/' | b'?' | b'#')) {
        return false;
    }
    let (mut query, mut fragment) = (None, None);
    let mut netloc = true;
    for (i, &b) in bytes.iter().enumerate() {
        netloc &= !matches!(b, b'/' | b'?' | b'#');
        match b {
            b'[' | b']' if netloc => {}
            b'#' if fragment.is_some() => return false,
            b'#' => fragment = Some(i),
            b'?' if query.is_none() && fragment.is_none() => query = Some(i),
            b'?' => {}
            _ if quote::PATH_KEEPS[usize::from(b)] => {}
            _ => return false,
        }
    }
    let end_of_query = fragment.unwrap_or(bytes.len());
    let empty_query = query.is_some_and(|q| q + 1 == end_of_query);
    let empty_fragment = fragment.is_some_and(|f| f + 1 == bytes.len());
    !empty_query && !empty_fragment
}

/// Hermes' host step: the lowercased host name's IDNA form replaces its first occurrence in the
/// netloc (Python `str.replace(host, ascii, 1)`), when encoding succeeds and changes it.
fn encode_netloc_host<'a>(netloc: &'a str, hostname: Option<&str>) -> Cow<'a, str> {
    let Some(host) = hostname.filter(|h| !h.is_empty()) else {
        return Cow::Borrowed(netloc);
    };
    match idna_encode_host(host) {
        Some(ascii) if ascii != host && netloc.contains(host) => {
            Cow::Owned(netloc.replacen(host, &ascii, 1))
        }
        _ => Cow::Borrowed(netloc),
    }
}

/// Python `urllib.parse.unquote`: `%XX` decoded as UTF-8 with replacement; `+` kept.
///
/// As in Python, only runs of ASCII characters are decoded (each run on its own), so an escape
/// never combines with a literal non-ASCII character. Borrows when the input has no `%`.
pub fn unquote(s: &str) -> Cow<'_, str> {
    if !s.contains('%') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut run: Vec<u8> = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let ascii_len = rest.bytes().take_while(u8::is_ascii).count();
        let (ascii, tail) = rest.split_at(ascii_len);
        if !ascii.is_empty() {
            run.clear();
            unquote_ascii_run(ascii.as_bytes(), &mut run);
            out.push_str(&String::from_utf8_lossy(&run));
        }
        let other_len = tail
            .char_indices()
            .find(|(_, c)| c.is_ascii())
            .map_or(tail.len(), |(i, _)| i);
        let (other, next) = tail.split_at(other_len);
        out.push_str(other);
        rest = next;
    }
    Cow::Owned(out)
}

/// Python `unquote_plus`: `+` becomes a space, then [`unquote`]. Borrows when neither occurs.
pub(crate) fn unquote_plus(s: &str) -> Cow<'_, str> {
    if !s.contains('+') {
        return unquote(s);
    }
    Cow::Owned(unquote(&s.replace('+', " ")).into_owned())
}

/// Python `str.strip()` with no argument: removes Python whitespace (`str.isspace`) at both ends.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// Python `str.isspace` for one character (Unicode 14 as in CPython 3.11): Rust's White_Space
/// set plus the information separators U+001C..U+001F, which Python counts as whitespace.
pub(crate) fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `unquote_to_bytes` of one ASCII run: `%` plus two hex digits becomes a byte, anything else
/// is copied.
fn unquote_ascii_run(run: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < run.len() {
        if run[i] == b'%'
            && let (Some(hi), Some(lo)) = (hex_value(run.get(i + 1)), hex_value(run.get(i + 2)))
        {
            out.push(hi << 4 | lo);
            i += 3;
            continue;
        }
        out.push(run[i]);
        i += 1;
    }
}

fn hex_value(b: Option<&u8>) -> Option<u8> {
    let b = *b?;
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Remove whitespace directly after a leading `^[A-Za-z][A-Za-z0-9+.-]*://`.
fn repair_scheme_whitespace(s: &str) -> Cow<'_, str> {
    let bytes = s.as_bytes();
    if !bytes.first().is_some_and(u8::is_ascii_alphabetic) {
        return Cow::Borrowed(s);
    }
    let run = bytes[1..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-'))
        .count();
    let sep_end = 1 + run + 3;
    if bytes.get(1 + run..sep_end) != Some(b"://".as_slice()) {
        return Cow::Borrowed(s);
    }
    let (head, after) = s.split_at(sep_end);
    let trimmed = after.trim_start_matches(is_py_space);
    if trimmed.len() == after.len() {
        return Cow::Borrowed(s);
    }
    Cow::Owned([head, trimmed].concat())
}
