//! The own-dial registry: recognising the gate's own connections when they come back. A
//! connection whose source is the local address of one of the gate's live upstream sockets
//! was sent back into the gate by the capture rules (the gate's uid is not exempt), and is
//! refused as a loop instead of being dialed again and again.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock, PoisonError};

use tokio::net::TcpStream;

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
pub(crate) fn is_own_dial(peer: SocketAddr) -> bool {
    own_dials().live.contains(&peer)
}

/// Record that the gate's own upstream connection from `peer` came back into the gate and
/// was refused as a loop, so the request that dialled it can say so
/// ([`OwnDial::came_back`]) instead of relaying the refusal as an upstream answer.
pub(crate) fn mark_came_back(peer: SocketAddr) {
    let mut own = own_dials();
    if own.live.contains(&peer) {
        own.came_back.insert(peer);
    }
}

/// The local address of one of the gate's upstream sockets, known as the gate's own (see
/// [`is_own_dial`]) while the guard lives. Every upstream socket the gate opens for relayed
/// traffic holds one, the forward proxy's included.
#[derive(Debug)]
pub(crate) struct OwnDial(Option<SocketAddr>);

impl OwnDial {
    /// Register `stream`'s local address. Done before the first byte is written upstream, so
    /// a looped connection (which waits for those bytes before it is checked) always finds
    /// its source in the set.
    pub(crate) fn register(stream: &TcpStream) -> Self {
        let local = stream.local_addr().ok();
        if let Some(local) = local {
            own_dials().live.insert(local);
        }
        Self(local)
    }

    /// Whether this connection came back into the gate and was refused as a loop.
    pub(crate) fn came_back(&self) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_upstream_socket_is_known_as_the_gates_own_only_while_it_lives() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = listener.local_addr().unwrap();
        let stream = TcpStream::connect(target).await.unwrap();
        let dialed = OwnDial::register(&stream);
        let (_accepted, peer) = listener.accept().await.unwrap();
        assert!(
            is_own_dial(peer),
            "the source of the gate's own connection must be known"
        );
        assert!(!dialed.came_back(), "nothing came back yet");
        mark_came_back(peer);
        assert!(dialed.came_back(), "a looped connection must be known");
        drop(dialed);
        assert!(!is_own_dial(peer), "a closed upstream must be forgotten");
        mark_came_back(peer);
        assert!(
            own_dials().came_back.is_empty(),
            "only live upstream sockets can be marked"
        );
    }
}
