//! THE extract pipeline: the one place to read the order of the gates.
//!
//! ```text
//!  E0 parse items ──► E1 secret URL ──► E2 SSRF ──► E3 backend ──► E4 blocklist ──► E5 cache ──► E6 vendor ──► E7 assemble
//!  per index          whole call        per item    (at load)      per item         (shared      per item     per item
//!                                                                                     volume)
//! ```
//!
//! Each gate runs for every URL; a cache hit never skips a gate. Gates decide, this module
//! orders them and turns their verdicts into rows; `respond` turns rows into HTTP.

use std::net::IpAddr;

use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;

use crate::assemble;
use crate::context::TargetUrl;
use crate::gates::website_blocklist::WebsiteBlocklistGate;
use crate::gates::{DenyReason, Gate, Scope, Verdict, parse_items, secret_url, ssrf};
use crate::metrics::{ProxyMetrics, status_class};
use crate::policy::EnforcementMode;
use crate::runtime::Runtime;
use crate::telemetry;
use crate::vendors::{Admitted, HopGate, Page, VendorFailure};

/// One row of an extract result, in Hermes' shape plus fleetgate's fields.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The (normalised) URL; empty for invalid items.
    pub url: String,
    /// Page title.
    pub title: String,
    /// Assembled page text (truncated with footer when over the limit).
    pub content: String,
    /// Error message, `null` on success.
    pub error: Option<String>,
    /// Set when the website blocklist refused the item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked_by_policy: Option<PolicyBlock>,
    /// Stable code of the error (fleetgate field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    /// Whether the content came from the shared cache (fleetgate field).
    pub cached: bool,
    /// The backend that produced the content (fleetgate field).
    pub served_by: Option<String>,
}

/// The `blocked_by_policy` object of a row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PolicyBlock {
    /// Canonical host.
    pub host: String,
    /// Matching rule.
    pub rule: String,
    /// `config` or the shared file path.
    pub source: String,
}

/// What an extract call produced.
#[derive(Clone, Debug, PartialEq)]
pub enum ExtractOutcome {
    /// A whole-call refusal (E1): nothing was fetched.
    Refused(DenyReason),
    /// One row per input item (after the five-item cap), in input order.
    Rows(Vec<Row>),
}

/// The result of running the URL gates without fetching (`check-url`).
#[derive(Clone, Debug, PartialEq)]
pub struct UrlCheck {
    /// The checked URL as given.
    pub url: String,
    /// The refusal, if any.
    pub refusal: Option<DenyReason>,
    /// Addresses E2 checked.
    pub addresses: Vec<IpAddr>,
}

/// The pipeline over one runtime snapshot.
#[derive(Clone, Copy, Debug)]
pub struct Pipeline<'a> {
    rt: &'a Runtime,
    metrics: &'a ProxyMetrics,
}

// === impl Pipeline ===

impl<'a> Pipeline<'a> {
    /// A pipeline for one request, over one consistent runtime.
    pub fn new(rt: &'a Runtime, metrics: &'a ProxyMetrics) -> Self {
        Self { rt, metrics }
    }

    /// Run an extract call: `urls` as the caller sent it, optional `char_limit`.
    pub async fn extract(&self, urls: &Value, char_limit: Option<&Value>) -> ExtractOutcome {
        let limit = assemble::clamp_char_limit(char_limit, self.rt.policy.web.char_limit);
        // E0: parse items; invalid ones keep their index as error rows.
        let items: Vec<Result<TargetUrl, DenyReason>> = parse_items::parse_items(urls)
            .into_iter()
            .map(|item| item.map(|raw| TargetUrl::new(&raw)))
            .collect();
        // E1: a secret anywhere refuses the whole call before any DNS or fetch.
        for target in items.iter().flatten() {
            let verdict = secret_url::SecretUrlGate.check(target);
            self.record("secret_url", &verdict);
            if let Verdict::Deny(reason) = verdict {
                self.log_item(
                    target,
                    "secret_url",
                    "deny",
                    reason.code(),
                    None,
                    None,
                    Instant::now(),
                );
                self.metrics
                    .extract_items
                    .with_label_values(&[reason.code()])
                    .inc();
                return ExtractOutcome::Refused(reason);
            }
        }
        // E2..E7 per item, concurrently; the output keeps input order.
        let rows = futures_util::future::join_all(items.into_iter().map(|item| async move {
            match item {
                Ok(target) => self.run_item(target, limit).await,
                Err(reason) => self.invalid_row(reason),
            }
        }))
        .await;
        ExtractOutcome::Rows(rows)
    }

