//! E5, the shared extract cache, and the search memo.
//!
//! Extract results live on the shared volume as content-addressed files,
//! `<root>/extract/<host>-<16 hex>.cache.md`, one self-describing file per entry (a JSON header
//! line, then the markdown). There is no central index, so any number of gate pods may read,
//! write and sweep one read-write-many volume at once: a writer renames a finished temporary
//! file into place, a reader sees the old or the new entry and never half of one, and a lost
//! race between two sweeps or a sweep and a writer costs at most one cache miss.
//!
//! ```text
//!  E4 blocklist ─► DiskCache::lookup ─┬─ hit ──────────────► E7 assemble (cached: true, cache_age_s)
//!                                     └─ miss/stale/bypass ─► E6 vendor ─► DiskCache::put ─► E7
//! ```
//!
//! A hit skips only the vendor call: every gate before it has already run for the URL, every
//! stored hop after it (redirects, a vendor's final URL) is re-admitted under the current
//! policy, and the page still goes through E7. A page whose chain crossed an address outside
//! public unicast space (an `allowCIDRs` exception) is never stored. [`CacheOutcome`] and [`NoCacheReason`] carry the stable codes used
//! as the `outcome` metric label and the `cache` field of the decision log line.
//!
//! In the pipeline (per URL, after E4): `lookup(&target.normalized, backend)`; on a hit the row
//! is assembled from [`CachedPage`] with `cached: true` and `cache_age_s: age_secs()`; on any
//! other outcome the vendor fetches and a successful page goes to [`DiskCache::put_async`]
//! (`rescued: true` for rescue results, which `put` then refuses). The outcome's code is the
//! `fleetgate_cache_lookups_total{outcome}` label; `put`'s refusal code (or `stored`) labels the
//! writes. A lookup costs a file read and a UTF-8 check (tens of µs for 50 KB); a put costs an
//! fsync (milliseconds on a real disk), hence `put_async`.
//!
//! - [`key`]: the entry key and file name.
//! - [`cacheable`]: which hosts are never cached (hostname heuristics, exempt hosts).
//! - [`disk`]: [`DiskCache`] lookup and atomic put.
//! - [`eviction`]: the sweep (TTL, then oldest first past the entry and byte bounds).
//! - [`memo`]: the per-process search memo with single-flight.

use std::time::Duration;

use crate::policy::CachePolicy;

pub(crate) mod cacheable;
pub(crate) mod disk;
pub(crate) mod eviction;
pub(crate) mod key;
pub(crate) mod memo;

pub use disk::{CacheStatus, CachedPage, DiskCache, Lookup, NewEntry};
pub use eviction::{SweepPolicy, SweepStats};
pub use key::CacheKey;

/// What a cache lookup found. [`code`](CacheOutcome::code) is the metric label value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheOutcome {
    /// A fresh entry: the caller serves it and skips the vendor.
    Hit,
    /// No entry: the caller fetches and then [`DiskCache::put`]s the result.
    Miss,
    /// An entry older than the TTL: treated as a miss; the next put replaces it.
    Stale,
    /// The cache was not consulted (or could not serve) for this reason; the caller fetches as on a
    /// miss, and `put` decides on its own whether the fresh result may be stored.
    Bypass(NoCacheReason),
}

/// Why a URL or a result is not served from or stored in the cache. Every variant has a stable
/// [`code`](NoCacheReason::code).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum NoCacheReason {
    /// `web.cache.enabled` is off.
    #[error("failed to use the cache: it is disabled by policy")]
    Disabled,
    /// The URL has no host or does not parse.
    #[error("failed to use the cache: the url has no usable host")]
    InvalidUrl,
    /// `localhost`, `*.localhost` or `*.local`.
    #[error("failed to use the cache: the host is a local development name")]
    LocalHost,
    /// An IP literal that is not a public unicast address.
    #[error("failed to use the cache: the host is a non-public address")]
    PrivateAddress,
    /// A host name without a dot (an intranet name).
    #[error("failed to use the cache: the host is a single-label name")]
    SingleLabelHost,
    /// The host matches `web.cache.exemptHosts`.
    #[error("failed to use the cache: the host is exempt by policy")]
    ExemptHost,
    /// The page has no content.
    #[error("failed to cache the page: it has no content")]
    EmptyContent,
    /// The page is over 2,000,000 characters (a capped copy is never cached).
    #[error("failed to cache the page: it is over 2,000,000 characters")]
    TooLarge,
    /// The body is not text; its type travels only with a live fetch.
    #[error("failed to cache the page: the body is not text")]
    NotText,
    /// The result came from a rescue backend, not the configured one.
    #[error("failed to cache the page: rescued results are never cached")]
    Rescued,
    /// The upstream answered outside 2xx.
    #[error("failed to cache the page: the upstream status is an error")]
    ErrorRow,
    /// The volume refused writes (read-only, permissions, not a directory, a symlinked folder).
    #[error("failed to write the cache: the volume is not writable")]
    VolumeUnwritable,
    /// The volume or the quota is full.
    #[error("failed to write the cache: the volume is full")]
    VolumeFull,
    /// The entry could not be read for a reason other than its absence.
    #[error("failed to read the cache: the volume is not readable")]
    VolumeUnreadable,
    /// Any other I/O failure on the volume.
    #[error("failed to use the cache volume")]
    VolumeError,
    /// The entry's header, length or encoding is broken; it was removed best-effort.
    #[error("failed to read the cache: the entry is corrupt")]
    CorruptEntry,
    /// A stored redirect hop (or a vendor's final URL) is refused by the current policy; the
    /// entry is not served and the page is fetched afresh, every hop re-gated.
    #[error("failed to use the cache: a stored hop of the page is refused by the current policy")]
    RefusedHop,
    /// The entry records no hops (written before hops were recorded): it cannot be
    /// re-admitted, so it is not served.
    #[error("failed to use the cache: the entry does not record its hops")]
    UnrecordedHops,
}

