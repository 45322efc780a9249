//! Dialing the checked targets, and recognising the gate's own connections when they come
//! back: a connection whose source is the local address of one of the gate's live upstream
//! sockets was sent back into the gate by the capture rules (the gate's uid is not exempt),
//! and is refused as a loop instead of being dialed again and again.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::net::TcpStream;

use super::decide::Admission;
use super::refusal::Refusal;
use crate::connect::{OwnListeners, connect_pinned};

/// Local addresses of the gate's live upstream connections, process-wide (the IPv4 and IPv6
/// listeners share it).
fn own_dials() -> &'static Mutex<HashSet<SocketAddr>> {
    static OWN: OnceLock<Mutex<HashSet<SocketAddr>>> = OnceLock::new();
    OWN.get_or_init(Mutex::default)
}

/// Whether `peer` is the local end of one of the gate's own upstream connections.
pub fn is_own_dial(peer: SocketAddr) -> bool {
    own_dials()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(&peer)
}

/// An upstream connection, registered as the gate's own while it lives.
#[derive(Debug)]
pub struct Dialed {
    /// The connection.
    pub stream: TcpStream,
    local: Option<SocketAddr>,
}

impl Drop for Dialed {
    fn drop(&mut self) {
        if let Some(local) = self.local {
            own_dials()
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&local);
        }
    }
}

/// Dial the admission's checked addresses on its port through the shared pinned connector.
/// A target that reaches one of the gate's own listeners (`own`) is a loop, never dialed.
pub async fn dial(
    admission: &Admission,
    own: &OwnListeners,
    connect_timeout: Duration,
) -> Result<Dialed, Refusal> {
    if own.first_loop(&admission.addrs, admission.port).is_some() {
        return Err(Refusal::Loop);
    }
    connect_pinned(&admission.addrs, admission.port, connect_timeout)
        .await
        .map(register)
        .map_err(Refusal::UpstreamConnect)
}

/// Registered before the first byte is written upstream, so a looped connection (which waits
/// for those bytes before it is checked) always finds its source in the set.
fn register(stream: TcpStream) -> Dialed {
    let local = stream.local_addr().ok();
    if let Some(local) = local {
        own_dials()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(local);
    }
    Dialed { stream, local }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_upstream_socket_is_known_as_the_gates_own_only_while_it_lives() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = listener.local_addr().unwrap();
        let admission = Admission {
            host: "origin.test".into(),
            addrs: vec![target.ip()],
            port: target.port(),
        };
        let own = OwnListeners::default();
        let dialed = dial(&admission, &own, Duration::from_secs(5))
            .await
            .unwrap();
        let (_accepted, peer) = listener.accept().await.unwrap();
        assert!(
            is_own_dial(peer),
            "the source of the gate's own connection must be known"
        );
        drop(dialed);
        assert!(!is_own_dial(peer), "a closed upstream must be forgotten");
    }

    #[tokio::test]
    async fn the_gates_own_listeners_are_never_dialed() {
        let own = OwnListeners::new(["127.0.0.1:15182".parse().unwrap()]);
        let admission = Admission {
            host: "loop.test".into(),
            addrs: vec!["127.0.0.1".parse().unwrap()],
            port: 15182,
        };
        let got = dial(&admission, &own, Duration::from_secs(1)).await;
        assert_eq!(
            got.map(|_| ()).map_err(|r| r.code()),
            Err("proxy_loop"),
            "the transparent listener itself must not be dialed"
        );
    }
}
