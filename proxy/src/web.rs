//! The web tools: search and extract behind the gates — the vendors and the `direct`
//! fetcher with its main-content extraction, the shared cache, the shaping of each page, the
//! extract pipeline that orders the stages, and the vendor-compatible fronts over it.
//!
//! - [`vendors`]: who fetches a page or runs a search once every gate has allowed it;
//! - [`cache`]: E5, the shared extract cache and the search memo;
//! - [`assemble`]: E7, each successful page checked, trimmed, truncated and stored;
//! - [`pipeline`]: E0–E7 in one place, over one policy's [`crate::judge::rules::Rules`] and
//!   [`Web`];
//! - [`vendor_fronts`]: Firecrawl-, Tavily- and SearXNG-shaped routes over the pipeline.
//!
//! May import: [`crate::base`], [`crate::judge`]. Nothing of the wings above (live, egress,
//! llm, watch).

use crate::policy::Policy;

use assemble::store::Store;
use cache::DiskCache;
use cache::memo::SearchMemo;
use vendors::Searched;
use vendors::direct::DirectFetcher;
use vendors::registry::Backends;

pub mod assemble;
pub mod cache;
pub mod pipeline;
pub(crate) mod vendor_fronts;
pub mod vendors;

/// What the web tools build from one policy: the page store, the cache, the search memo and
/// the backends (the `direct` fetcher among them). Built beside the gates' [`crate::judge::rules::Rules`]
/// and swapped with them as one [`crate::live::runtime::Runtime`].
#[derive(Debug)]
pub struct Web {
    /// The full-text store on the shared volume.
    pub(crate) store: Store,
    /// The shared extract cache on the same volume (`extract/`).
    pub(crate) cache: DiskCache,
    /// The in-process search memo.
    pub(crate) search_memo: SearchMemo<Searched>,
    /// The extract, search and rescue backends.
    pub(crate) backends: Backends,
}

// === impl Web ===

impl Web {
    /// The web tools of `policy`. The backends' warnings are in [`Backends::warnings`].
    pub(crate) fn build(policy: &Policy) -> Self {
        let store = Store::new(
            &policy.store.root,
            policy.store.agent_visible_root.as_deref(),
        );
        let cache = DiskCache::new(&policy.store.root, (&policy.web.cache).into());
        let search_memo = SearchMemo::from_policy(&policy.web.cache);
        let direct = DirectFetcher::new(policy.fetch.clone());
        let backends = Backends::build(&policy.web, &direct);
        Self {
            store,
            cache,
            search_memo,
            backends,
        }
    }
}
