//! The HTTP/1 request-head reader: the request line and the one Host header of the first
//! request on the connection (RFC 9112). Strict where a lenient parser would let the gate and
//! the origin disagree about the target: bare CR/LF, folded headers, whitespace before the
//! colon, two Host headers, and a Host that differs from an absolute-form target are refused.
//!
//! The request line is judged as soon as it is complete, before the rest of the head arrives:
//! a method the relay does not forward, or a line that is not `METHOD SP target SP HTTP/1.x`,
//! is refused at once rather than after the sniff's timeout.

use super::sniffed::{
    MAX_SNIFF_BYTES, Progress, Protocol, SniffError, Sniffed, TargetName, parse_authority,
};

/// Longest method token the sniffer accepts before deciding the bytes are not HTTP.
const MAX_METHOD: usize = 20;

fn malformed(detail: &'static str) -> SniffError {
    SniffError::Malformed {
        protocol: Protocol::Http,
        detail,
    }
}

/// Sniff a prefix that starts with an uppercase letter.
pub(super) fn sniff(prefix: &[u8]) -> Result<Progress, SniffError> {
    plausible_method(prefix)?;
    request_line(prefix)?;
    let Some(end) = memchr::memmem::find(prefix, b"\r\n\r\n") else {
        if prefix.len() >= MAX_SNIFF_BYTES {
            return Err(SniffError::TooLarge(Protocol::Http));
        }
        return Ok(Progress::NeedMore);
    };
    let head = &prefix[..end];
    let visible = |b: &u8| matches!(b, b'\r' | b'\n' | b'\t' | 0x20..=0x7e);
    if !head.iter().all(visible) {
        return Err(malformed(
            "a byte outside visible ASCII in the request head",
        ));
    }
    let head = std::str::from_utf8(head).map_err(|_| malformed("the head is not ASCII"))?;
    let mut lines = head.split("\r\n");
    let target = request_target(lines.next().unwrap_or_default())?;
    let host = host_header(lines)?;
    let sniffed = match target {
        Target::Origin(path) => from_host(host, path)?,
        Target::Absolute { authority, path } => from_absolute(authority, host, path)?,
    };
    Ok(Progress::Done(sniffed))
}

/// An uppercase method token followed by a space, or the start of one.
fn plausible_method(prefix: &[u8]) -> Result<(), SniffError> {
    for (i, b) in prefix.iter().take(MAX_METHOD + 1).enumerate() {
        match b {
            b' ' if i > 0 => return Ok(()),
            b if b.is_ascii_uppercase() => {}
            _ => return Err(SniffError::Unrecognised),
        }
    }
    if prefix.len() > MAX_METHOD {
        return Err(SniffError::Unrecognised);
    }
    Ok(())
}

/// Once the first line has ended, judge it alone: its bytes, its three parts, its method and
/// version. `Ok` while it has not ended yet.
fn request_line(prefix: &[u8]) -> Result<(), SniffError> {
    let Some(lf) = memchr::memchr(b'\n', prefix) else {
        return Ok(());
    };
    let line = match prefix[..lf].strip_suffix(b"\r") {
        Some(line) => line,
        None => return Err(malformed("a bare LF in the request line")),
    };
    if !line.iter().all(|b| matches!(b, 0x20..=0x7e)) {
        return Err(malformed(
            "a byte outside visible ASCII in the request line",
        ));
    }
    let line = std::str::from_utf8(line).map_err(|_| malformed("the head is not ASCII"))?;
    request_target(line).map(drop)
}

/// The request target's form.
enum Target<'a> {
    /// `/path?query` or `*` (recorded as `/`).
    Origin(&'a str),
    /// `http://authority/path?query`.
    Absolute { authority: &'a str, path: &'a str },
}

fn request_target(line: &str) -> Result<Target<'_>, SniffError> {
    if line.contains(['\r', '\n']) {
        return Err(malformed("a bare CR or LF in the request line"));
    }
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed(
            "a request line that is not `METHOD target HTTP/1.x`",
        ));
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(malformed("a version other than HTTP/1.0 or HTTP/1.1"));
    }
    if method == "CONNECT" {
        return Err(malformed(
            "CONNECT inside a captured connection or a tunnel (send it to the forward proxy)",
        ));
    }
    if !crate::egress::relay::h1::METHODS.contains(&method) {
        return Err(malformed("a method the relay does not forward"));
    }
    if target == "*" {
        return Ok(Target::Origin("/"));
    }
    if target.starts_with('/') {
        return Ok(Target::Origin(target));
    }
    let rest = match target.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        _ => {
            return Err(malformed(
                "a request target that is neither origin- nor http absolute-form",
            ));
        }
    };
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    let path = if path.is_empty() { "/" } else { path };
    Ok(Target::Absolute { authority, path })
}

/// The value of the single Host header, if any.
fn host_header<'a>(lines: impl Iterator<Item = &'a str>) -> Result<Option<&'a str>, SniffError> {
    let mut host = None;
    for line in lines {
        if line.contains(['\r', '\n']) {
            return Err(malformed("a bare CR or LF in a header line"));
        }
        if line.starts_with([' ', '\t']) {
            return Err(malformed("a folded header line"));
        }
        let (name, value) = line
            .split_once(':')
            .ok_or(malformed("a header line without a colon"))?;
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(malformed("a header name that is not a token"));
        }
        if name.eq_ignore_ascii_case("host") {
            if host.is_some() {
                return Err(malformed("two Host headers"));
            }
            host = Some(value.trim_matches([' ', '\t']));
        }
    }
    Ok(host)
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn from_host(host: Option<&str>, path: &str) -> Result<Sniffed, SniffError> {
    let parsed = match host {
        None | Some("") => None,
        Some(value) => Some(parse_authority(value)?),
    };
    Ok(sniffed(parsed, path))
}

fn from_absolute(authority: &str, host: Option<&str>, path: &str) -> Result<Sniffed, SniffError> {
    let parsed = parse_authority(authority)?;
    if let Some(value) = host.filter(|v| !v.is_empty()) {
        let (_, header_name, _) = parse_authority(value)?;
        if header_name != parsed.1 {
            return Err(malformed(
                "the Host header differs from the absolute-form target",
            ));
        }
    }
    Ok(sniffed(Some(parsed), path))
}

fn sniffed(parsed: Option<(String, TargetName, Option<u16>)>, path: &str) -> Sniffed {
    let (raw_name, name, port) = match parsed {
        Some((raw, name, port)) => (Some(raw), Some(name), port),
        None => (None, None, None),
    };
    Sniffed {
        protocol: Protocol::Http,
        raw_name,
        name,
        port,
        path: Some(path.to_string()),
    }
}
