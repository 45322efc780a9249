//! Rule normalisation: one config or shared-file line becomes zero, one or two host patterns.
//!
//! Hermes' steps (reference §5.2): lowercase and strip; a URL rule is reduced to its host (via
//! Python `urlsplit` semantics, so `user@` and `:port` fall away); a schemeless rule with `:` or
//! `@` is re-read as `//rule` unless it is a bare IPv6 literal; cut at the first `/`, strip
//! trailing dots and one leading `www.`; a rule still holding `@` is dropped. fleetgate adds two
//! steps so a rule can match the canonical host the gate sees: IP literals are rewritten to
//! their canonical text, and Unicode rules are converted to punycode (UTS-46, plus the
//! transitional form when the rule holds `ß`, `ς`, ZWJ or ZWNJ, which IDNA 2003 maps away).

use std::net::{IpAddr, Ipv6Addr};

/// What became of one raw rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Normalised {
    /// Blank or a comment.
    Skip,
    /// One pattern, or two when a Unicode rule has two IDNA forms.
    Patterns(Vec<String>),
    /// Refused, with the reason for the load warning.
    Dropped(&'static str),
}

/// Python's `str.isspace`: Unicode White_Space plus the ASCII separators U+001C..U+001F.
pub(super) fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.strip()`.
pub(super) fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// Python's `str.splitlines()` boundaries (empty pieces are harmless: callers skip blanks).
pub(super) fn py_lines(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c| {
        matches!(
            c,
            '\n' | '\r'
                | '\u{0b}'
                | '\u{0c}'
                | '\u{1c}'
                | '\u{1d}'
                | '\u{1e}'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        )
    })
}

/// Normalise one rule.
pub(super) fn normalise_rule(raw: &str) -> Normalised {
    let value = py_strip(raw).to_lowercase();
    if value.is_empty() || value.starts_with('#') {
        return Normalised::Skip;
    }
    let Some(host) = reduce_to_host(&value) else {
        return Normalised::Dropped("the URL in it does not parse");
    };
    let host = trim_host(host.split('/').next().unwrap_or_default());
    if host.contains('@') {
        return Normalised::Dropped("it still holds '@' after reduction and cannot be matched");
    }
    if host.is_empty() {
        return Normalised::Skip;
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Normalised::Patterns(vec![ip.to_string()]);
    }
    if host.is_ascii() {
        return Normalised::Patterns(vec![host.to_string()]);
    }
    match idna_forms(host) {
        Some(forms) => Normalised::Patterns(forms),
        None => Normalised::Dropped("its Unicode host has no punycode form"),
    }
}

/// Strip, drop trailing dots, then one leading `www.`.
fn trim_host(host: &str) -> &str {
    let host = py_strip(host).trim_end_matches('.');
    host.strip_prefix("www.").unwrap_or(host)
}

/// Steps 2 and 3: reduce a URL-ish rule to its host. `None` when Python's parser would raise.
fn reduce_to_host(value: &str) -> Option<&str> {
    if value.contains("://") {
        let parts = urlsplit(value)?;
        return Some(
            parts
                .hostname()
                .or((!parts.netloc.is_empty()).then_some(parts.netloc))
                .unwrap_or(parts.path),
        );
    }
    if (value.contains(':') || value.contains('@')) && value.parse::<Ipv6Addr>().is_err() {
        let parts = urlsplit_authority(value)?;
        return Some(parts.hostname().unwrap_or(parts.netloc));
    }
    Some(value)
}

/// The pieces of Python's `urlsplit` this module needs.
#[derive(Clone, Copy, Debug)]
struct Split<'a> {
    netloc: &'a str,
    path: &'a str,
}

impl<'a> Split<'a> {
    /// Python's `SplitResult.hostname` (already lowercase here), `None` when empty.
    fn hostname(&self) -> Option<&'a str> {
        let hostinfo = self.netloc.rsplit('@').next().unwrap_or_default();
        let host = match hostinfo.split_once('[') {
            Some((_, bracketed)) => bracketed.split(']').next().unwrap_or_default(),
            None => hostinfo.split(':').next().unwrap_or_default(),
        };
        (!host.is_empty()).then_some(host)
    }
}

/// Python `urlsplit(value)`: optional scheme, then a `//` netloc up to `/`, `?` or `#`.
fn urlsplit(value: &str) -> Option<Split<'_>> {
    let rest = match value.split_once(':') {
        Some((scheme, rest))
            if scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            rest
        }
        _ => value,
    };
    match rest.strip_prefix("//") {
        Some(after) => split_netloc(after),
        None => Some(Split {
            netloc: "",
            path: rest.split(['?', '#']).next().unwrap_or_default(),
        }),
    }
}

/// Python `urlsplit("//" + value)`.
fn urlsplit_authority(value: &str) -> Option<Split<'_>> {
    split_netloc(value)
}

fn split_netloc(after_slashes: &str) -> Option<Split<'_>> {
    let end = after_slashes
        .find(['/', '?', '#'])
        .unwrap_or(after_slashes.len());
    let (netloc, rest) = after_slashes.split_at(end);
    let (open, close) = (netloc.contains('['), netloc.contains(']'));
    if open != close {
        return None; // "Invalid IPv6 URL"
    }
    if open {
        let inside = netloc.split_once('[')?.1.split(']').next()?;
        // Python accepts only an IPv6 literal (or IPvFuture) between brackets.
        if inside.parse::<Ipv6Addr>().is_err() && !inside.starts_with('v') {
            return None;
        }
    }
    Some(Split {
        netloc,
        path: rest.split(['?', '#']).next().unwrap_or_default(),
    })
}

/// The punycode forms of a Unicode rule (`*.` prefix kept). `None` when it cannot be
/// converted: a glob metacharacter inside the Unicode part, or an invalid IDN.
fn idna_forms(host: &str) -> Option<Vec<String>> {
    let (prefix, name) = match host.strip_prefix("*.") {
        Some(rest) => ("*.", rest),
        None => ("", host),
    };
    if name.contains(['*', '?', '[', ']']) {
        return None;
    }
    let mut forms = vec![to_ascii(prefix, name)?];
    // IDNA 2003 (Hermes' request form) maps these deviation characters instead of keeping them.
    let mut transitional = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            'ß' => transitional.push_str("ss"),
            'ς' => transitional.push('σ'),
            '\u{200c}' | '\u{200d}' => {}
            c => transitional.push(c),
        }
    }
    if transitional != name
        && let Some(form) = to_ascii(prefix, &transitional)
        && !forms.contains(&form)
    {
        forms.push(form);
    }
    Some(forms)
}

fn to_ascii(prefix: &str, name: &str) -> Option<String> {
    let ascii = match url::Host::parse(name).ok()? {
        url::Host::Domain(d) => d,
        url::Host::Ipv4(ip) => ip.to_string(),
        url::Host::Ipv6(ip) => ip.to_string(),
    };
    let ascii = trim_host(&ascii);
    (!ascii.is_empty()).then(|| format!("{prefix}{ascii}"))
}
