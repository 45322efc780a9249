//! The extract cache key: `sha256(url + "\n" + format + "\n" + provider)`, and the entry's file
//! name `<host_slug>-<first 16 hex>.cache.md`, the same name Hermes gives its cache files.

use sha2::{Digest, Sha256};

use crate::web::assemble::store::host_slug;

/// The format every extract entry is stored in (web_extract always asks for markdown).
pub(crate) const FORMAT_MARKDOWN: &str = "markdown";

/// Suffix of every cache entry file.
pub(crate) const ENTRY_SUFFIX: &str = ".cache.md";

/// How many hex digits of the digest name an entry.
const KEY_HEX: usize = 16;

/// The key of one extract cache entry: the normalised requested URL, the format and the resolved
/// provider name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    slug: String,
    hex: String,
}

// === impl CacheKey ===

impl CacheKey {
    /// The key for `url` (the normalised requested URL), `format` (`markdown`) and `provider`
    /// (the resolved backend's name).
    pub fn new(url: &str, format: &str, provider: &str) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(url.as_bytes());
        hasher.update(b"\n");
        hasher.update(format.as_bytes());
        hasher.update(b"\n");
        hasher.update(provider.as_bytes());
        let hex = hex::encode(hasher.finalize())[..KEY_HEX].to_owned();
        Self {
            slug: host_slug(url),
            hex,
        }
    }

    /// The entry's file name: `<host_slug>-<16 hex>.cache.md`.
    pub fn file_name(&self) -> String {
        format!("{}-{}{ENTRY_SUFFIX}", self.slug, self.hex)
    }
}

#[cfg(test)]
mod tests;
