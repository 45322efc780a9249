//! The quick reading: a URL that is already its own WHATWG serialisation, read in one pass.
//!
//! [`read`] accepts only URLs the WHATWG parser leaves byte for byte as they are, and answers
//! what the parser would: anything it is not sure of (uppercase, IDNA labels, numbers the
//! IPv4 parser would rewrite, a default or zero-led port, dot segments, bytes the parser
//! percent-encodes, userinfo, an empty path) returns `None`, and the caller parses in full.
//!
//! What it accepts:
//! - `http://` or `https://`;
//! - a host of non-empty labels of `a-z 0-9 -`, none starting `xn--`, whose last label is not
//!   a number (then only a dotted quad without leading zeros is taken, as an IPv4 literal),
//!   or a bracketed IPv6 address written exactly as WHATWG writes it;
//! - an optional port of 1–5 digits, not zero-led, not the scheme's default, at most 65535;
//! - a path starting `/`, of RFC 3986 path characters and `%`, with no `.`/`..` segment in
//!   any spelling;
//! - an optional query of the same characters and `?` but not `'` (a special URL's query
//!   encodes it), and an optional fragment of those, `'`, `?` and `#`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::shape::{HostKind, Shape};

/// A URL read without the parser: its shape and canonical host.
pub(super) struct Read {
    pub(super) shape: Shape,
    pub(super) host: String,
}

/// Bytes the path keeps as they are: RFC 3986 unreserved and sub-delimiters, `:`, `@`,
/// `/` and `%` (the parser leaves escapes, valid or not, as written).
const PATH: [bool; 256] = table(b"-._~!$&'()*+,;=:@/%");
/// Bytes the query keeps: the path's, `?`, and not `'`.
const QUERY: [bool; 256] = table(b"-._~!$&()*+,;=:@/%?");
/// Bytes the fragment keeps: the query's, `'` and `#`.
const FRAGMENT: [bool; 256] = table(b"-._~!$&'()*+,;=:@/%?#");

const fn table(extra: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let mut i = 0;
    while i < extra.len() {
        t[extra[i] as usize] = true;
        i += 1;
    }
    t
}

