//! The body of every api-listener response once the LLM route streams, and a whole one.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

/// Body type of every api-listener response once the LLM route streams.
pub type LlmBody =
    http_body_util::combinators::BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// A whole body as an [`LlmBody`].
pub fn full(bytes: impl Into<Bytes>) -> LlmBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}
