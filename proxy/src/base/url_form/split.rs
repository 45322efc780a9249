//! Python `urllib.parse.urlsplit` / `urlunsplit` (CPython 3.11.7) over Rust strings.
//!
//! Hermes splits URLs with Python's splitter, which differs from WHATWG on purpose-irrelevant
//! but security-relevant details (no backslash-as-slash, schemes lowercased, tabs and newlines
//! deleted anywhere, NFKC netloc check). E1 reproduces it so the normalised form and the query
//! names it inspects are the ones Hermes would see.

use std::borrow::Cow;
use std::ops::Range;

/// Why Python's `urlsplit` raises `ValueError`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) enum UrlSplitError {
    /// A netloc holding `[` without `]` or the reverse.
    #[error("failed to split url: unbalanced brackets in the netloc")]
    UnbalancedBrackets,
    /// A bracketed host that is neither a Python-valid IPv6 address nor an IPvFuture literal.
    #[error("failed to split url: invalid bracketed host")]
    InvalidBracketedHost,
    /// A non-ASCII netloc whose NFKC form would introduce `/ ? # @ :`.
    #[error("failed to split url: netloc contains characters invalid under NFKC")]
    NfkcNetloc,
}

/// The five components of a split URL, borrowed from the (tab/newline-cleaned) input.
#[derive(Clone, Debug)]
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) struct SplitUrl<'a> {
    src: Cow<'a, str>,
    scheme: Range<usize>,
    netloc: Range<usize>,
    path: Range<usize>,
    query: Range<usize>,
    fragment: Range<usize>,
}

// === impl SplitUrl ===

impl<'a> SplitUrl<'a> {
    /// The split of `src` whose parts the caller has already found (a URL read by
    /// `target_url`'s quick reading, on which Python's splitter agrees with it).
    pub(crate) fn from_parts(src: &'a str, parts: [Range<usize>; 5]) -> Self {
        let [scheme, netloc, path, query, fragment] = parts;
        Self {
            src: Cow::Borrowed(src),
            scheme,
            netloc,
            path,
            query,
            fragment,
        }
    }
}

impl SplitUrl<'_> {
    /// The scheme as written (ASCII); Python lowercases it, see [`Self::is_http_or_https`].
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn scheme(&self) -> &str {
        &self.src[self.scheme.clone()]
    }

    /// Whether the scheme is `http` or `https`, case-insensitively.
    pub(crate) fn is_http_or_https(&self) -> bool {
        let s = self.scheme();
        s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https")
    }

    /// The netloc (authority), empty when absent.
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn netloc(&self) -> &str {
        &self.src[self.netloc.clone()]
    }

    /// The path, possibly empty.
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn path(&self) -> &str {
        &self.src[self.path.clone()]
    }

    /// The query without `?`, empty when absent.
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn query(&self) -> &str {
        &self.src[self.query.clone()]
    }

    /// The fragment without `#`, empty when absent.
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn fragment(&self) -> &str {
        &self.src[self.fragment.clone()]
    }

    /// Python's `SplitResult.hostname`: the host of the last userinfo-free part, lowercased
    /// (Unicode full lowercase) except for an IPv6 zone after `%`; `None` when empty.
    pub(crate) fn hostname(&self) -> Option<String> {
        let netloc = self.netloc();
        let hostinfo = netloc.rsplit_once('@').map_or(netloc, |(_, h)| h);
        let host = match hostinfo.split_once('[') {
            Some((_, bracketed)) => bracketed.split_once(']').map_or(bracketed, |(h, _)| h),
            None => hostinfo.split_once(':').map_or(hostinfo, |(h, _)| h),
        };
        if host.is_empty() {
            return None;
        }
        Some(match host.split_once('%') {
            Some((name, zone)) => format!("{}%{zone}", py_lower(name)),
            None => py_lower(host).into_owned(),
        })
    }
}

/// Python `str.lower()`: ASCII fast path, full Unicode lowercase otherwise.
fn py_lower(s: &str) -> Cow<'_, str> {
    if s.is_ascii() {
        if s.bytes().any(|b| b.is_ascii_uppercase()) {
            return Cow::Owned(s.to_ascii_lowercase());
        }
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.to_lowercase())
}

