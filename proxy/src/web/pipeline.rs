//! THE extract pipeline: the one place to read the order of the gates.
//!
//! ```text
//!  E0 parse items ─► E1 secret URL ─► E2 SSRF ─► E3 backend ─► E4 blocklist ─► E5 cache ─► E6 vendor ─► E7 assemble
//!  per index         whole call       per item   (at load)     per item        shared      batch +      per item
//!                                                                              volume      rescue
//! ```
//!
//! Each gate runs for every URL; a cache hit never skips a gate. Gates decide, this module
//! orders them and turns their verdicts into rows; `respond` and `vendor_fronts` turn rows into HTTP.

use std::net::{IpAddr, SocketAddr};

use serde_json::Value;
use tokio::time::Instant;

use crate::base::dialer::OwnListeners;
use crate::base::target_url::TargetUrl;
use crate::judge::admit::{self, Listener};
use crate::judge::gates::{DenyReason, Scope, Verdict, parse_items};
use crate::judge::metrics::{ProxyMetrics, status_class};
use crate::judge::rules::Rules;
use crate::judge::telemetry::{self, decision::DecisionLine};
use crate::web::Web;
use crate::web::assemble;
use crate::web::vendors::html::Scope as ContentScope;
use crate::web::vendors::{Admitted, Backend, Page, VendorFailure};

mod fetch;
mod rows;
pub(crate) mod search;

pub(crate) use rows::{Results, Row};

/// What an extract call produced.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ExtractOutcome {
    /// A whole-call refusal (E1): nothing was resolved or fetched.
    Refused(DenyReason),
    /// One row per input item (after the five-item cap), in input order.
    Rows(Vec<Row>),
}

/// The result of running the URL gates without fetching (`check-url`).
#[derive(Clone, Debug, PartialEq)]
pub struct UrlCheck {
    /// The checked URL as given.
    pub(crate) url: String,
    /// The refusal, if any.
    pub refusal: Option<DenyReason>,
    /// Addresses E2 checked.
    pub(crate) addresses: Vec<IpAddr>,
}

/// An item that passed E2 and E4 and waits for E5/E6.
#[derive(Clone, Debug)]
struct Pending {
    index: usize,
    admitted: Admitted,
    started: Instant,
    /// The cache outcome code for the decision line (`bypass` until looked up).
    cache: &'static str,
}

/// The pipeline over one runtime snapshot.
#[derive(Clone, Copy, Debug)]
pub struct Pipeline<'a> {
    rules: &'a Rules,
    web: &'a Web,
    metrics: &'a ProxyMetrics,
    /// The api client, for the decision lines.
    client: Option<SocketAddr>,
    /// The gate's own listeners: the `direct` backend never dials one.
    own: Option<&'a OwnListeners>,
    /// What part of a page the `direct` backend converts.
    scope: ContentScope,
}

// === impl Pipeline ===

impl<'a> Pipeline<'a> {
    /// A pipeline for one request, over one policy's rules and web tools (the two halves of
    /// one runtime, so one consistent policy).
    pub fn new(rules: &'a Rules, web: &'a Web, metrics: &'a ProxyMetrics) -> Self {
        Self {
            rules,
            web,
            metrics,
            client: None,
            own: None,
            scope: ContentScope::from_only_main(rules.policy.web.only_main_content),
        }
    }

    /// The same pipeline converting pages with `scope` (a call's own choice); `None` keeps
    /// the policy's `web.onlyMainContent`.
    pub(crate) fn with_scope(mut self, scope: Option<ContentScope>) -> Self {
        if let Some(scope) = scope {
            self.scope = scope;
        }
        self
    }

    /// The same pipeline refusing fetches that reach one of `own` (a loop into the gate).
    pub(crate) fn with_own(mut self, own: &'a OwnListeners) -> Self {
        self.own = Some(own);
        self
    }

    /// The same pipeline serving the api client at `client`.
    pub(crate) fn for_client(mut self, client: Option<SocketAddr>) -> Self {
        self.client = client;
        self
    }

