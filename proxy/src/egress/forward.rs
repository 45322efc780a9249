//! The forward proxy on `listen.forwardProxy` (`HTTP_PROXY`/`HTTPS_PROXY` of the agent).
//!
//! ```text
//!  client ──► listener ──┬─ CONNECT host:port ─► canonical authority ─► tunnel cap ─► secret in host
//!                        │                       ─► port allow-list ─► E2 ─► E4 ─► loop check
//!                        │                       ─► pinned dial ─► 200 ─► first bytes (one sniff):
//!                        │                          TLS ─► SNI gates ─► metered byte tunnel
//!                        │                          HTTP ─► the relay below, request by request
//!                        │                          else ─► refused (raw byte tunnel on egress.rawTunnelPorts)
//!                        └─ GET http://h/p ─────► port allow-list ─► E1 ─► E2 ─► E4 (the pipeline)
//!                                                ─► loop check ─► pinned dial ─► streamed relay
//! ```
//!
//! Refusals are answered before anything is dialled: `403` with `{"error": {"code",
//! "message"}}` and `x-fleetgate-error` for gate decisions and loops, `429` + `Retry-After: 1`
//! past the tunnel cap, `400` for origin-form requests, `502`/`504` when an allowed upstream
//! fails. Each request writes one `egress.decision` line with `proxy_type` `http` or `connect`.

pub(crate) mod connect;
pub(crate) mod http;
pub(crate) mod listener;
pub(crate) mod proxy;
pub(crate) mod refusal;

pub use crate::egress::relay::limits::Limits;
pub use listener::serve;
pub use proxy::{ForwardProxy, LISTENER};
