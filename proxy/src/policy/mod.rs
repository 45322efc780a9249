//! The gate policy file: YAML `version: v1`, parsed raw → validated.

/// The only policy format version this gate reads.
pub const POLICY_VERSION: &str = "v1";
