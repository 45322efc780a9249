use super::*;
use crate::egress::forward::connect;
use crate::egress::forward::future_size::{of3, of4};

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