/// Python `urlsplit(url)` with the default arguments.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn urlsplit(url: &str) -> Result<SplitUrl<'_>, UrlSplitError> {
    let url = url.trim_start_matches(|c: char| c <= ' ');
    let src: Cow<'_, str> = if url.contains(['\t', '\r', '\n']) {
        Cow::Owned(url.replace(['\t', '\r', '\n'], ""))
    } else {
        Cow::Borrowed(url)
    };
    let s = src.as_ref();
    let scheme_end = scheme_len(s);
    let mut pos = scheme_end.map_or(0, |n| n + 1);
    let scheme = 0..scheme_end.unwrap_or(0);
    let mut netloc = pos..pos;
    if s[pos..].starts_with("//") {
        let end = s[pos + 2..]
            .find(['/', '?', '#'])
            .map_or(s.len(), |i| pos + 2 + i);
        netloc = pos + 2..end;
        check_brackets(&s[netloc.clone()])?;
        pos = end;
    }
    let (rest_end, fragment) = match s[pos..].find('#') {
        Some(i) => (pos + i, pos + i + 1..s.len()),
        None => (s.len(), s.len()..s.len()),
    };
    let (path, query) = match s[pos..rest_end].find('?') {
        Some(i) => (pos..pos + i, pos + i + 1..rest_end),
        None => (pos..rest_end, rest_end..rest_end),
    };
    check_netloc_nfkc(&s[netloc.clone()])?;
    Ok(SplitUrl {
        scheme,
        netloc,
        path,
        query,
        fragment,
        src,
    })
}

