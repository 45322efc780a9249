//! Which provider endpoint a request is, by method and normalised path: the route is a
//! closed list. Endpoints that run a model are judged (the model checked, completions also
//! observed and pinned); metadata reads pass; `llm.extraEndpoints` names any other the
//! policy lets through unjudged; everything else is refused in enforce mode.

use http::Method;

use crate::policy::llm::LlmPolicy;

/// What the route does with an endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LlmEndpoint {
    /// `chat/completions`, `completions`, `responses`, `messages`: the model judged, the call
    /// observed and pinned.
    Completion,
    /// `complete`, `embeddings`, `images/generations`, `messages/count_tokens`: the top-level
    /// model judged.
    ModelOnly,
    /// `messages/batches`: the model of every request's `params` judged, and pinned.
    MessageBatch,
    /// `GET …/models[/…]` and `POST …/api/show`: model lists and model info, run no model.
    Metadata,
    /// Named in `llm.extraEndpoints`: relayed as sent.
    Named,
    /// Anything else: refused in enforce mode.
    Unknown,
}

/// Judged endpoints by their last path segments, most specific first.
const JUDGED: &[(&[&str], LlmEndpoint)] = &[
    (&["messages", "batches"], LlmEndpoint::MessageBatch),
    (&["messages", "count_tokens"], LlmEndpoint::ModelOnly),
    (&["images", "generations"], LlmEndpoint::ModelOnly),
    (&["chat", "completions"], LlmEndpoint::Completion),
    (&["completions"], LlmEndpoint::Completion),
    (&["responses"], LlmEndpoint::Completion),
    (&["messages"], LlmEndpoint::Completion),
    (&["complete"], LlmEndpoint::ModelOnly),
    (&["embeddings"], LlmEndpoint::ModelOnly),
    (&["api", "show"], LlmEndpoint::Metadata),
];

/// How many leading segments may come before `models` in a model-list path
/// (`/models`, `/v1/models`, `/api/v1/models`).
const MODELS_DEPTH: usize = 3;

// === impl LlmEndpoint ===

impl LlmEndpoint {
    /// The endpoint `method` on the normalised provider path `path` is, under `policy`.
    pub(crate) fn classify(method: &Method, path: &str, policy: &LlmPolicy) -> Self {
        let segments: Vec<&str> = path
            .trim_matches('/')
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        if method == Method::POST {
            let judged = JUDGED
                .iter()
                .find(|(tail, _)| segments.ends_with(tail))
                .map(|(_, e)| *e);
            if let Some(e) = judged {
                return e;
            }
        }
        if method == Method::GET && segments.iter().take(MODELS_DEPTH).any(|s| *s == "models") {
            return Self::Metadata;
        }
        if policy
            .extra_endpoints
            .iter()
            .any(|p| p.matches(method.as_str(), path))
        {
            return Self::Named;
        }
        Self::Unknown
    }

    /// Whether the body is judged (and so read as JSON).
    pub(crate) fn is_judged(self) -> bool {
        matches!(
            self,
            Self::Completion | Self::ModelOnly | Self::MessageBatch
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::llm::EndpointPattern;

    #[test]
    fn each_method_and_path_lands_in_its_class() {
        let policy = LlmPolicy {
            extra_endpoints: vec![
                EndpointPattern::parse("POST /v1/batches").expect("valid"),
                EndpointPattern::parse("GET /v1/batches/*").expect("valid"),
            ],
            ..LlmPolicy::default()
        };
        let cases = [
            ("POST", "/v1/chat/completions", LlmEndpoint::Completion),
            ("POST", "/v1/chat/completions/", LlmEndpoint::Completion),
            ("POST", "/api/v1/chat/completions", LlmEndpoint::Completion),
            ("POST", "/v1/completions", LlmEndpoint::Completion),
            ("POST", "/v1/responses", LlmEndpoint::Completion),
            ("POST", "/v1/messages", LlmEndpoint::Completion),
            ("POST", "/v1/messages/batches", LlmEndpoint::MessageBatch),
            ("POST", "/v1/messages/count_tokens", LlmEndpoint::ModelOnly),
            ("POST", "/v1/complete", LlmEndpoint::ModelOnly),
            ("POST", "/v1/embeddings", LlmEndpoint::ModelOnly),
            ("POST", "/v1/images/generations", LlmEndpoint::ModelOnly),
            ("POST", "/api/show", LlmEndpoint::Metadata),
            ("GET", "/v1/models", LlmEndpoint::Metadata),
            ("GET", "/api/v1/models", LlmEndpoint::Metadata),
            (
                "GET",
                "/v1/models/anthropic/claude-x",
                LlmEndpoint::Metadata,
            ),
            ("POST", "/v1/batches", LlmEndpoint::Named),
            ("GET", "/v1/batches/b1", LlmEndpoint::Named),
            ("GET", "/v1/batches", LlmEndpoint::Unknown),
            ("POST", "/v1/files", LlmEndpoint::Unknown),
            ("POST", "/v1/images/edits", LlmEndpoint::Unknown),
            ("POST", "/v1/audio/speech", LlmEndpoint::Unknown),
            ("GET", "/v1/chat/completions", LlmEndpoint::Unknown),
            ("PUT", "/v1/chat/completions", LlmEndpoint::Unknown),
            ("POST", "/v1/models", LlmEndpoint::Unknown),
            ("GET", "/v1/x/y/z/models", LlmEndpoint::Unknown),
            ("DELETE", "/v1/models/x", LlmEndpoint::Unknown),
        ];
        for (method, path, want) in cases {
            let method = Method::from_bytes(method.as_bytes()).expect("method");
            assert_eq!(
                LlmEndpoint::classify(&method, path, &policy),
                want,
                "{method} {path}"
            );
        }
    }
}