    /// Run E1, E2 and E4 on one URL exactly as `extract` would, without fetching.
    pub async fn check_url(&self, raw: &str) -> UrlCheck {
        let target = TargetUrl::new(raw);
        let (refusal, addresses) = match self.admit_target(&target).await {
            Ok(addrs) => (None, addrs),
            Err(reason) => (Some(reason), Vec::new()),
        };
        UrlCheck {
            url: raw.to_string(),
            refusal,
            addresses,
        }
    }

    async fn run_item(&self, target: TargetUrl, limit: usize) -> Row {
        let started = Instant::now();
        // E2: resolve with the gate's resolver, check every answer; E4: the blocklist.
        let addrs = match self.network_gates(&target).await {
            Ok(addrs) => addrs,
            Err((gate, reason)) => {
                self.log_item(&target, gate, "deny", reason.code(), None, None, started);
                return self.deny_row(&target.normalized, reason);
            }
        };
        // E3 was settled when the policy loaded: the backend exists and can extract.
        // E5 (shared cache) and E6 (vendor) — the `direct` backend fetches the page itself.
        let backend = self.rt.policy.web.extract_backend.clone();
        let admitted = Admitted {
            target: target.clone(),
            addrs,
        };
        let fetched = self.rt.direct.fetch(admitted, self).await;
        let status = fetched.as_ref().ok().map(|p| p.status);
        self.metrics
            .vendor_duration
            .with_label_values(&[backend.as_str(), status_class(status)])
            .observe(started.elapsed().as_secs_f64());
        let row = match fetched {
            Ok(page) => self.assemble_row(page, limit, &backend),
            Err(failure) => self.vendor_row(&target, failure, &backend),
        };
        let (verdict, code) = match row.code {
            Some(code) => ("deny", code),
            None => ("allow", "ok"),
        };
        self.log_item(
            &target,
            "vendor",
            verdict,
            code,
            Some(&backend),
            status,
            started,
        );
        row
    }

    /// E2 then E4 for one target; the gate name travels with a refusal for the log line.
    async fn network_gates(
        &self,
        target: &TargetUrl,
    ) -> Result<Vec<IpAddr>, (&'static str, DenyReason)> {
        let egress = &self.rt.policy.egress;
        let checked = ssrf::check_url(target, egress, &self.rt.resolver).await;
        self.record("ssrf", &verdict_of(&checked));
        let addrs = checked.map_err(|r| ("ssrf", r))?;
        let verdict = self.blocklist_verdict(target);
        self.record("website_blocklist", &verdict);
        match verdict {
            Verdict::Deny(reason) => Err(("website_blocklist", reason)),
            _ => Ok(addrs),
        }
    }

    fn blocklist_verdict(&self, target: &TargetUrl) -> Verdict {
        let verdict = WebsiteBlocklistGate {
            list: &self.rt.blocklist,
        }
        .check(target);
        match (verdict, self.rt.policy.blocklist.mode) {
            (Verdict::Deny(reason), EnforcementMode::Report) => Verdict::Report(reason),
            (v, _) => v,
        }
    }

    /// E1 (item scope), E2 and E4: what every redirect hop and `check-url` go through.
    async fn admit_target(&self, target: &TargetUrl) -> Result<Vec<IpAddr>, DenyReason> {
        let verdict = secret_url::SecretUrlGate.check(target);
        self.record("secret_url", &verdict);
        if let Verdict::Deny(reason) = verdict {
            return Err(reason);
        }
        self.network_gates(target).await.map_err(|(_, r)| r)
    }

