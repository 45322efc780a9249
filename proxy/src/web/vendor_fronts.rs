//! Vendor-compatible fronts on the api listener: an unmodified Hermes (or any client of these
//! vendors' SDKs) routes through the gate by base-URL environment variables alone.
//!
//! Every route runs the same [`crate::web::pipeline`]; the front only translates the request into
//! pipeline items and the outcome into that vendor's response shape. A refusal keeps the
//! vendor's error shape and carries fleetgate's message and code, so the agent sees why.

pub(crate) mod firecrawl;
pub(crate) mod search;
pub(crate) mod tavily;
