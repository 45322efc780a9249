//! Dialing the checked targets of a captured connection through the shared pinned connector,
//! each upstream socket registered as the gate's own ([`OwnDial`]) while it lives.

use std::time::Duration;

use tokio::net::TcpStream;

use super::decide::CaptureAdmission;
use crate::base::dialer::{OwnListeners, connect_pinned};
use crate::egress::capture_refusal::CaptureRefusal;
use crate::egress::relay::own_dial::OwnDial;

/// An upstream connection, registered as the gate's own while it lives.
#[derive(Debug)]
pub(crate) struct Dialed {
    /// The connection.
    pub(crate) stream: TcpStream,
    _own: OwnDial,
}

/// Dial the admission's checked addresses on its port through the shared pinned connector.
/// A target that reaches one of the gate's own listeners (`own`) is a loop, never dialed.
pub(crate) async fn dial(
    admission: &CaptureAdmission,
    own: &OwnListeners,
    connect_timeout: Duration,
) -> Result<Dialed, CaptureRefusal> {
    if own.first_loop(&admission.addrs, admission.port).is_some() {
        return Err(CaptureRefusal::Loop);
    }
    connect_pinned(&admission.addrs, admission.port, connect_timeout)
        .await
        .map(register)
        .map_err(CaptureRefusal::UpstreamConnect)
}

fn register(stream: TcpStream) -> Dialed {
    let own = OwnDial::register(&stream);
    Dialed { stream, _own: own }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_gates_own_listeners_are_never_dialed() {
        let own = OwnListeners::new(["127.0.0.1:15182".parse().unwrap()]);
        let admission = CaptureAdmission {
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
