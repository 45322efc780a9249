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

pub mod backend;
pub mod brave_free;
pub mod client;
pub mod ddgs;
pub mod direct;
pub mod exa;
pub mod firecrawl;
pub mod html;
pub mod keenable;
pub mod keyless;
pub(crate) mod mcp;
pub mod page;
pub mod parallel;
pub mod perplexity;
pub mod registry;
pub mod search;
pub mod searxng;
pub mod tavily;
pub mod xai;

pub use backend::{Backend, default_endpoint};
pub use client::{Endpoint, FailureSource, VendorError, VendorErrorKind};
pub use fleetgate_policy::backends::{
    BackendKind, Capabilities, EXTRACT_BACKENDS, KeyOrder, SEARCH_BACKENDS, check_extract_backend,
    check_search_backend, no_search_error, search_only_error,
};
pub use page::{Admitted, Hop, HopGate, Page, VendorFailure};
pub use search::{SearchHit, Searched};