/// The URL's shape and canonical host when `s` is its own WHATWG serialisation in the
/// accepted form (see the module), else `None`.
pub(super) fn read(s: &str) -> Option<Read> {
    let b = s.as_bytes();
    let (scheme_end, default_port) = if b.starts_with(b"https://") {
        (5, 443)
    } else if b.starts_with(b"http://") {
        (4, 80)
    } else {
        return None;
    };
    let host_start = scheme_end + 3;
    let (host_end, kind, host) = if b.get(host_start) == Some(&b'[') {
        let close = host_start + 1 + memchr::memchr(b']', &b[host_start + 1..])?;
        let text = &s[host_start + 1..close];
        let ip: Ipv6Addr = text.parse().ok()?;
        if !is_whatwg_ipv6(ip, text.as_bytes()) {
            return None;
        }
        (close + 1, HostKind::Ip(IpAddr::V6(ip)), ip.to_string())
    } else {
        let len = b[host_start..]
            .iter()
            .position(|c| !matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-'))
            .unwrap_or(b.len() - host_start);
        let text = &s[host_start..host_start + len];
        (
            host_start + len,
            host_kind(text.as_bytes())?,
            text.to_string(),
        )
    };
    let (port, authority_end) = match b.get(host_end) {
        Some(b':') => {
            let digits = b[host_end + 1..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
            let port = port_number(&b[host_end + 1..host_end + 1 + digits])?;
            if port == default_port {
                return None;
            }
            (port, host_end + 1 + digits)
        }
        _ => (default_port, host_end),
    };
    if b.get(authority_end) != Some(&b'/') {
        return None;
    }
    let path_end = authority_end
        + b[authority_end..]
            .iter()
            .position(|&c| c == b'?' || c == b'#')
            .unwrap_or(b.len() - authority_end);
    let path = &b[authority_end..path_end];
    if !path.iter().all(|&c| PATH[usize::from(c)]) || has_dot_segment(path) {
        return None;
    }
    let query_end = if b.get(path_end) == Some(&b'?') {
        path_end
            + b[path_end..]
                .iter()
                .position(|&c| c == b'#')
                .unwrap_or(b.len() - path_end)
    } else {
        path_end
    };
    if !b[path_end.min(b.len())..query_end]
        .iter()
        .skip(1)
        .all(|&c| QUERY[usize::from(c)])
    {
        return None;
    }
    if !b[query_end..]
        .iter()
        .skip(1)
        .all(|&c| FRAGMENT[usize::from(c)])
    {
        return None;
    }
    Some(Read {
        shape: Shape {
            own_form: true,
            scheme_end,
            host: Some(kind),
            port: Some(port),
            userinfo: false,
            authority: host_start..authority_end,
            path_start: authority_end,
            path_end,
            query_end,
        },
        host,
    })
}

/// The kind of a host of `a-z 0-9 . -`: a domain whose labels are non-empty and not IDNA,
/// or a dotted quad when the last label is a number; `None` for anything else.
fn host_kind(host: &[u8]) -> Option<HostKind> {
    let mut octets = [0u8; 4];
    let mut labels = 0;
    // Every label so far a decimal octet without leading zeros, and at most four of them.
    let mut quad = true;
    let mut last: &[u8] = &[];
    for label in host.split(|&c| c == b'.') {
        if label.is_empty() || label.starts_with(b"xn--") {
            return None;
        }
        quad &= labels < 4
            && label.len() <= 3
            && (label.len() == 1 || label[0] != b'0')
            && label.iter().all(u8::is_ascii_digit);
        if quad {
            let n = label.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
            match u8::try_from(n) {
                Ok(octet) => octets[labels] = octet,
                Err(_) => quad = false,
            }
        }
        labels += 1;
        last = label;
    }
    // WHATWG's "ends in a number": all digits, or a `0x` number; the IPv4 parser takes over.
    if last.starts_with(b"0x") {
        return None;
    }
    if !last.iter().all(u8::is_ascii_digit) {
        return Some(HostKind::Domain);
    }
    (quad && labels == 4).then(|| HostKind::Ip(IpAddr::V4(Ipv4Addr::from(octets))))
}

/// A port of 1–5 digits, not zero-led (the parser drops leading zeros), at most 65535.
fn port_number(digits: &[u8]) -> Option<u16> {
    if digits.is_empty() || digits.len() > 5 || digits[0] == b'0' {
        return None;
    }
    let n = digits
        .iter()
        .fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
    u16::try_from(n).ok()
}

/// Whether a path holds a `.` or `..` segment in any spelling (`%2e`, `.%2E`, …), which the
/// parser removes.
fn has_dot_segment(path: &[u8]) -> bool {
    path.split(|&c| c == b'/').any(|seg| {
        if seg.is_empty() || seg.len() > 6 {
            return false;
        }
        let mut dots = 0;
        let mut i = 0;
        while i < seg.len() {
            if seg[i] == b'.' {
                i += 1;
            } else if seg[i..].len() >= 3
                && seg[i] == b'%'
                && seg[i + 1] == b'2'
                && matches!(seg[i + 2], b'e' | b'E')
            {
                i += 3;
            } else {
                return false;
            }
            dots += 1;
        }
        dots <= 2
    })
}

/// Whether `text` is `ip` as WHATWG serialises an IPv6 address: lowercase hex pieces
/// without leading zeros, the first longest run of two or more zero pieces as `::`.
fn is_whatwg_ipv6(ip: Ipv6Addr, text: &[u8]) -> bool {
    let pieces = ip.segments();
    let (mut best, mut best_len) = (usize::MAX, 1);
    let mut i = 0;
    while i < 8 {
        let run = pieces[i..].iter().take_while(|&&p| p == 0).count();
        if run > best_len {
            (best, best_len) = (i, run);
        }
        i += run.max(1);
    }
    let mut out = [0u8; 41];
    let mut len = 0;
    let mut push = |c: u8| {
        out[len] = c;
        len += 1;
    };
    let mut i = 0;
    while i < 8 {
        if i == best {
            if i == 0 {
                push(b':');
            }
            push(b':');
            i += best_len;
            continue;
        }
        let p = pieces[i];
        let digits = if p == 0 {
            1
        } else {
            (19 - p.leading_zeros() as usize) / 4
        };
        for d in (0..digits).rev() {
            push(b"0123456789abcdef"[usize::from((p >> (4 * d)) & 0xf)]);
        }
        if i < 7 {
            push(b':');
        }
        i += 1;
    }
    &out[..len] == text
}
