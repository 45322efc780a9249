//! The refusal mapping's tests, and the one uniqueness check of refusal codes that every
//! family's tests call ([`assert_listed_once`]).

use super::*;
use http_body_util::BodyExt;

/// Every stable code of every refusal family, for the one uniqueness check
/// ([`assert_listed_once`]).
pub(crate) fn every_code() -> Vec<&'static str> {
    DenyReason::ALL_CODES
        .iter()
        .chain(ApiError::ALL_CODES)
        .chain(crate::web::vendors::VendorFailure::ALL_CODES)
        .chain(crate::egress::forward::refusal::ProxyRefusal::OWN_CODES)
        .chain(crate::egress::capture_refusal::CaptureRefusal::OWN_CODES)
        .chain(crate::llm::LlmError::OWN_CODES)
        .chain(crate::watch::WatchError::ALL_CODES)
        .chain(&["binary_content"])
        .copied()
        .collect()
}

/// Every code in `codes` is snake_case and listed exactly once.
fn assert_codes_unique(codes: &[&str]) {
    let mut seen = std::collections::HashSet::new();
    for code in codes {
        assert!(
            seen.insert(*code),
            "code {code} must be unique across all families"
        );
        assert!(
            code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{code} must be snake_case"
        );
    }
}

/// The one uniqueness check of refusal codes: every family's codes together are unique and
/// snake_case, and each of `family` (a family's own list) is among them exactly once. Each
/// family's tests call it with its own list, so a family not wired into [`every_code`] fails.
pub(crate) fn assert_listed_once(family: &[&str]) {
    let all = every_code();
    assert_codes_unique(&all);
    for code in family {
        let n = all.iter().filter(|c| *c == code).count();
        assert_eq!(
            n, 1,
            "{code} must be listed once across all families, found {n}"
        );
    }
}

#[tokio::test]
async fn api_errors_carry_code_header_and_safe_message() {
    let resp = api_error(&ApiError::Internal("db path /secret/x exploded".into()));
    assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(resp.headers()[ERROR_HEADER], "internal_error");
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["code"], "internal_error");
    assert_eq!(
        v["error"]["message"], "internal error",
        "internals must not leak"
    );
}

#[tokio::test]
async fn every_shape_carries_the_code_in_the_header_and_the_body() {
    let refusals: [&dyn Refusal; 3] = [
        &DenyReason::PortNotAllowed { port: 8080 },
        &ApiError::Unauthorized,
        &crate::egress::forward::refusal::ProxyRefusal::TooManyTunnels { limit: 4 },
    ];
    let shapes = [
        Shape::Error,
        Shape::HermesExtract,
        Shape::Firecrawl,
        Shape::Tavily,
        Shape::Searxng,
        Shape::OpenAi { param: None },
        Shape::Anthropic,
        Shape::Text,
    ];
    for refusal in refusals {
        for shape in shapes {
            let resp = refuse(refusal, shape);
            assert_eq!(resp.status(), refusal.status(), "{shape:?}");
            assert_eq!(resp.headers()[ERROR_HEADER], refusal.code(), "{shape:?}");
            assert_eq!(
                resp.headers().contains_key(header::RETRY_AFTER),
                refusal.retry_after(),
                "{shape:?}"
            );
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            let text = String::from_utf8_lossy(&body);
            assert!(text.contains(&refusal.message()), "{shape:?}: {text}");
            if shape == Shape::Text {
                continue;
            }
            let v: Value = serde_json::from_slice(&body).unwrap();
            let code = [&v["code"], &v["error"]["code"], &v["detail"]["code"]]
                .into_iter()
                .find_map(Value::as_str);
            assert_eq!(code, Some(refusal.code()), "{shape:?}: {v}");
        }
    }
}

/// Every code any listener answers with, each family's list once.
#[test]
fn every_code_is_listed_once_across_all_families() {
    assert_listed_once(&every_code());
    assert_listed_once(&["binary_content"]);
}

#[test]
#[should_panic(expected = "must be unique across all families")]
fn a_code_two_families_share_is_found() {
    assert_listed_once(&["too_many_tunnels"]);
    // A family that reuses another's code: the list then holds it twice.
    let mut codes = every_code();
    codes.push(DenyReason::ALL_CODES[0]);
    assert_codes_unique(&codes);
}

#[test]
fn no_other_module_sets_the_error_header() {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir)
            .expect("the source tree is readable")
            .flatten()
        {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    assert!(files.len() > 50, "the walk must see the sources");
    for file in files {
        // The mapping itself, and this test, which names the setters it looks for.
        if file.ends_with("respond.rs") || file.ends_with("respond/tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("a source file is readable");
        let compact: String = text.split_whitespace().collect();
        for setter in [
            "insert(ERROR_HEADER",
            "insert(respond::ERROR_HEADER",
            "insert(\"x-fleetgate-error\"",
        ] {
            assert!(
                !compact.contains(setter),
                "{} sets x-fleetgate-error itself; call respond::tag",
                file.display()
            );
        }
    }
}

#[test]
fn the_llm_routes_codes_are_all_listed() {
    use crate::llm::LlmError;
    let errors = [
        LlmError::NotFound(String::new()),
        LlmError::RoleNotConfigured(String::new()),
        LlmError::ModelNotAllowed(String::new()),
        LlmError::ModelMissing(String::new()),
        LlmError::TooLarge(1),
        LlmError::BadRequest(String::new()),
        LlmError::KeyUnavailable(String::new()),
        LlmError::Refused(DenyReason::PortNotAllowed { port: 1 }),
        LlmError::Connect(crate::base::dialer::ConnectError::NoAddress),
        LlmError::Tls(String::new()),
        LlmError::Timeout(1),
        LlmError::Protocol(String::new()),
    ];
    let all = every_code();
    for e in errors {
        assert!(all.contains(&e.code()), "{} must be listed", e.code());
    }
}
