//! Transparent capture: the listener that iptables-redirected TCP lands on (`:15182`).
//!
//! ```text
//!  agent connect(1.2.3.4:443) ─► nat OUTPUT ─► FLEETGATE_OUTPUT ─► REDIRECT :15182
//!    accept ─► original_dst (SO_ORIGINAL_DST / IP6T_SO_ORIGINAL_DST) ─► sniff (TLS SNI | HTTP Host)
//!    TLS  ─► decide: secret in host, port allow-list, SSRF (own resolver), blocklist
//!         ─► dial the gate's OWN checked answer for the name on the original port ─► splice bytes
//!    HTTP ─► the forward proxy's relay: EVERY request gated on its own Host as
//!            http://<Host>:<original port><path> (port list, E1, E2, E4), dialled on its checks
//! ```
//!
//! The address the agent chose is used only for its port: SNI and Host are chosen by the
//! (untrusted) client and the destination IP by the client's own DNS, so a gate that checked
//! the name but dialed the original IP would be bypassable (SNI `allowed.example` sent to
//! 169.254.169.254). A connection that names no host is refused unless raw-IP egress is
//! allowed (`egress.allowRawIP`).
//!
//! Refusals: a TLS connection is closed cleanly (FIN, no bytes); a plain HTTP request gets
//! `403 {"error": {"code", "message"}}` with `x-fleetgate-error`, then the connection closes. Both produce the canonical
//! `egress.decision` log line and count in the listener metrics (`listener="transparent"`).
//!
//! Not captured: UDP (QUIC/HTTP-3, DNS). The rules from `init-iptables` only redirect TCP.

pub(crate) mod config;
mod connection;
pub(crate) mod decide;
pub(crate) mod dial;
pub(crate) mod listener;
pub(crate) mod original_dst;
pub(crate) mod splice;

pub use config::{DEFAULT_PORT, LISTENER, OriginalDstSource, TransparentConfig};
pub use listener::{bind, serve, spawn};
