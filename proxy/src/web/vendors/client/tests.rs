use super::*;

fn status(code: u16, retry_after: Option<u64>) -> CallError {
    CallError::Status {
        status: code,
        excerpt: String::new(),
        retry_after: retry_after.map(Duration::from_secs),
    }
}

#[test]
fn only_server_errors_timeouts_broken_connections_and_paced_429s_are_retried() {
    let ms = Duration::from_millis;
    let cases: &[(&str, CallError, u32, Option<Duration>)] = &[
        ("a 500 backs off", status(500, None), 0, Some(ms(200))),
        (
            "a 503 backs off longer later",
            status(503, None),
            1,
            Some(ms(400)),
        ),
        ("a 400 is final", status(400, None), 0, None),
        ("a 401 is final", status(401, None), 0, None),
        (
            "a 404 is final even with Retry-After",
            status(404, Some(1)),
            0,
            None,
        ),
        (
            "a 429 without Retry-After is final",
            status(429, None),
            0,
            None,
        ),
        (
            "a 429 waits as told",
            status(429, Some(3)),
            0,
            Some(ms(3000)),
        ),
        (
            "a 429 asking too long is final",
            status(429, Some(31)),
            0,
            None,
        ),
        (
            "a timeout backs off",
            CallError::Timeout(ms(10)),
            0,
            Some(ms(200)),
        ),
        (
            "a reset connection backs off",
            CallError::Transport {
                detail: "reset".into(),
                retryable: true,
            },
            0,
            Some(ms(200)),
        ),
        (
            "a decode error is final",
            CallError::Transport {
                detail: "bad gzip".into(),
                retryable: false,
            },
            0,
            None,
        ),
        (
            "an oversized body is final",
            CallError::TooLarge(10),
            0,
            None,
        ),
        ("spent retries are final", status(500, None), 2, None),
    ];
    for (name, err, done, want) in cases {
        assert_eq!(retry_delay(err, *done, 2), *want, "{name}");
    }
}

#[test]
fn backoff_doubles_up_to_its_cap() {
    let got: Vec<u128> = (0..7).map(|n| backoff(n).as_millis()).collect();
    assert_eq!(
        got,
        [200, 400, 800, 1600, 3200, 5000, 5000],
        "backoff must double then cap"
    );
}

#[tokio::test(start_paused = true)]
async fn retries_wait_their_backoff_and_stop_after_the_budget() {
    let start = tokio::time::Instant::now();
    let mut calls = 0u32;
    let result: Result<(), CallError> = with_retries(3, || {
        calls += 1;
        async { Err(status(502, None)) }
    })
    .await;
    assert_eq!(calls, 4, "one attempt plus three retries must be made");
    assert_eq!(
        result,
        Err(status(502, None)),
        "the last failure must be returned"
    );
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(200 + 400 + 800),
        "the waits must be exactly the backoff schedule"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_that_succeeds_ends_the_loop() {
    let start = tokio::time::Instant::now();
    let mut calls = 0u32;
    let result = with_retries(5, || {
        calls += 1;
        let n = calls;
        async move {
            if n < 2 {
                Err(status(429, Some(7)))
            } else {
                Ok(n)
            }
        }
    })
    .await;
    assert_eq!(
        result,
        Ok(2),
        "the second attempt's success must be returned"
    );
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(7),
        "a 429 must wait its Retry-After"
    );
}

#[test]
fn endpoint_urls_keep_the_base_path_and_drop_its_query() {
    let cases = [
        (
            "https://api.x.ai/v1",
            "/responses",
            "https://api.x.ai/v1/responses",
        ),
        (
            "https://api.x.ai/v1/",
            "responses",
            "https://api.x.ai/v1/responses",
        ),
        ("http://h:8080", "/search", "http://h:8080/search"),
        ("http://h/searx/?x=1#f", "/search", "http://h/searx/search"),
    ];
    for (base, path, want) in cases {
        let endpoint = Endpoint::new(Url::parse(base).expect("base must parse"));
        assert_eq!(endpoint.url(path).as_str(), want, "{base} + {path}");
    }
}

#[test]
fn blank_keys_count_as_missing_and_debug_never_shows_a_key() {
    let base = Url::parse("https://api.tavily.com").expect("base must parse");
    assert_eq!(Endpoint::new(base.clone()).with_key("  ").key(), None);
    let keyed = Endpoint::new(base).with_key(" tvly-secret ");
    assert_eq!(keyed.key(), Some("tvly-secret"), "keys must be trimmed");
    let shown = format!("{keyed:?}");
    assert!(!shown.contains("tvly-secret"), "Debug must redact: {shown}");
    assert!(
        shown.contains("<redacted>"),
        "Debug must say a key is set: {shown}"
    );
}

#[test]
fn error_details_name_the_status_and_a_bounded_excerpt() {
    let long = format!("  {{\"error\":\"bad key\"}}{}", "x".repeat(5000));
    let err = CallError::Status {
        status: 401,
        excerpt: excerpt(long.as_bytes()),
        retry_after: None,
    };
    let detail = err.detail();
    assert!(
        detail.starts_with("HTTP 401: {\"error\":\"bad key\"}"),
        "{detail}"
    );
    assert_eq!(detail.chars().count(), "HTTP 401: ".len() + EXCERPT_CHARS);
    assert_eq!(
        status(502, None).detail(),
        "HTTP 502",
        "an empty body adds nothing"
    );
    assert_eq!(err.kind(), VendorErrorKind::HttpStatus);
    assert_eq!(status(429, None).kind(), VendorErrorKind::RateLimited);
}

#[test]
fn durations_read_like_hermes_timeouts() {
    assert_eq!(seconds(Duration::from_secs(60)), "60s");
    assert_eq!(seconds(Duration::from_millis(250)), "250ms");
}

#[test]
fn every_kind_has_a_unique_code_and_a_source() {
    let mut seen = std::collections::HashSet::new();
    for kind in VendorErrorKind::ALL {
        assert!(seen.insert(kind.code()), "{} must be unique", kind.code());
        assert!(
            super::super::VendorFailure::ALL_CODES.contains(&kind.code()),
            "{} must be listed in VendorFailure::ALL_CODES",
            kind.code()
        );
    }
    assert_eq!(VendorErrorKind::NotConfigured.source(), FailureSource::Gate);
    assert_eq!(VendorErrorKind::HttpStatus.source(), FailureSource::Vendor);
}
