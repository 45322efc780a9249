use std::future::Future;

use super::*;
use crate::egress::forward::connect;

// The size of the future an `async fn` returns, read from the fn item alone (no arguments
// built, nothing polled). A spawned connection's task is allocated at the size of its future's
// largest state for as long as the connection lives, so tests pin that size with these.

/// The size of the future `f(a, b, c)` returns.
fn of3<A, B, C, F: Future>(_: impl FnOnce(A, B, C) -> F) -> usize {
    size_of::<F>()
}

/// The size of the future `f(a, b, c, d)` returns.
fn of4<A, B, C, D, F: Future>(_: impl FnOnce(A, B, C, D) -> F) -> usize {
    size_of::<F>()
}

/// Most bytes the future of one forward-proxy connection may take. Every connection's task
/// is allocated at this size for its whole life, idle keep-alive connections and tunnels
/// included: the exchange, the CONNECT handler and rare refusals are boxed so that only what
/// a connection holds between requests stays in it (7.6 KB before they were).
const CONNECTION_BOUND: usize = 2 * 1024;

/// Most bytes the CONNECT handler's future may take: what a tunnel holds from its `200` on.
/// The gates, the dial, the SNI judgement, a refusal of the first bytes and the byte relay
/// are boxed inside it, each only while it runs.
const TUNNEL_BOUND: usize = 3 * 1024;

#[test]
fn a_connection_and_a_tunnel_hold_small_futures() {
    let connection = of4(serve_connection);
    let tunnel = of3(connect::handle);
    eprintln!("serve_connection: {connection} B, connect::handle: {tunnel} B");
    assert!(
        connection <= CONNECTION_BOUND,
        "a forward-proxy connection's future is {connection} B, past {CONNECTION_BOUND} B: \
         box the large state that grew it (it is held by every open connection)"
    );
    assert!(
        tunnel <= TUNNEL_BOUND,
        "the CONNECT handler's future is {tunnel} B, past {TUNNEL_BOUND} B: box the large \
         state that grew it (it is held by every open tunnel)"
    );
}