    /// Run an extract call: `urls` as the caller sent it, optional `char_limit`.
    pub(crate) async fn extract(&self, urls: &Value, char_limit: Option<&Value>) -> ExtractOutcome {
        let limit = assemble::clamp_char_limit(char_limit, self.rules.policy.web.char_limit);
        // E0: parse items; invalid ones keep their index as error rows.
        let items: Vec<Result<TargetUrl, DenyReason>> = parse_items::parse_items(urls)
            .into_iter()
            .map(|item| item.map(|raw| TargetUrl::new(&raw)))
            .collect();
        // E1: a secret anywhere refuses the whole call before any DNS query or fetch.
        if let Some(reason) = self.secret_gate(&items) {
            return ExtractOutcome::Refused(reason);
        }
        let mut rows: Vec<Option<Row>> = vec![None; items.len()];
        // E2 (resolve + check every answer) and E4 (blocklist), per item, concurrently.
        let gated = futures_util::future::join_all(
            items
                .into_iter()
                .enumerate()
                .map(|(index, item)| async move { (index, self.admit_item(item).await) }),
        )
        .await;
        let mut pending = Vec::new();
        for (index, result) in gated {
            match result {
                Ok((admitted, started)) => pending.push(Pending {
                    index,
                    admitted,
                    started,
                    cache: "bypass",
                }),
                Err(row) => rows[index] = Some(row),
            }
        }
        // E3 was settled when the policy loaded. E5 + E6: cache, then the backend (with one
        // rescue pass when it fails every URL); E7 assembles each page.
        for (index, row) in self.fetch_and_assemble(pending, limit).await {
            rows[index] = Some(row);
        }
        ExtractOutcome::Rows(rows.into_iter().flatten().collect())
    }

    /// Run E1, E2 and E4 on one URL exactly as `extract` would, without fetching.
    pub async fn check_url(&self, raw: &str) -> UrlCheck {
        let (refusal, addresses) = match self.admit_as(Listener::Recheck, raw).await {
            Ok(admitted) => (None, admitted.addrs),
            Err(reason) => (Some(reason), Vec::new()),
        };
        UrlCheck {
            url: raw.to_string(),
            refusal,
            addresses,
        }
    }

    /// E1 over every valid item, in order: the first hit refuses the call.
    fn secret_gate(&self, items: &[Result<TargetUrl, DenyReason>]) -> Option<DenyReason> {
        for target in items.iter().flatten() {
            match admit::secrets(self.rules, self.metrics, target) {
                Ok(admission) => {
                    for (gate, reason) in admission.reported {
                        self.log_item(
                            target,
                            gate,
                            "report",
                            reason.code(),
                            None,
                            None,
                            Instant::now(),
                        );
                    }
                }
                Err(refusal) => {
                    let reason = refusal.reason;
                    self.log_item(
                        target,
                        refusal.gate,
                        "deny",
                        reason.code(),
                        None,
                        None,
                        Instant::now(),
                    );
                    self.count_outcome(reason.code());
                    return Some(reason);
                }
            }
        }
        None
    }

    /// E0's verdict, then E2 and E4 for one item.
    async fn admit_item(
        &self,
        item: Result<TargetUrl, DenyReason>,
    ) -> Result<(Admitted, Instant), Row> {
        let started = Instant::now();
        let target = match item {
            Ok(target) => target,
            Err(reason) => {
                self.record("parse_items", &Verdict::Deny(reason.clone()));
                self.count_outcome(reason.code());
                return Err(Row::denied("", &reason));
            }
        };
        match admit::url(self.rules, self.metrics, Listener::ExtractItem, &target).await {
            Ok(admission) => Ok((
                Admitted {
                    target,
                    addrs: admission.addrs,
                },
                started,
            )),
            Err(refusal) => {
                let reason = refusal.reason;
                self.log_item(
                    &target,
                    refusal.gate,
                    "deny",
                    reason.code(),
                    None,
                    None,
                    started,
                );
                self.count_outcome(reason.code());
                Err(Row::denied(&target.normalized, &reason))
            }
        }
    }

