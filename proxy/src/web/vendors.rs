//! Upstream backends: who actually fetches a page once every gate has allowed it.
//!
//! One file per backend. `direct` is built in and keyless: the gate fetches the page itself
//! through a connector that dials only addresses E2 checked, and re-gates every redirect hop.
//! The vendor backends (`firecrawl`, `tavily`, `exa`, `parallel`, `keenable` for extract and
//! search; `perplexity`, `searxng`, `brave-free`, `ddgs`, `xai` for search only) speak each vendor's
//! wire format through the shared [`client`]. exa, parallel, firecrawl and keenable also answer
//! without a key ([`keyless`]), and `keyless` names their ring. [`mcp`] is the gate's one MCP
//! client (the keyless Exa and Parallel calls, and watches). Backends never build HTTP
//! responses; failures are [`VendorFailure`] values with stable codes.

pub(crate) mod backend;
pub(crate) mod brave_free;
pub(crate) mod client;
pub(crate) mod ddgs;
pub(crate) mod direct;
pub(crate) mod exa;
pub(crate) mod firecrawl;
#[cfg(fuzzing)]
pub mod html;
#[cfg(not(fuzzing))]
pub(crate) mod html;
pub mod keenable;
pub(crate) mod keyless;
pub(crate) mod mcp;
pub(crate) mod page;
pub(crate) mod parallel;
pub(crate) mod perplexity;
pub(crate) mod registry;
pub(crate) mod search;
pub(crate) mod searxng;
pub(crate) mod tavily;
pub(crate) mod xai;

pub use backend::{Backend, default_endpoint};
pub use client::{Endpoint, FailureSource, VendorError, VendorErrorKind};
pub use fleetgate_policy::backends::{
    BackendKind, Capabilities, EXTRACT_BACKENDS, KeyOrder, SEARCH_BACKENDS, check_extract_backend,
    check_search_backend, no_search_error, search_only_error,
};
pub use page::{Admitted, Hop, HopGate, Page, VendorFailure};
pub(crate) use search::{SearchHit, Searched};
