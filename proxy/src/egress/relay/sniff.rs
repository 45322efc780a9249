//! Reads the name a captured connection asks for from the first bytes the client sent: the
//! SNI of a TLS ClientHello or the host of an HTTP/1 request head.
//!
//! This is the one decision on a connection's first bytes, for transparent capture and for
//! CONNECT tunnels alike: a complete ClientHello, a complete request head whose request line
//! the relay accepts (one of its methods, `METHOD SP target SP HTTP/1.x`, nothing before the
//! method), or an error. Leading whitespace or control bytes, CR/LF before the request line,
//! lowercase methods and a tab after the method are [`SniffError::Unrecognised`]: servers
//! disagree on them, so the gate never guesses what they mean.
//!
//! Everything here is a pure function over a byte prefix: bounded by [`MAX_SNIFF_BYTES`], no
//! panics on any input (fuzz-friendly), and incremental: [`sniff`] answers
//! [`Progress::NeedMore`] until the prefix holds a complete ClientHello or request head.
//! Names go through the same WHATWG host parser as the URL gates (one parser for policy and
//! dialing), so `0x7f.1` is the IP `127.0.0.1` here too and never a name handed to DNS.

mod client_hello;
mod http_head;
mod sniffed;

#[cfg(test)]
pub(crate) use sniffed::canonical_name;
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) use sniffed::{MAX_SNIFF_BYTES, Progress, Protocol, SniffError, Sniffed, TargetName};

#[cfg(test)]
mod tests;

/// Look at the bytes a client sent so far.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn sniff(prefix: &[u8]) -> Result<Progress, SniffError> {
    match protocol_of(prefix) {
        _ if prefix.is_empty() => Ok(Progress::NeedMore),
        Some(Protocol::Tls) => client_hello::sniff(prefix),
        Some(Protocol::Http) => http_head::sniff(prefix),
        None => Err(SniffError::Unrecognised),
    }
}

/// The protocol the first byte announces, when it announces one: the handshake record type
/// for TLS, an uppercase letter (the start of a method) for HTTP.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn protocol_of(prefix: &[u8]) -> Option<Protocol> {
    match prefix.first() {
        Some(&client_hello::RECORD_HANDSHAKE) => Some(Protocol::Tls),
        Some(b) if b.is_ascii_uppercase() => Some(Protocol::Http),
        _ => None,
    }
}
