//! The shared base: what every wing uses and nothing in it knows about a gate, a listener or
//! a vendor.
//!
//! - [`clock`]: wall-clock time as the gate records it;
//! - [`dialer`]: the pinned connector every egress path shares;
//! - [`file_write`]: files kept across restarts, written whole or not at all;
//! - [`json_escape`]: JSON string contents written straight into a byte buffer;
//! - [`resolve`]: the gate's own resolver (every answer checked by the caller);
//! - [`shards`]: the listeners' threads, one single-threaded runtime per worker;
//! - [`target_url`]: typed facts about one request target;
//! - [`url_form`]: Hermes' URL forms (normalisation, Python-`unquote`).
//!
//! May import: the policy crate ([`crate::policy`]) and other crates. Nothing of this crate
//! above it (`tests/tests/module_layers.rs` holds the wings' order).

pub(crate) mod clock;
pub mod dialer;
pub(crate) mod file_write;
pub(crate) mod json_escape;
pub(crate) mod resolve;
pub mod shards;
pub mod target_url;
pub mod url_form;
