//! What the first bytes of a connection said ([`Sniffed`], [`Progress`], [`SniffError`]) and
//! the names in them, canonicalised as the URL gates do: the vocabulary the ClientHello and
//! request-head readers share.

use std::net::IpAddr;

/// Largest prefix the listener reads while looking for the name; a longer ClientHello or
/// request head is refused ([`SniffError::TooLarge`]).
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) const MAX_SNIFF_BYTES: usize = 32 * 1024;

/// The protocol the first bytes speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) enum Protocol {
    /// A TLS handshake (record type 22, ClientHello).
    Tls,
    /// An HTTP/1.0 or HTTP/1.1 request.
    Http,
}

/// A canonical target: what the gates decide about.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) enum TargetName {
    /// A DNS name: lowercase ASCII (IDNA A-labels), no trailing dot.
    Domain(String),
    /// An IP literal (in SNI, in Host, or a numeric form such as `0x7f.1`).
    Ip(IpAddr),
}

/// The fuzz target reads the protocol (the fields are the crate's own).
#[cfg(fuzzing)]
impl Sniffed {
    /// TLS or HTTP.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }
}

/// What the first bytes of a connection said.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) struct Sniffed {
    /// TLS or HTTP.
    pub(crate) protocol: Protocol,
    /// The name as the client sent it (case kept): the secret check sees the original case.
    pub(crate) raw_name: Option<String>,
    /// The canonical name; `None` when the client sent none (no SNI, no or empty Host).
    pub(crate) name: Option<TargetName>,
    /// HTTP only: the port in the Host header or absolute-form target. Informational: the
    /// gate dials the original destination's port.
    pub(crate) port: Option<u16>,
    /// HTTP only: the request target's path and query (`/` for `*`).
    pub(crate) path: Option<String>,
}

/// How far [`sniff`](super::sniff) got.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) enum Progress {
    /// The prefix is a plausible start; read more bytes.
    NeedMore,
    /// The ClientHello or request head is complete.
    Done(Sniffed),
}

/// Why the first bytes cannot be gated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) enum SniffError {
    /// Neither a TLS handshake record nor an HTTP/1 request line.
    #[error("failed to recognise a TLS ClientHello or an HTTP/1 request in the first bytes")]
    Unrecognised,
    /// The protocol is recognised but the bytes break its grammar.
    #[error("failed to parse the {protocol}: {detail}")]
    Malformed {
        /// TLS or HTTP.
        protocol: Protocol,
        /// What is wrong, for logs.
        detail: &'static str,
    },
    /// The ClientHello or request head does not end within [`MAX_SNIFF_BYTES`].
    #[error("failed to find the end of the {0} within {MAX_SNIFF_BYTES} bytes")]
    TooLarge(Protocol),
}

impl std::fmt::Display for TargetName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Domain(name) => f.write_str(name),
            Self::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Tls => "TLS ClientHello",
            Self::Http => "HTTP/1 request head",
        })
    }
}

/// Canonicalise a host name exactly as the URL gates do (WHATWG host parser: lowercase, IDNA,
/// IPv4 number forms), after refusing every byte a host name never needs.
pub(crate) fn canonical_name(raw: &str, protocol: Protocol) -> Result<TargetName, SniffError> {
    let malformed = |detail| SniffError::Malformed { protocol, detail };
    if raw.is_empty() || raw.len() > 253 {
        return Err(malformed("the host name is empty or longer than 253 bytes"));
    }
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_');
    if !raw.bytes().all(allowed) {
        return Err(malformed("the host name has a byte outside [A-Za-z0-9._-]"));
    }
    let host = crate::base::target_url::canonical_host_of(&format!("http://{raw}/"))
        .ok_or(malformed("the host name is not a valid host"))?;
    Ok(match host.parse::<IpAddr>() {
        Ok(ip) => TargetName::Ip(ip),
        Err(_) => TargetName::Domain(host),
    })
}

/// Split an HTTP authority (`host`, `host:port`, `[v6]`, `[v6]:port`) and canonicalise the host.
pub(crate) fn parse_authority(
    value: &str,
) -> Result<(String, TargetName, Option<u16>), SniffError> {
    let malformed = |detail| SniffError::Malformed {
        protocol: Protocol::Http,
        detail,
    };
    let (host, port) = if let Some(rest) = value.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or(malformed("an IPv6 host without its closing bracket"))?;
        let ip: std::net::Ipv6Addr = inside
            .parse()
            .map_err(|_| malformed("a bracketed host that is not an IPv6 address"))?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or(malformed("bytes after ']'"))?),
        };
        return Ok((
            inside.to_string(),
            TargetName::Ip(IpAddr::V6(ip)),
            port.map(parse_port).transpose()?,
        ));
    } else {
        match value.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (value, None),
        }
    };
    let name = canonical_name(host, Protocol::Http)?;
    Ok((host.to_string(), name, port.map(parse_port).transpose()?))
}

fn parse_port(digits: &str) -> Result<u16, SniffError> {
    let bad = SniffError::Malformed {
        protocol: Protocol::Http,
        detail: "the port is not a number between 1 and 65535",
    };
    if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad);
    }
    match digits.parse::<u16>() {
        Ok(0) | Err(_) => Err(bad),
        Ok(p) => Ok(p),
    }
}
