//! The smuggling farm: payloads from public smuggling research are sent through the gate (the
//! forward proxy and captured plain HTTP), a recording origin keeps every byte the gate
//! forwarded, and each recorded stream is replayed to real HTTP servers from the package
//! registries. The farm's one assertion: every server parses exactly the requests the gate
//! logged as allowed, with the same method, path, `Host` and body length.
//!
//! - [`corpus`]: the payloads and their sources.
//! - [`recorder`]: the origin that records what the gate forwarded.
//! - [`servers`]: the real servers and the replay.
//! - [`decisions`]: the gate's decision lines, captured in process.
//! - [`hyper_relay`]: a relay built on hyper's server and client, the reference column.

pub mod corpus;
pub mod decisions;
pub mod hyper_relay;
pub mod recorder;
pub mod servers;
