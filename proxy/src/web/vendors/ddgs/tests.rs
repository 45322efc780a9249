//! DuckDuckGo result pages: a page with results (an ad, wrapped and plain links), the empty
//! page, and pages whose layout is not one this parser knows.

use super::*;

/// A result page as DuckDuckGo's HTML endpoint serves it, trimmed.
const RESULTS: &str = r##"<!DOCTYPE html><html><body><div id="links" class="results">
<div class="result results_links results_links_deep result--ad">
  <h2 class="result__title"><a class="result__a" href="https://duckduckgo.com/y.js?ad_provider=x">Sponsored thing</a></h2>
  <a class="result__snippet" href="#">Buy now</a>
</div>
<div class="result results_links results_links_deep web-result">
  <div class="links_main links_deep result__body">
    <h2 class="result__title"><a rel="nofollow" class="result__a"
      href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fwww.rust-lang.org%2Flearn%3Fa%3D1%26b%3D2&amp;rut=abc">Learn
      <b>Rust</b></a></h2>
    <a class="result__snippet" href="//duckduckgo.com/l/?uddg=x">Rust's   official
      learning resources.</a>
  </div>
</div>
<div class="result results_links results_links_deep web-result">
  <h2 class="result__title"><a class="result__a" href="https://tokio.rs/">Tokio</a></h2>
</div>
<div class="result results_links web-result">
  <h2 class="result__title"><a class="result__a" href="javascript:alert(1)">Not a page</a></h2>
</div>
</div></body></html>"##;

/// The page DuckDuckGo serves when nothing matches.
const NO_RESULTS: &str = r#"<html><body><div id="links" class="results">
<div class="result results_links results_links_deep result--no-result">
  <div class="no-results">No results.</div>
</div></div></body></html>"#;

#[test]
fn organic_results_are_read_with_their_redirects_unwrapped_and_ads_skipped() {
    let rows = parse(RESULTS).expect("a result page must parse");
    let got: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r.title.as_str(), r.url.as_str(), r.description.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "Learn Rust",
                "https://www.rust-lang.org/learn?a=1&b=2",
                "Rust's official learning resources."
            ),
            ("Tokio", "https://tokio.rs/", ""),
        ],
        "the ad and the non-http link are left out"
    );
}

#[test]
fn the_empty_result_page_is_no_rows_not_an_error() {
    assert_eq!(parse(NO_RESULTS).map(|rows| rows.len()), Ok(0));
}

#[test]
fn a_page_of_another_layout_is_refused_not_guessed() {
    let challenge = "<html><body><form id=\"challenge-form\">Please verify you are human</form>\
                     <a href=\"https://example.com/\">example</a></body></html>";
    let err = parse(challenge).expect_err("a challenge page is not a result page");
    assert!(err.contains("layout may have changed"), "{err}");
    let renamed = RESULTS.replace("result__a", "res-link");
    let err = parse(&renamed).expect_err("results without the known link class");
    assert!(err.contains("have no links"), "{err}");
}

#[test]
fn the_body_limit_is_capped_for_a_result_page() {
    let endpoint = Endpoint::new(
        url::Url::parse(
            crate::web::vendors::BackendKind::Ddgs
                .default_base_url()
                .unwrap_or_default(),
        )
        .expect("a valid URL"),
    );
    let client = DdgsClient::new(endpoint);
    assert_eq!(client.http.endpoint().max_body_bytes, MAX_BODY_BYTES);
}
