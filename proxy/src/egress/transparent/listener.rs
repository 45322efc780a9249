//! The transparent listener: its limits, binding (IPv4 and the IPv6 twin), and the accept
//! loop with the connection cap and the drain; each connection is handled by `connection`.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::config::{LISTENER, OriginalDstSource, TransparentConfig};
use super::connection::Connection;
use crate::accept::Acceptor;
use crate::base::shards::Shards;
use crate::egress::capture_refusal::CaptureRefusal;
use crate::egress::relay::limits::TunnelCap;
use crate::live::state::GateState;

/// Bind the transparent listener on `addr`, named `transparent`. When `addr` is
/// `127.0.0.1`, also `[::1]` on the same port (`transparent_v6`), where ip6tables' REDIRECT
/// sends local IPv6 traffic; a host without IPv6 only gets a warning.
pub async fn bind(addr: SocketAddr) -> std::io::Result<Vec<(&'static str, TcpListener)>> {
    let v4 = TcpListener::bind(addr).await?;
    let port = v4.local_addr()?.port();
    let mut out = vec![("transparent", v4)];
    if addr.ip() == IpAddr::from([127, 0, 0, 1]) {
        match TcpListener::bind((Ipv6Addr::LOCALHOST, port)).await {
            Ok(v6) => out.push(("transparent_v6", v6)),
            Err(e) => tracing::warn!(error = %e, port, "no IPv6 transparent listener on [::1]"),
        }
    }
    Ok(out)
}

/// Bind `listen.transparent` ([`bind`]), record the listeners in `gate.listeners` (the loop
/// check reads them) and spawn their accept loops with the kernel's original destination.
/// Returns each listener's name, address and task, for the listening line and the drain.
pub async fn spawn(
    addr: SocketAddr,
    gate: &Arc<GateState>,
    shutdown: &watch::Receiver<bool>,
    shards: &Arc<Shards>,
) -> std::io::Result<Vec<(&'static str, SocketAddr, JoinHandle<()>)>> {
    let config = TransparentConfig::from_policy(&gate.runtime.load().policy);
    let mut started = Vec::new();
    for (name, listener) in bind(addr).await? {
        let local = listener.local_addr()?;
        gate.bound(name, local);
        let source = OriginalDstSource::Kernel;
        let task = serve(
            listener,
            Arc::clone(gate),
            source,
            config.clone(),
            shutdown.clone(),
            Arc::clone(shards),
        );
        started.push((name, local, tokio::spawn(task)));
    }
    Ok(started)
}

/// Accept connections until `shutdown` flips, then let in-flight ones finish for
/// [`TransparentConfig::drain_timeout`].
pub async fn serve(
    listener: TcpListener,
    gate: Arc<GateState>,
    source: OriginalDstSource,
    config: TransparentConfig,
    mut shutdown: watch::Receiver<bool>,
    shards: Arc<Shards>,
) {
    let open = TunnelCap::default();
    let accepted_total = gate
        .metrics
        .listener_connections
        .with_label_values(&[LISTENER]);
    let mut acceptor = Acceptor::new(LISTENER, Some(gate.metrics.accept_errors.clone()));
    // Each connection's task, on whichever shard runs it; aborted past the drain deadline.
    let mut tasks = FuturesUnordered::<JoinHandle<()>>::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = acceptor.accept(&listener) => accepted,
            Some(_) = tasks.next(), if !tasks.is_empty() => continue,
            _ = shutdown.changed() => break,
        };
        accepted_total.inc();
        let live = Arc::new(config.under(&gate.runtime.load().policy));
        let cap = live.max_connections;
        let conn = Connection::new(Arc::clone(&gate), live, source, peer, shutdown.clone());
        let task = match open.try_acquire(cap) {
            Some(permit) => shards.spawn(stream, move |stream| async move {
                conn.run(stream).await;
                drop(permit);
            }),
            None => Some(tokio::spawn(async move {
                let refusal = CaptureRefusal::Overloaded(conn.max_connections());
                conn.refuse_unread(stream, refusal).await
            })),
        };
        tasks.extend(task);
    }
    drop(listener);
    let drain = async { while tasks.next().await.is_some() {} };
    if tokio::time::timeout(config.drain_timeout, drain)
        .await
        .is_err()
    {
        tasks.iter().for_each(JoinHandle::abort);
        tracing::warn!(
            listener = LISTENER,
            "drain deadline reached; cutting what is still open"
        );
    }
}