/// The cache settings one [`DiskCache`] runs with; built from the policy's `web.cache`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheSettings {
    /// Cache on or off (also switches the search memo). Default on.
    pub enabled: bool,
    /// Entry lifetime, measured from `fetched_at`. Default 20 minutes.
    pub ttl: Duration,
    /// Hosts never cached: exact host or any subdomain, a leading `*.` ignored. Default none.
    pub exempt_hosts: Vec<String>,
    /// Entry bound for `extract/`. Default 5000.
    pub max_entries: u64,
    /// Byte bound for `extract/` (file sizes, header included). Default 512 MiB.
    pub max_bytes: u64,
    /// When `put` triggers a sweep.
    pub sweep: SweepPolicy,
}

// === impl CacheOutcome ===

impl CacheOutcome {
    /// Stable snake_case code: `hit`, `miss`, `stale`, or the bypass reason's code.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::Hit => "hit",
            Self::Miss => "miss",
            Self::Stale => "stale",
            Self::Bypass(reason) => reason.code(),
        }
    }

    /// Whether the caller serves the cached entry (and skips the vendor).
    pub fn is_hit(&self) -> bool {
        matches!(self, Self::Hit)
    }
}

// === impl NoCacheReason ===

impl NoCacheReason {
    /// Every reason, for code listings and the uniqueness test.
    pub(crate) const ALL: [Self; 18] = [
        Self::Disabled,
        Self::InvalidUrl,
        Self::LocalHost,
        Self::PrivateAddress,
        Self::SingleLabelHost,
        Self::ExemptHost,
        Self::EmptyContent,
        Self::TooLarge,
        Self::NotText,
        Self::Rescued,
        Self::ErrorRow,
        Self::VolumeUnwritable,
        Self::VolumeFull,
        Self::VolumeUnreadable,
        Self::VolumeError,
        Self::CorruptEntry,
        Self::RefusedHop,
        Self::UnrecordedHops,
    ];

    /// Stable snake_case code, the same in metric labels and log lines.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::InvalidUrl => "invalid_url",
            Self::LocalHost => "local_host",
            Self::PrivateAddress => "private_address",
            Self::SingleLabelHost => "single_label_host",
            Self::ExemptHost => "exempt_host",
            Self::EmptyContent => "empty_content",
            Self::TooLarge => "too_large",
            Self::NotText => "not_text",
            Self::Rescued => "rescued",
            Self::ErrorRow => "error_row",
            Self::VolumeUnwritable => "volume_unwritable",
            Self::VolumeFull => "volume_full",
            Self::VolumeUnreadable => "volume_unreadable",
            Self::VolumeError => "volume_error",
            Self::CorruptEntry => "corrupt_entry",
            Self::RefusedHop => "refused_hop",
            Self::UnrecordedHops => "unrecorded_hops",
        }
    }

    /// Whether this reason is a volume problem (logged and counted as degraded, not a policy).
    pub(crate) fn is_volume_fault(&self) -> bool {
        matches!(
            self,
            Self::VolumeUnwritable | Self::VolumeFull | Self::VolumeUnreadable | Self::VolumeError
        )
    }
}

// === impl CacheSettings ===

impl Default for CacheSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            ttl: Duration::from_secs(20 * 60),
            exempt_hosts: Vec::new(),
            max_entries: 5000,
            max_bytes: 512 * 1024 * 1024,
            sweep: SweepPolicy::default(),
        }
    }
}

impl From<&CachePolicy> for CacheSettings {
    fn from(policy: &CachePolicy) -> Self {
        Self {
            enabled: policy.enabled,
            ttl: policy.ttl,
            exempt_hosts: policy.exempt_hosts.clone(),
            max_entries: policy.max_entries,
            max_bytes: policy.max_bytes,
            sweep: SweepPolicy::default(),
        }
    }
}

#[cfg(test)]
mod tests;
