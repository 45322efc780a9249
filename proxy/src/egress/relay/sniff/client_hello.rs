//! The TLS ClientHello reader: reassembles the first handshake message from one or more
//! handshake records and returns its `server_name` (RFC 6066 §3), if any.
//!
//! Nothing is decrypted or answered: the bytes are forwarded unchanged once the name passed.

use super::sniffed::{MAX_SNIFF_BYTES, Progress, Protocol, SniffError, Sniffed, canonical_name};

/// TLS record content type `handshake`.
pub(super) const RECORD_HANDSHAKE: u8 = 22;
/// Handshake message type `client_hello`.
const CLIENT_HELLO: u8 = 1;
/// Largest TLS plaintext record (RFC 8446 §5.1).
const MAX_RECORD: usize = 16_384;
/// Extension type `server_name`.
const EXT_SERVER_NAME: u16 = 0;
/// `NameType` `host_name`.
const HOST_NAME: u8 = 0;

fn malformed(detail: &'static str) -> SniffError {
    SniffError::Malformed {
        protocol: Protocol::Tls,
        detail,
    }
}

/// Sniff a prefix that starts with a handshake record.
pub(super) fn sniff(prefix: &[u8]) -> Result<Progress, SniffError> {
    let Some(message) = handshake_message(prefix)? else {
        return Ok(Progress::NeedMore);
    };
    let raw = server_name(&message)?;
    let name = raw
        .as_deref()
        .map(|n| canonical_name(n, Protocol::Tls))
        .transpose()?;
    Ok(Progress::Done(Sniffed {
        protocol: Protocol::Tls,
        raw_name: raw,
        name,
        port: None,
        path: None,
    }))
}

/// The first handshake message (header included), reassembled across records; `None` until
/// it is complete.
fn handshake_message(prefix: &[u8]) -> Result<Option<Vec<u8>>, SniffError> {
    let mut message = Vec::new();
    let mut pos = 0;
    loop {
        let Some(header) = prefix.get(pos..pos + 5) else {
            return need_more(pos + 5);
        };
        if header[0] != RECORD_HANDSHAKE {
            return Err(malformed("a non-handshake record inside the ClientHello"));
        }
        if header[1] != 3 {
            return Err(malformed("a record version that is not 3.x"));
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if len == 0 || len > MAX_RECORD {
            return Err(malformed("a handshake record length of 0 or over 16384"));
        }
        let end = pos + 5 + len;
        let Some(fragment) = prefix.get(pos + 5..end) else {
            let partial = prefix.get(pos + 5..).unwrap_or_default();
            check_message_header(&message, partial)?;
            return need_more(end);
        };
        message.extend_from_slice(fragment);
        pos = end;
        if let Some(total) = check_message_header(&message, &[])?
            && message.len() >= total
        {
            message.truncate(total);
            return Ok(Some(message));
        }
    }
}

/// Once the 4-byte handshake header is known (from the reassembled bytes plus a partial
/// record), check its type and refuse an announced length over the cap before it arrives.
/// Returns the message's total length.
fn check_message_header(message: &[u8], partial: &[u8]) -> Result<Option<usize>, SniffError> {
    let mut header = [0u8; 4];
    let mut known = 0;
    for (slot, b) in header.iter_mut().zip(message.iter().chain(partial)) {
        *slot = *b;
        known += 1;
    }
    if known > 0 && header[0] != CLIENT_HELLO {
        return Err(malformed(
            "the first handshake message is not a ClientHello",
        ));
    }
    if known < 4 {
        return Ok(None);
    }
    let total = 4 + u32::from_be_bytes([0, header[1], header[2], header[3]]) as usize;
    if total > MAX_SNIFF_BYTES {
        return Err(SniffError::TooLarge(Protocol::Tls));
    }
    Ok(Some(total))
}

fn need_more(wanted: usize) -> Result<Option<Vec<u8>>, SniffError> {
    if wanted > MAX_SNIFF_BYTES {
        Err(SniffError::TooLarge(Protocol::Tls))
    } else {
        Ok(None)
    }
}

/// The `host_name` of the `server_name` extension of a complete ClientHello message.
fn server_name(message: &[u8]) -> Result<Option<String>, SniffError> {
    let truncated = || malformed("the ClientHello ends inside a field");
    let mut r = Reader(message.get(4..).ok_or_else(truncated)?);
    r.take(2 + 32).ok_or_else(truncated)?; // legacy_version, random
    let session_id = r.vec8().ok_or_else(truncated)?;
    if session_id.len() > 32 {
        return Err(malformed("a session id longer than 32 bytes"));
    }
    let suites = r.vec16().ok_or_else(truncated)?;
    if suites.is_empty() || suites.len() % 2 != 0 {
        return Err(malformed("an empty or odd-length cipher suite list"));
    }
    if r.vec8().ok_or_else(truncated)?.is_empty() {
        return Err(malformed("an empty compression method list"));
    }
    if r.0.is_empty() {
        return Ok(None); // no extensions at all
    }
    let mut extensions = Reader(r.vec16().ok_or_else(truncated)?);
    if !r.0.is_empty() {
        return Err(malformed("bytes after the extensions"));
    }
    let mut found = None;
    while !extensions.0.is_empty() {
        let kind = extensions.u16().ok_or_else(truncated)?;
        let data = extensions.vec16().ok_or_else(truncated)?;
        if kind == EXT_SERVER_NAME {
            if found.is_some() {
                return Err(malformed("two server_name extensions"));
            }
            found = Some(host_name(data)?);
        }
    }
    Ok(found)
}

/// The single `host_name` entry of a `server_name` extension body.
fn host_name(data: &[u8]) -> Result<String, SniffError> {
    let truncated = || malformed("the server_name extension ends inside a field");
    let mut ext = Reader(data);
    let mut list = Reader(ext.vec16().ok_or_else(truncated)?);
    if !ext.0.is_empty() || list.0.is_empty() {
        return Err(malformed(
            "a server_name list that is empty or has trailing bytes",
        ));
    }
    let mut host = None;
    while !list.0.is_empty() {
        let kind = list.u8().ok_or_else(truncated)?;
        let name = list.vec16().ok_or_else(truncated)?;
        if kind != HOST_NAME {
            continue;
        }
        if host.is_some() {
            return Err(malformed("two host_name entries"));
        }
        let text = std::str::from_utf8(name)
            .ok()
            .filter(|t| t.is_ascii())
            .ok_or(malformed("a host_name that is not ASCII"))?;
        host = Some(text.to_string());
    }
    host.ok_or(malformed("a server_name list without a host_name"))
}

/// A bounds-checked cursor: every read returns `None` instead of panicking.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    fn vec8(&mut self) -> Option<&'a [u8]> {
        let len = self.u8()?;
        self.take(usize::from(len))
    }

    fn vec16(&mut self) -> Option<&'a [u8]> {
        let len = self.u16()?;
        self.take(usize::from(len))
    }
}
