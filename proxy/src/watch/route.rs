//! `GET|POST /v1/watch/<name>[?dry_run=1]` on the api listener: the one-line cron script's
//! endpoint. 200 with the run's text, or a non-2xx status with a one-line message.

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;

use super::Watches;
use crate::judge::respond::{self, Body};
use crate::live::state::GateState;

/// The path prefix of the route.
pub(crate) const PREFIX: &str = "/v1/watch/";

/// Serve one watch run.
pub(crate) async fn handle(
    gate: &GateState,
    watches: &Watches,
    req: Request<Incoming>,
) -> Response<Body> {
    let name = req
        .uri()
        .path()
        .strip_prefix(PREFIX)
        .unwrap_or_default()
        .to_string();
    let dry_run = is_dry_run(req.uri().query());
    let runtime = gate.runtime.load_full();
    let outcome = watches
        .run(
            &runtime,
            &gate.metrics,
            &gate.own_listeners(),
            &name,
            dry_run,
        )
        .await;
    match outcome {
        Ok(out) => respond::text(StatusCode::OK, "text/plain; charset=utf-8", out.text),
        Err(e) => {
            tracing::warn!(watch = %name, code = e.code(), error = %e, "watch run failed");
            let coded = respond::Coded {
                code: e.code(),
                status: e.status(),
                message: format!("watch {name}: {e}"),
            };
            respond::refuse(&coded, respond::Shape::Text)
        }
    }
}

/// `dry_run=1` (or `true`) in the query string.
pub(crate) fn is_dry_run(query: Option<&str>) -> bool {
    query
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, "1"))))
        .any(|(k, v)| k == "dry_run" && matches!(v, "1" | "true" | "yes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dry_run_is_read_from_the_query_string() {
        let cases = [
            (None, false),
            (Some("dry_run=1"), true),
            (Some("a=b&dry_run=true"), true),
            (Some("dry_run"), true),
            (Some("dry_run=0"), false),
            (Some("dry_runs=1"), false),
        ];
        for (query, want) in cases {
            assert_eq!(is_dry_run(query), want, "query {query:?} must give {want}");
        }
    }
}