    fn assemble_row(&self, page: Page, limit: usize, backend: &str) -> Row {
        let assembled = if page.textual {
            assemble::assemble_page(&page.content, limit, &page.url, Some(&self.rt.store))
        } else {
            match assemble::binary::detect_binary(&page.content) {
                Some(_) => assemble::assemble_page(&page.content, limit, &page.url, None),
                None => Err(non_text_message(page.content_type.as_deref())),
            }
        };
        let title = assemble::images::convert_base64_images_to_links(&page.title).into_owned();
        match assembled {
            Ok(assembled) => {
                self.metrics.extract_items.with_label_values(&["ok"]).inc();
                if let Some(t) = assembled.truncation {
                    let outcome = if t.stored { "ok" } else { "failed" };
                    self.metrics
                        .store_writes
                        .with_label_values(&[outcome])
                        .inc();
                }
                let content = assembled.content;
                Row {
                    url: page.url,
                    title,
                    content,
                    error: None,
                    blocked_by_policy: None,
                    code: None,
                    cached: false,
                    served_by: Some(backend.to_string()),
                }
            }
            Err(message) => {
                self.metrics
                    .extract_items
                    .with_label_values(&["binary_content"])
                    .inc();
                Row {
                    url: page.url,
                    title: String::new(),
                    content: String::new(),
                    error: Some(message),
                    blocked_by_policy: None,
                    code: Some("binary_content"),
                    cached: false,
                    served_by: Some(backend.to_string()),
                }
            }
        }
    }

    fn vendor_row(&self, target: &TargetUrl, failure: VendorFailure, backend: &str) -> Row {
        if let VendorFailure::Refused(reason) = failure {
            return self.deny_row(&target.normalized, reason);
        }
        self.metrics
            .extract_items
            .with_label_values(&[failure.code()])
            .inc();
        Row {
            url: target.normalized.clone(),
            title: String::new(),
            content: String::new(),
            error: Some(format!("Direct fetch failed: {failure}")),
            blocked_by_policy: None,
            code: Some(failure.code()),
            cached: false,
            served_by: Some(backend.to_string()),
        }
    }

    fn deny_row(&self, url: &str, reason: DenyReason) -> Row {
        self.metrics
            .extract_items
            .with_label_values(&[reason.code()])
            .inc();
        let blocked_by_policy = match &reason {
            DenyReason::BlockedByPolicy { host, rule, source } => Some(PolicyBlock {
                host: host.clone(),
                rule: rule.clone(),
                source: source.clone(),
            }),
            _ => None,
        };
        Row {
            url: url.to_string(),
            title: String::new(),
            content: String::new(),
            error: Some(reason.message()),
            blocked_by_policy,
            code: Some(reason.code()),
            cached: false,
            served_by: None,
        }
    }

    fn invalid_row(&self, reason: DenyReason) -> Row {
        self.record("parse_items", &Verdict::Deny(reason.clone()));
        self.deny_row("", reason)
    }

    fn record(&self, gate: &str, verdict: &Verdict) {
        let (v, reason) = match verdict {
            Verdict::Allow => ("allow", "ok"),
            Verdict::Deny(r) => ("deny", r.code()),
            Verdict::Report(r) => ("report", r.code()),
        };
        self.metrics
            .gate_decisions
            .with_label_values(&[gate, v, reason])
            .inc();
    }

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
        let url = telemetry::redact_url(&target.normalized);
        let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        if verdict == "deny" {
            tracing::warn!(
                target: "egress.decision",
                gate, verdict, reason, url, vendor, upstream_status, duration_ms, cache = "bypass",
                "egress.decision"
            );
        } else {
            tracing::info!(
                target: "egress.decision",
                gate, verdict, reason, url, vendor, upstream_status, duration_ms, cache = "bypass",
                "egress.decision"
            );
        }
    }
}

impl HopGate for Pipeline<'_> {
    async fn admit(&self, url: &str) -> Result<Admitted, DenyReason> {
        let target = TargetUrl::new(url);
        let addrs = self.admit_target(&target).await?;
        Ok(Admitted { target, addrs })
    }
}

fn verdict_of<T>(checked: &Result<T, DenyReason>) -> Verdict {
    match checked {
        Ok(_) => Verdict::Allow,
        Err(r) => Verdict::Deny(r.clone()),
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
    pub fn ends_call(&self) -> bool {
        self.scope() == Scope::Call
    }
}