    /// `listener`'s gates on one URL: a redirect hop of the gate's own fetch (`Fetch`), a
    /// vendor's final URL or `check-url` (`Recheck`).
    pub(crate) async fn admit_as(
        &self,
        listener: Listener,
        url: &str,
    ) -> Result<Admitted, DenyReason> {
        let target = TargetUrl::new(url);
        let admission = admit::url(self.rules, self.metrics, listener, &target)
            .await
            .map_err(|r| r.reason)?;
        Ok(Admitted {
            target,
            addrs: admission.addrs,
        })
    }

    /// E7 for one fetched page: binary check, images, truncate-and-store.
    fn assemble_row(&self, page: Page, limit: usize, backend: &str) -> Row {
        let status = Some(page.status);
        let assembled = if page.textual {
            assemble::assemble_page(&page.content, limit, &page.url, Some(&self.web.store))
        } else {
            match assemble::binary::detect_binary(&page.content) {
                Some(_) => assemble::assemble_page(&page.content, limit, &page.url, None),
                None => Err(non_text_message(page.content_type.as_deref())),
            }
        };
        match assembled {
            Ok(assembled) => {
                self.count_outcome("ok");
                if let Some(t) = assembled.truncation {
                    let outcome = if t.stored { "ok" } else { "failed" };
                    self.metrics
                        .store_writes
                        .with_label_values(&[outcome])
                        .inc();
                }
                let title =
                    assemble::images::convert_base64_images_to_links(&page.title).into_owned();
                Row::page(&page.url, title, assembled.content, backend, status)
            }
            Err(message) => {
                self.count_outcome("binary_content");
                Row::unassembled(&page.url, message, backend, status)
            }
        }
    }

    fn record(&self, gate: &str, verdict: &Verdict) {
        self.metrics.count_verdict(gate, verdict);
    }

    fn count_outcome(&self, code: &str) {
        self.metrics.extract_items.with_label_values(&[code]).inc();
    }

    fn observe_vendor(&self, backend: &Backend, status: Option<u16>, started: Instant) {
        self.metrics
            .vendor_duration
            .with_label_values(&[backend.name(), status_class(status)])
            .observe(started.elapsed().as_secs_f64());
    }

    /// The canonical `egress.decision` line for one item.
    #[allow(clippy::too_many_arguments)]
    fn log_item(
        &self,
        target: &TargetUrl,
        gate: &str,
        verdict: &str,
        reason: &str,
        vendor: Option<&str>,
        upstream_status: Option<u16>,
        started: Instant,
    ) {
        self.log_decision(
            target,
            gate,
            verdict,
            reason,
            vendor,
            upstream_status,
            "bypass",
            started,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn log_decision(
        &self,
        target: &TargetUrl,
        gate: &str,
        verdict: &str,
        reason: &str,
        vendor: Option<&str>,
        upstream_status: Option<u16>,
        cache: &str,
        started: Instant,
    ) {
        let url = telemetry::redact_url(&target.normalized);
        DecisionLine {
            listener: "api",
            proxy_type: "extract",
            method: None,
            gate,
            verdict,
            reason,
            url: &url,
            client: self.client,
            vendor,
            upstream: None,
            upstream_status,
            request_bytes: None,
            cache,
            original_dst: None,
            started,
        }
        .write();
    }
}

/// The message for a non-text body the binary table does not name.
fn non_text_message(content_type: Option<&str>) -> String {
    format!(
        "URL returned non-text content ({}), not a page. Download it with the terminal (curl -L -o) and use read_file or terminal utilities on the file.",
        content_type.unwrap_or("unknown type")
    )
}

impl DenyReason {
    /// Whether this refusal ends a whole extract call.
    pub(crate) fn ends_call(&self) -> bool {
        self.scope() == Scope::Call
    }
}

impl VendorFailure {
    /// Whether a failure is the failure of one URL only rather than the backend's.
    fn is_gate_refusal(&self) -> bool {
        matches!(self, Self::Refused(_))
    }
}
