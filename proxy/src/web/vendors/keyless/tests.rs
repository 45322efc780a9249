use super::*;
use crate::policy::{VendorSettings, VendorTier};

fn settings(name: &str, tier: VendorTier) -> VendorSettings {
    VendorSettings {
        name: name.into(),
        base_url: None,
        api_key_file: None,
        api_key_env: None,
        timeout: None,
        max_body_bytes: None,
        retries: None,
        search_mode: None,
        model: None,
        allowed_domains: Vec::new(),
        excluded_domains: Vec::new(),
        tier,
        keyless_url: None,
    }
}

fn names(order: &[&KeylessClient]) -> Vec<&'static str> {
    order.iter().map(|c| c.kind().name()).collect()
}

#[test]
fn rate_limit_markers_match_anywhere_and_in_any_case() {
    for message in [
        "Keyless Exa search failed: HTTP 429: slow",
        "Rate Limit reached",
        "rate-limit",
        "RateLimit exceeded",
        "Too Many Requests",
        "monthly quota exceeded",
        "please slow down",
    ] {
        assert!(rate_limited(message), "{message}");
    }
    for message in ["HTTP 404: not found", "Unrecognized MCP response shape"] {
        assert!(!rate_limited(message), "{message}");
    }
}

#[test]
fn vendor_refusals_are_401_402_403_and_5xx_at_the_start() {
    let refusals = [
        "HTTP 402: payment required",
        "Keyless Exa search failed: HTTP 401: no",
        "keyless parallel search failed: status code=503",
        "http status: 500",
        "Status 403",
        "client error '403'",
        "error code: 502 bad gateway",
    ];
    for message in refusals {
        assert!(vendor_refusal(message), "{message}");
    }
    let others = [
        "HTTP 404: not found",
        "HTTP 400: bad query",
        "request failed: connection refused",
        "the upstream said HTTP 503",
        "HTTP 5000",
        "Keyless Exa extract failed: HTTP 503",
    ];
    for message in others {
        assert!(!vendor_refusal(message), "{message}");
    }
}

#[test]
fn a_pinned_walk_starts_at_its_member_and_leaves_the_cursor_alone() {
    let ring = Ring::new(&[]);
    let pinned = ring
        .order(Start::At(BackendKind::Firecrawl))
        .expect("a walk");
    assert_eq!(names(&pinned), ["firecrawl", "keenable", "exa", "parallel"]);
    let outside = ring.order(Start::At(BackendKind::Tavily)).expect("a walk");
    assert_eq!(
        names(&outside),
        ["exa", "parallel", "firecrawl", "keenable"],
        "a backend outside the ring starts at exa"
    );
    let after = ring
        .order(Start::After(BackendKind::Parallel))
        .expect("a walk");
    assert_eq!(
        names(&after),
        ["firecrawl", "keenable", "exa"],
        "a member already tried keylessly is not asked again"
    );
}

#[test]
fn unpinned_walks_rotate_through_every_member() {
    let ring = Ring::new(&[]);
    let firsts: Vec<&str> = (0..8)
        .map(|_| names(&ring.order(Start::Cursor).expect("a walk"))[0])
        .collect();
    // Each walk starts one member further than the previous one, wrapping around.
    for pair in firsts.windows(2) {
        let at = |n: &str| RING.iter().position(|k| k.name() == n).expect("a member");
        assert_eq!((at(pair[0]) + 1) % 4, at(pair[1]), "{firsts:?}");
    }
}

#[test]
fn paid_members_are_dropped_and_an_all_paid_ring_says_so() {
    let ring = Ring::new(&[
        settings("exa", VendorTier::Paid),
        settings("firecrawl", VendorTier::Paid),
    ]);
    let order = ring.order(Start::At(BackendKind::Exa)).expect("a walk");
    assert_eq!(names(&order), ["parallel", "keenable"]);
    let all_paid: Vec<VendorSettings> = RING
        .iter()
        .map(|k| settings(k.name(), VendorTier::Paid))
        .collect();
    let err = Ring::new(&all_paid)
        .order(Start::Cursor)
        .expect_err("no member is left");
    assert_eq!(err.message, PINNED_PAID);
}

#[test]
fn exa_search_text_becomes_rows_with_highlights_as_description() {
    let text = "Title: Fleet guide\nURL: https://docs.example/guide\nPublished: 2026-01-01\n\
                Author: someone\nHighlights:\nRun agents safely.\nGate every fetch.\n---\n\
                Title: No link here\nHighlights: skipped\n---\n\
                Title: Second\nURL: https://b.example/\nHighlights: one line";
    let rows = exa_blocks(text);
    assert_eq!(rows.len(), 2, "a block without a URL is skipped: {rows:?}");
    assert_eq!(rows[0].title, "Fleet guide");
    assert_eq!(rows[0].url, "https://docs.example/guide");
    assert_eq!(rows[0].description, "Run agents safely. Gate every fetch.");
    assert_eq!(rows[1].description, "one line");
    assert_eq!(exa_title("intro\n# Page heading\nbody"), "Page heading");
    assert_eq!(exa_title("Title: From meta\n# later"), "From meta");
}

#[test]
fn parallel_payloads_are_parsed_or_refused() {
    let rows = parallel_search_rows(
        r#"{"results":[{"url":"https://a.example/","title":"A","excerpts":["x","y"]}]}"#,
    )
    .expect("a results list");
    assert_eq!(rows[0].description, "x y");
    assert!(parallel_search_rows("not json").is_err());
    assert!(parallel_search_rows(r#"{"results": 3}"#).is_err());
    let rows = parallel_extract_rows(
        r#"{"results":[{"url":"https://a.example/","title":"A","excerpts":["p1","p2"]}],
            "errors":[{"url":"https://b.example/","error_type":"fetch_failed"}]}"#,
    )
    .expect("an object");
    assert_eq!(rows.len(), 2);
    let page = rows[0].1.as_ref().expect("a page");
    assert_eq!(page.content, "p1\n\np2", "excerpts joined by a blank line");
    let failed = rows[1].1.as_ref().expect_err("an error row");
    assert_eq!(failed.to_string(), "fetch_failed");
}