/// Python `urlunsplit((scheme, netloc, path, query, fragment))` for an empty, `http` or `https`
/// scheme (the only ones fleetgate reassembles); the scheme must already be lowercase.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn urlunsplit(
    scheme: &str,
    netloc: &str,
    path: &str,
    query: &str,
    fragment: &str,
) -> String {
    let mut out = String::with_capacity(
        scheme.len() + netloc.len() + path.len() + query.len() + fragment.len() + 6,
    );
    if !scheme.is_empty() {
        out.push_str(scheme);
        out.push(':');
    }
    let uses_netloc = matches!(scheme, "" | "http" | "https");
    if !netloc.is_empty() || (!scheme.is_empty() && uses_netloc && !path.starts_with("//")) {
        out.push_str("//");
        out.push_str(netloc);
        if !path.is_empty() && !path.starts_with('/') {
            out.push('/');
        }
    }
    out.push_str(path);
    if !query.is_empty() {
        out.push('?');
        out.push_str(query);
    }
    if !fragment.is_empty() {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

/// The scheme length when the text before the first `:` is a Python scheme.
fn scheme_len(s: &str) -> Option<usize> {
    let i = s.find(':')?;
    let head = &s.as_bytes()[..i];
    let first_ok = head.first().is_some_and(u8::is_ascii_alphabetic);
    let all_ok = head
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    (first_ok && all_ok).then_some(i)
}

fn check_brackets(netloc: &str) -> Result<(), UrlSplitError> {
    match (netloc.find('['), netloc.contains(']')) {
        (None, false) => Ok(()),
        (Some(open), true) => {
            let after = &netloc[open + 1..];
            let host = after.split_once(']').map_or(after, |(h, _)| h);
            check_bracketed_host(host)
        }
        _ => Err(UrlSplitError::UnbalancedBrackets),
    }
}

/// Python `_check_bracketed_host`: IPvFuture (`v<hex>+.<any>`) or `ipaddress.ip_address` giving
/// an IPv6 address (an IPv4 address in brackets is refused).
fn check_bracketed_host(host: &str) -> Result<(), UrlSplitError> {
    let valid = match host.strip_prefix('v') {
        Some(rest) => {
            let hex = rest.bytes().take_while(u8::is_ascii_hexdigit).count();
            hex > 0 && rest.as_bytes().get(hex) == Some(&b'.') && rest.len() > hex + 1
        }
        None => !is_py_ipv4(host) && is_py_ipv6(host),
    };
    if valid {
        Ok(())
    } else {
        Err(UrlSplitError::InvalidBracketedHost)
    }
}

/// Python `IPv4Address(s)` accepts `s`: four decimal octets, no leading zeros, each <= 255.
fn is_py_ipv4(s: &str) -> bool {
    let mut n = 0;
    for octet in s.split('.') {
        n += 1;
        let digits_ok =
            !octet.is_empty() && octet.len() <= 3 && octet.bytes().all(|b| b.is_ascii_digit());
        if !digits_ok || (octet.len() > 1 && octet.starts_with('0')) {
            return false;
        }
        if octet.parse::<u16>().map_or(true, |v| v > 255) {
            return false;
        }
    }
    n == 4
}

/// Python `IPv6Address(s)` accepts `s` (with an optional `%zone`).
fn is_py_ipv6(s: &str) -> bool {
    if s.contains('/') {
        return false;
    }
    let addr = match s.split_once('%') {
        Some((_, zone)) if zone.is_empty() || zone.contains('%') => return false,
        Some((addr, _)) => addr,
        None => s,
    };
    if addr.is_empty() {
        return false;
    }
    let mut parts: Vec<&str> = addr.split(':').collect();
    if parts.len() < 3 {
        return false;
    }
    let mut tail_v4 = false;
    if parts.last().is_some_and(|p| p.contains('.')) {
        if !parts.last().is_some_and(|p| is_py_ipv4(p)) {
            return false;
        }
        parts.pop();
        tail_v4 = true;
    }
    ipv6_hextets_ok(&parts, if tail_v4 { 2 } else { 0 })
}

/// The `::` and hextet rules of Python's `_BaseV6._ip_int_from_string`; `extra` counts the
/// hextets an IPv4 tail adds.
fn ipv6_hextets_ok(parts: &[&str], extra: usize) -> bool {
    let total = parts.len() + extra;
    if total > 9 {
        return false;
    }
    let last = parts.len() + extra - 1;
    let part_empty = |i: usize| i < parts.len() && parts[i].is_empty();
    let inner_empty: Vec<usize> = (1..last).filter(|&i| part_empty(i)).collect();
    let (hi, lo) = match inner_empty.as_slice() {
        [] => {
            if total != 8 || part_empty(0) || part_empty(last) {
                return false;
            }
            (total, 0)
        }
        [skip] => {
            let mut hi = *skip;
            let mut lo = total - skip - 1;
            if part_empty(0) {
                hi -= 1;
                if hi != 0 {
                    return false;
                }
            }
            if part_empty(last) {
                lo -= 1;
                if lo != 0 {
                    return false;
                }
            }
            if hi + lo >= 8 {
                return false;
            }
            (hi, lo)
        }
        _ => return false,
    };
    let hextet_ok =
        |p: &str| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_hexdigit());
    let hi_ok = (0..hi).all(|i| i >= parts.len() || hextet_ok(parts[i]));
    let lo_ok = (total - lo..total).all(|i| i >= parts.len() || hextet_ok(parts[i]));
    hi_ok && lo_ok
}

/// Characters whose NFKC form contains `/ ? # @ :` (Unicode 14, as CPython 3.11 uses). Python's
/// `_checknetloc` refuses a non-ASCII netloc holding any of them.
const NFKC_DELIMITER_CHARS: &[char] = &[
    '\u{2047}', '\u{2048}', '\u{2049}', '\u{2100}', '\u{2101}', '\u{2105}', '\u{2106}', '\u{2a74}',
    '\u{fe13}', '\u{fe16}', '\u{fe55}', '\u{fe56}', '\u{fe5f}', '\u{fe6b}', '\u{ff03}', '\u{ff0f}',
    '\u{ff1a}', '\u{ff1f}', '\u{ff20}',
];

fn check_netloc_nfkc(netloc: &str) -> Result<(), UrlSplitError> {
    if netloc.is_ascii() || !netloc.contains(NFKC_DELIMITER_CHARS) {
        Ok(())
    } else {
        Err(UrlSplitError::NfkcNetloc)
    }
}
