//! Stage E7: assembly of each successful page — binary check, inline-image stripping,
//! truncate-and-store — with Hermes' exact algorithms and footer text.

pub mod binary;
pub mod images;
pub mod store;
pub mod truncate;

/// Hermes' default extract character limit.
pub const DEFAULT_CHAR_LIMIT: usize = 15_000;
/// Smallest accepted character limit.
pub const MIN_CHAR_LIMIT: usize = 2_000;
/// Largest accepted character limit.
pub const MAX_CHAR_LIMIT: usize = 500_000;
