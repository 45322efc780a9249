use http_body_util::BodyExt;
use serde_json::Value;

use super::*;
use http::StatusCode;

use crate::judge::respond::ERROR_HEADER;
use crate::policy::llm::ProviderKind;

#[test]
fn role_paths_parse_into_a_role_key_and_the_provider_path() {
    let cases = [
        (
            "/llm/main/v1/chat/completions",
            Some(("main", "/v1/chat/completions")),
        ),
        (
            "/llm/delegation/v1/responses",
            Some(("delegation", "/v1/responses")),
        ),
        ("/llm/cron/v1/messages", Some(("cron", "/v1/messages"))),
        (
            "/llm/auxiliary/title_generation/v1/chat/completions",
            Some(("auxiliary:title_generation", "/v1/chat/completions")),
        ),
        ("/llm/main", Some(("main", "/"))),
        ("/llm/auxiliary", None),
        ("/llm/auxiliary/", None),
        ("/llm/auxiliary/Bad.Task/v1", None),
        ("/llm/default/v1/chat/completions", None),
        ("/llm/sneaky/v1/chat/completions", None),
        ("/v1/extract", None),
    ];
    for (path, want) in cases {
        let got = LlmRoute::parse(path);
        let got = got.as_ref().map(|r| (r.role.as_str(), r.rest.as_str()));
        assert_eq!(got, want, "{path} must parse to {want:?}");
    }
}

#[tokio::test]
async fn gate_errors_keep_the_provider_error_shape_and_the_code_header() {
    let err = LlmError::ModelNotAllowed("fleetgate: model 'x' is not allowed".into());
    for (kind, message_at) in [
        (Some(ProviderKind::OpenAi), "/error/message"),
        (Some(ProviderKind::Anthropic), "/error/message"),
        (None, "/error/message"),
    ] {
        let resp = err.response(kind);
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "a refusal is 403");
        assert_eq!(
            resp.headers()
                .get(ERROR_HEADER)
                .and_then(|v| v.to_str().ok()),
            Some("llm_model_not_allowed"),
            "the code header must be set"
        );
        let bytes = resp
            .into_body()
            .collect()
            .await
            .expect("the body must be readable")
            .to_bytes();
        let body: Value = serde_json::from_slice(&bytes).expect("the body must be JSON");
        assert_eq!(
            body.pointer(message_at).and_then(Value::as_str),
            Some("fleetgate: model 'x' is not allowed"),
            "{kind:?}: the message must sit where the SDK reads it: {body}"
        );
        if kind == Some(ProviderKind::Anthropic) {
            assert_eq!(body["type"], "error", "Anthropic errors carry type=error");
        }
    }
}
