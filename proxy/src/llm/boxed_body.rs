//! The body of every api-listener response once the LLM route streams.

use bytes::Bytes;

/// Body type of every api-listener response once the LLM route streams.
pub(crate) type LlmBody =
    http_body_util::combinators::BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;
