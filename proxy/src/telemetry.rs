//! Tracing setup and the canonical decision line.
//!
//! Every extract item produces exactly one `egress.decision` event at info (allow) or warn
//! (deny) with the fields below; everything else stays at debug. URLs are logged without
//! query, fragment or userinfo, so a refused secret is never written to a log.

use tracing_subscriber::EnvFilter;

/// Field: the gate that decided (`secret_url`, `ssrf`, `website_blocklist`, `vendor`, ...).
pub const GATE: &str = "gate";
/// Field: `allow`, `deny` or `report`.
pub const VERDICT: &str = "verdict";
/// Field: the stable reason code.
pub const REASON: &str = "reason";
/// Field: the cache outcome code.
pub const CACHE: &str = "cache";
/// Field: the backend that served (or would have served) the item.
pub const VENDOR: &str = "vendor";
/// Field: the upstream HTTP status, when there was one.
pub const UPSTREAM_STATUS: &str = "upstream_status";
/// Field: time spent on the item, in milliseconds.
pub const DURATION_MS: &str = "duration_ms";

/// Install the JSON subscriber on stderr. `RUST_LOG` overrides `default_level`.
pub fn init(default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// `scheme://host[:port]/path` of a URL: what may appear in logs.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => {
            let host = u.host_str().unwrap_or("");
            match u.port() {
                Some(p) => format!("{}://{host}:{p}{}", u.scheme(), u.path()),
                None => format!("{}://{host}{}", u.scheme(), u.path()),
            }
        }
        Err(_) => "<unparseable>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logged_urls_lose_query_fragment_and_userinfo() {
        assert_eq!(
            redact_url("https://u:p@Example.com:8443/a/b?token=sk-abcdefghijk#frag"),
            "https://example.com:8443/a/b"
        );
        assert_eq!(redact_url("::nope"), "<unparseable>");
    }
}
