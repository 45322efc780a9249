//! The relay layer beneath the forward and transparent listeners: what both need to move
//! bytes between an agent and an upstream once the gates have decided, and nothing about how
//! either listener learns its target.
//!
//! - [`h1`]: the HTTP/1.1 head parser, body framing and re-encoding — a relayed message is
//!   decoded, checked and written anew, never passed through as the client framed it;
//! - [`sniff`]: the first bytes of a captured connection (TLS ClientHello SNI, HTTP/1 head);
//! - [`meter`]: byte counting and idle tracking of relayed streams;
//! - [`limits`]: tunnel caps, connection caps and the relay timeouts;
//! - [`own_dial`]: the registry of the gate's own upstream sockets, so one that the capture
//!   rules send back into the gate is refused as a loop;
//! - [`zero_copy`]: a judged tunnel's bytes moved socket to socket with splice(2), or copied
//!   in user space where the kernel will not.
//!
//! The listeners sit above: `forward` (absolute-form HTTP and CONNECT) and `transparent`
//! (iptables capture, which hands captured plain HTTP to the forward proxy's request relay).
//! Nothing here imports either of them, nor anything of the crate above [`crate::base`]: no
//! gate, no refusal, no metric (`tests/tests/module_layers.rs` checks it).

pub mod h1;
pub(crate) mod limits;
pub(crate) mod meter;
pub(crate) mod own_dial;
#[cfg(fuzzing)]
pub mod sniff;
#[cfg(not(fuzzing))]
pub(crate) mod sniff;
pub(crate) mod zero_copy;
