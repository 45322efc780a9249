//! Host encoding as Hermes does it: Python's `str.encode("idna")` codec (IDNA 2003, RFC 3490).
//!
//! fleetgate runs the `idna` crate's UTS-46 processing per label, after the IDNA 2003 mapping
//! steps that UTS-46 does not share. What matches Python exactly:
//! - ASCII names come back unchanged (labels checked for 1..=63 bytes, the last may be empty);
//! - labels split on `.`, U+3002, U+FF0E, U+FF61; a trailing empty label keeps its dot;
//! - an ASCII label inside a non-ASCII name is kept as typed (no `xn--` validation);
//! - RFC 3454 table B.1 characters map to nothing (soft hyphen, ZWJ/ZWNJ, variation
//!   selectors, ...) and the deviation characters map as IDNA 2003 does (`ß` → `ss`,
//!   `ς` → `σ`), which is UTS-46 *transitional* processing;
//! - a label that maps to ASCII is returned lowercased without further checks; the result is
//!   refused when a label is empty or longer than 63 bytes.
//!
//! Accepted differences (IDNA 2003 in Python vs UTS-46 here; none occurs in ordinary
//! internationalised names, and the differential test lists every one it meets): characters
//! assigned after Unicode 3.2 and the few whose mapping changed; UTS-46 refusing a label that
//! starts with a combining mark (`\u{301}a`) or breaks the RFC 5893 bidi rule where IDNA 2003's
//! older rule accepts it (a Latin label holding Arabic-Indic digits); characters IDNA 2003
//! prohibits that UTS-46 maps, and the reverse; a compatibility character whose NFKC form holds
//! a dot (Python turns `a⒈b` into the label `a1.b`, UTS-46 refuses it).

use std::borrow::Cow;

use idna::AsciiDenyList;
use idna::uts46::{DnsLength, Hyphens, Uts46};

/// Python `host.encode("idna")` as ASCII, or `None` where Python raises `UnicodeError`.
pub fn encode_host(host: &str) -> Option<String> {
    if host.is_ascii() {
        return ascii_name_ok(host).then(|| host.to_string());
    }
    let mut labels: Vec<&str> = host
        .split(['.', '\u{3002}', '\u{ff0e}', '\u{ff61}'])
        .collect();
    let trailing_dot = labels.last().is_some_and(|l| l.is_empty());
    if trailing_dot {
        labels.pop();
    }
    let mut out = String::with_capacity(host.len() * 2);
    for label in labels {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(&label_to_ascii(label)?);
    }
    if trailing_dot {
        out.push('.');
    }
    Some(out)
}

/// The codec's ASCII fast path: every label but the last is 1..=63 bytes, the last < 64.
fn ascii_name_ok(host: &str) -> bool {
    let mut labels = host.split('.').peekable();
    while let Some(label) = labels.next() {
        let last = labels.peek().is_none();
        if label.len() >= 64 || (!last && label.is_empty()) {
            return false;
        }
    }
    true
}

/// RFC 3490 ToASCII of one label (UseSTD3ASCIIRules off, AllowUnassigned on).
fn label_to_ascii(label: &str) -> Option<Cow<'_, str>> {
    let ascii: Cow<'_, str> = if label.is_ascii() {
        Cow::Borrowed(label)
    } else {
        let mapped = map_idna2003_only(label);
        if mapped.is_ascii() {
            // Nameprep case-folds the whole label, ASCII included (an IPv6 zone keeps its
            // case through `hostname`, so uppercase can reach this point).
            Cow::Owned(mapped.to_ascii_lowercase())
        } else {
            let uts46 = Uts46::new();
            let encoded = uts46
                .to_ascii(
                    mapped.as_bytes(),
                    AsciiDenyList::EMPTY,
                    Hyphens::Allow,
                    DnsLength::Ignore,
                )
                .ok()?;
            Cow::Owned(encoded.into_owned())
        }
    };
    (1..64).contains(&ascii.len()).then_some(ascii)
}

/// The IDNA 2003 mappings UTS-46 (non-transitional) does not apply: table B.1 to nothing and
/// the deviation characters `ß` and `ς`.
fn map_idna2003_only(label: &str) -> String {
    let mut out = String::with_capacity(label.len());
    for c in label.chars() {
        match c {
            '\u{ad}'
            | '\u{34f}'
            | '\u{1806}'
            | '\u{180b}'..='\u{180d}'
            | '\u{200b}'..='\u{200d}'
            | '\u{2060}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}' => {}
            'ß' => out.push_str("ss"),
            'ς' => out.push('σ'),
            other => out.push(other),
        }
    }
    out
}
