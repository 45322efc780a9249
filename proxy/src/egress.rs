//! The egress listeners and the relay beneath them: the forward proxy (absolute-form HTTP and
//! CONNECT) and transparent capture (iptables-redirected TCP), which admit each target
//! through [`crate::judge::admit`] and move the bytes through [`relay`].
//!
//! - [`relay`]: HTTP/1.1 re-framing, the first bytes of a captured connection, byte meters,
//!   limits, the gate's own dials and the spliced tunnel. It imports nothing of this crate but
//!   [`crate::base`] (and the policy crate): no gate, no listener;
//! - [`forward`]: the forward proxy on `listen.forwardProxy`;
//! - [`capture_refusal`]: why a captured connection (or what a CONNECT tunnel carries) is
//!   refused, and its wire forms. Both listeners raise it: CONNECT tunnels sniff their first
//!   bytes as capture does, and the transparent listener hands plain HTTP to the forward
//!   proxy, so it sits beside them rather than inside either;
//! - [`transparent`]: the listener iptables-redirected TCP lands on.
//!
//! May import: [`crate::base`], [`crate::judge`], [`crate::web`], [`crate::live`]. Nothing of
//! the wings above (llm, watch).

pub(crate) mod capture_refusal;
pub mod forward;
pub mod relay;
pub mod transparent;
