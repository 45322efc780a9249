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
/// listeners share it), and those of them that came back into the gate.
#[derive(Debug, Default)]
struct OwnDials {
    live: HashSet<SocketAddr>,
    came_back: HashSet<SocketAddr>,
}

fn own_dials() -> std::sync::MutexGuard<'static, OwnDials> {
    static OWN: OnceLock<Mutex<OwnDials>> = OnceLock::new();
    OWN.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Whether `peer` is the local end of one of the gate's own upstream connections.
pub fn is_own_dial(peer: SocketAddr) -> bool {
    own_dials().live.contains(&peer)
}

/// Record that the gate's own upstream connection from `peer` came back into the gate and
/// was refused as a loop, so the request that dialled it can say so
/// ([`OwnDial::came_back`]) instead of relaying the refusal as an upstream answer.
pub fn mark_came_back(peer: SocketAddr) {
    let mut own = own_dials();
    if own.live.contains(&peer) {
        own.came_back.insert(peer);
    }
}

/// An upstream connection, registered as the gate's own while it lives.
#[derive(Debug)]
pub struct Dialed {
    /// The connection.
    pub stream: TcpStream,
    _own: OwnDial,
}

/// The local address of one of the gate's upstream sockets, known as the gate's own (see
/// [`is_own_dial`]) while the guard lives. Every upstream socket the gate opens for relayed
/// traffic holds one, the forward proxy's included.
#[derive(Debug)]
pub struct OwnDial(Option<SocketAddr>);

impl OwnDial {
    /// Register `stream`'s local address. Done before the first byte is written upstream, so
    /// a looped connection (which waits for those bytes before it is checked) always finds
    /// its source in the set.
    pub fn register(stream: &TcpStream) -> Self {
        let local = stream.local_addr().ok();
        if let Some(local) = local {
            own_dials().live.insert(local);
        }
        Self(local)
    }

    /// Whether this connection came back into the gate and was refused as a loop.
    pub fn came_back(&self) -> bool {
        self.0
            .is_some_and(|local| own_dials().came_back.contains(&local))
    }
}

impl Drop for OwnDial {
    fn drop(&mut self) {
        if let Some(local) = self.0 {
            let mut own = own_dials();
            own.live.remove(&local);
            own.came_back.remove(&local);
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

fn register(stream: TcpStream) -> Dialed {
    let own = OwnDial::register(&stream);
    Dialed { stream, _own: own }
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
        assert!(!dialed._own.came_back(), "nothing came back yet");
        mark_came_back(peer);
        assert!(dialed._own.came_back(), "a looped connection must be known");
        drop(dialed);
        assert!(!is_own_dial(peer), "a closed upstream must be forgotten");
        mark_came_back(peer);
        assert!(
            own_dials().came_back.is_empty(),
            "only live upstream sockets can be marked"
        );
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
