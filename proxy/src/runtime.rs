//! Everything built from one policy: resolver, compiled blocklist, store, backends.
//!
//! A [`Runtime`] is immutable; a policy reload builds a new one and swaps it in whole, so a
//! request always sees one consistent policy from its first gate to its last.

use std::sync::Arc;
use std::time::SystemTime;

use crate::assemble::store::Store;
use crate::cache::DiskCache;
use crate::cache::memo::SearchMemo;
use crate::gates::website_blocklist::Blocklist;
use crate::policy::Policy;
use crate::resolve::{self, GateResolver};
use crate::vendors::Searched;
use crate::vendors::direct::DirectFetcher;
use crate::vendors::registry::Backends;

/// The live state derived from one validated policy.
#[derive(Debug)]
pub struct Runtime {
    /// The policy this runtime was built from.
    pub policy: Policy,
    /// The gate's own resolver.
    pub resolver: GateResolver,
    /// The compiled website blocklist.
    pub blocklist: Blocklist,
    /// The full-text store on the shared volume.
    pub store: Store,
    /// The shared extract cache on the same volume (`extract/`).
    pub cache: DiskCache,
    /// The in-process search memo.
    pub search_memo: SearchMemo<Searched>,
    /// The `direct` backend.
    pub direct: DirectFetcher,
    /// The extract, search and rescue backends.
    pub backends: Backends,
    /// When this runtime was built.
    pub loaded_at: SystemTime,
    /// Problems that did not stop the load (missing shared blocklist files, ...).
    pub warnings: Vec<String>,
}

// === impl Runtime ===

impl Runtime {
    /// Build the runtime for `policy`.
    pub fn build(policy: Policy) -> Result<Arc<Self>, resolve::BuildError> {
        let resolver = GateResolver::new(&policy.egress.resolver)?;
        let (blocklist, load_warnings) = Blocklist::load(
            policy.blocklist.enabled,
            &policy.blocklist.domains,
            &policy.blocklist.shared_files,
            std::path::Path::new("."),
        );
        let store = Store::new(
            &policy.store.root,
            policy.store.agent_visible_root.as_deref(),
        );
        let cache = DiskCache::new(&policy.store.root, (&policy.web.cache).into());
        let search_memo = SearchMemo::from_policy(&policy.web.cache);
        let direct = DirectFetcher::new(policy.fetch.clone());
        let backends = Backends::build(&policy.web, &direct);
        let mut warnings: Vec<String> = load_warnings.into_iter().map(|w| w.0).collect();
        warnings.extend(backends.warnings.iter().cloned());
        Ok(Arc::new(Self {
            backends,
            resolver,
            blocklist,
            store,
            cache,
            search_memo,
            direct,
            loaded_at: SystemTime::now(),
            warnings,
            policy,
        }))
    }
}
