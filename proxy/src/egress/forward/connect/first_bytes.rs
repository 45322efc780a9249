//! What a new tunnel carries, judged once on its first bytes by the sniffer transparent
//! capture uses ([`sniff::sniff`]): a TLS ClientHello (gated next on its server name), an
//! HTTP/1 request head (handed to the relay), or, only on a port the policy lists in
//! `egress.rawTunnelPorts`, anything else. The read waits for slow clients up to a deadline
//! and [`MAX_SNIFF_BYTES`]; it runs once per tunnel, so the byte relay after it does no
//! per-byte work.

use bytes::BufMut;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::super::proxy::ClientConn;
use crate::egress::capture_refusal::CaptureRefusal;
use crate::egress::relay::sniff::{
    self, MAX_SNIFF_BYTES, Progress, Protocol, SniffError, Sniffed, protocol_of,
};

/// Most bytes one read of a tunnel's first message takes.
const READ_BYTES: usize = 4096;

/// What a tunnel carries.
#[derive(Debug)]
pub(super) enum Carried {
    /// A complete ClientHello; its bytes stay in the connection's buffer, replayed upstream.
    Tls(Sniffed),
    /// A complete HTTP/1 request head; it stays in the buffer for the relay.
    Http,
    /// Bytes that are neither, or a server that spoke first, on a raw-protocol port.
    Raw,
    /// The client closed the tunnel before sending a byte.
    Nothing,
}

/// A refused first message: the protocol its first byte announced (which decides whether the
/// client is answered in-band) and why.
pub(super) type Refused = (Option<Protocol>, CaptureRefusal);

/// Read `conn`'s first bytes until the sniffer decides, the deadline passes, or the client
/// leaves. `raw_allowed` is whether the tunnel's port carries raw protocols: then bytes that
/// are not TLS go through as bytes, and so does a server that speaks first (`upstream`
/// readable before the client sent anything). A ClientHello is judged on every port.
pub(super) async fn judge(
    conn: &mut ClientConn,
    upstream: &TcpStream,
    deadline: Instant,
    raw_allowed: bool,
) -> Result<Carried, Refused> {
    loop {
        match sniff::sniff(&conn.buf) {
            Ok(Progress::Done(s)) if s.protocol == Protocol::Tls => return Ok(Carried::Tls(s)),
            Ok(Progress::Done(_)) => return Ok(Carried::Http),
            Ok(Progress::NeedMore) => {}
            Err(e) if raw_allowed && !is_tls(&e) => return Ok(Carried::Raw),
            Err(e) => return Err((protocol_of(&conn.buf), CaptureRefusal::Sniff(e))),
        }
        // The sniffer answers `TooLarge` before a prefix reaches the cap; this only bounds
        // the read.
        let room = MAX_SNIFF_BYTES
            .saturating_sub(conn.buf.len())
            .min(READ_BYTES);
        let protocol = protocol_of(&conn.buf);
        if room == 0 {
            let too_large = SniffError::TooLarge(protocol.unwrap_or(Protocol::Http));
            return Err((protocol, CaptureRefusal::Sniff(too_large)));
        }
        // Readiness first, the buffer after: a tunnel whose client has not spoken yet holds
        // no read buffer (a thousand idle tunnels would hold a thousand).
        let readable = tokio::time::timeout_at(deadline, conn.stream.readable());
        tokio::select! {
            ready = readable => match ready {
                Ok(Ok(())) => {}
                Ok(Err(_)) if conn.buf.is_empty() => return Ok(Carried::Nothing),
                // The deadline, or a client that left inside its first message.
                _ => return Err((protocol, CaptureRefusal::SniffTimeout)),
            },
            ready = upstream.readable(), if raw_allowed && conn.buf.is_empty() => {
                // TLS and HTTP servers never speak first.
                return match ready {
                    Ok(()) => Ok(Carried::Raw),
                    Err(_) => Ok(Carried::Nothing),
                };
            }
        }
        conn.buf.reserve(room);
        match conn.stream.try_read_buf(&mut (&mut conn.buf).limit(room)) {
            Ok(n) if n > 0 => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            _ if conn.buf.is_empty() => return Ok(Carried::Nothing),
            _ => return Err((protocol, CaptureRefusal::SniffTimeout)),
        }
    }
}

/// A ClientHello the sniffer could not read: refused on every port, raw ones included, so a
/// name the gate cannot see never reaches a server that routes on it.
fn is_tls(e: &SniffError) -> bool {
    matches!(
        e,
        SniffError::Malformed {
            protocol: Protocol::Tls,
            ..
        } | SniffError::TooLarge(Protocol::Tls)
    )
}
