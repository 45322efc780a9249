//! The policy in force: one policy built into a [`runtime::Runtime`] (the gates' rules and
//! the web tools together), swapped whole on [`reload`], and read by every listener through
//! [`state::GateState`].
//!
//! May import: [`crate::base`], [`crate::judge`], [`crate::web`]. Nothing of the wings above
//! (egress, llm, watch).

pub(crate) mod reload;
pub mod runtime;
pub mod state;
