//! The pinned connector every egress path shares: dial the addresses a gate checked, in order,
//! each with the connect timeout — never a name, so there is no second DNS answer to race — and
//! recognise the gate's own listeners so a request can never loop back into the gate.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::timeout;

/// Addresses dialled per connect, like Hermes' `_MAX_SSRF_CONNECT_IPS`; all were checked.
pub(crate) const MAX_DIAL_ADDRS: usize = 8;

/// Why no checked address accepted a connection.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ConnectError {
    /// The gate handed over no address (a bug upstream of the connector).
    #[error("failed to connect: no checked address to dial")]
    NoAddress,
    /// The last address tried did not answer within the connect timeout.
    #[error("failed to connect to {addr}: timed out after {} ms", .after.as_millis())]
    TimedOut {
        /// The address that timed out.
        addr: SocketAddr,
        /// The connect timeout.
        after: Duration,
    },
    /// The last address tried refused or failed the connection.
    #[error("failed to connect to {addr}: {detail}")]
    Failed {
        /// The address that failed.
        addr: SocketAddr,
        /// The OS error.
        detail: String,
    },
}

// === impl ConnectError ===

impl ConnectError {
    /// The stable code: `upstream_timeout` for a timeout, `upstream_connect_failed` otherwise
    /// (the same codes the `direct` backend reports).
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::TimedOut { .. } => "upstream_timeout",
            _ => "upstream_connect_failed",
        }
    }

    /// `ip: what happened`, the short form used inside other error messages.
    pub(crate) fn detail(&self) -> String {
        match self {
            Self::NoAddress => "no checked address".to_string(),
            Self::TimedOut { addr, .. } => format!("{}: connect timed out", addr.ip()),
            Self::Failed { addr, detail } => format!("{}: {detail}", addr.ip()),
        }
    }
}

/// Dial `port` on the checked `addrs` in order (at most [`MAX_DIAL_ADDRS`]), each attempt
/// bounded by `connect_timeout`; the first that accepts wins. `TCP_NODELAY` is set.
pub(crate) async fn connect_pinned(
    addrs: &[IpAddr],
    port: u16,
    connect_timeout: Duration,
) -> Result<TcpStream, ConnectError> {
    let mut last = ConnectError::NoAddress;
    for ip in addrs.iter().take(MAX_DIAL_ADDRS) {
        let addr = SocketAddr::new(*ip, port);
        match timeout(connect_timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Ok(Err(e)) => {
                last = ConnectError::Failed {
                    addr,
                    detail: e.to_string(),
                }
            }
            Err(_) => {
                last = ConnectError::TimedOut {
                    addr,
                    after: connect_timeout,
                }
            }
        }
    }
    Err(last)
}

/// The gate's own listening sockets: a target that lands on one of them is a proxy loop.
///
/// A listener bound to a specific address matches that address (and `0.0.0.0`/`::`, which the
/// kernel routes to local sockets); a listener bound to `0.0.0.0` or `::` matches its port on
/// every local address (loopback, or any address a socket can bind, i.e. one of this host's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnListeners {
    addrs: Vec<SocketAddr>,
}

// === impl OwnListeners ===

impl OwnListeners {
    /// The listeners, as bound.
    pub fn new(addrs: impl IntoIterator<Item = SocketAddr>) -> Self {
        Self {
            addrs: addrs.into_iter().collect(),
        }
    }

    /// The listener `target` would reach, if any.
    pub(crate) fn reached_by(&self, target: SocketAddr) -> Option<SocketAddr> {
        let ip = target.ip().to_canonical();
        self.addrs.iter().copied().find(|listener| {
            if listener.port() != target.port() {
                return false;
            }
            let bound = listener.ip().to_canonical();
            if bound.is_unspecified() {
                is_local(ip)
            } else {
                bound == ip || ip.is_unspecified()
            }
        })
    }

    /// The first of `addrs` on `port` that reaches one of the gate's own listeners.
    pub(crate) fn first_loop(&self, addrs: &[IpAddr], port: u16) -> Option<SocketAddr> {
        addrs
            .iter()
            .map(|ip| SocketAddr::new(*ip, port))
            .find(|target| self.reached_by(*target).is_some())
    }
}

/// Whether `ip` is an address of this host: loopback, unspecified, or one a socket can bind
/// (the kernel refuses to bind an address that is not assigned to a local interface).
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified() || std::net::UdpSocket::bind((ip, 0)).is_ok()
}

#[cfg(test)]
mod tests;
