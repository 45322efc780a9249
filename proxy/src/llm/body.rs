//! The response body relayed to the agent frame by frame, with the served tier and the
//! provider's usage scanned from each data frame as it passes; when the body ends (or the
//! agent goes away) the tier is recorded once for the request's role, and a successful
//! answer's usage and cost are counted ([`super::usage`], `llm.prices`) and charged to the
//! role's spend ([`super::spend`]).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};

use super::LlmContext;
use super::spend::Charge;
use super::tier::TierScanner;
use super::usage::UsageScanner;
use crate::policy::llm::{ProviderKind, Usage};

/// What to record when the body ends.
#[derive(Debug)]
pub(crate) struct Finish {
    /// The gate and the route state the record goes to.
    pub(crate) cx: LlmContext,
    /// Role the request was observed under.
    pub(crate) role: String,
    /// Bounded role label.
    pub(crate) role_label: String,
    /// Bounded model label.
    pub(crate) model_label: String,
    /// The model the request named (priced).
    pub(crate) model: Option<String>,
    /// The tier the request asked for (priced when the answer names none).
    pub(crate) requested_tier: Option<String>,
    /// How the provider reports usage.
    pub(crate) kind: ProviderKind,
    /// Sequence number of the request in the store.
    pub(crate) seq: u64,
    /// `2xx`, `4xx`, ...
    pub(crate) status_class: &'static str,
    /// The service tier pinned for the role, if any: a served tier that differs is counted.
    pub(crate) pinned_tier: Option<String>,
}

/// An upstream body that observes the served tier while streaming.
#[derive(Debug)]
pub(crate) struct ObservingBody {
    inner: Incoming,
    scanner: TierScanner,
    usage: UsageScanner,
    finish: Option<Finish>,
}

// === impl ObservingBody ===

impl ObservingBody {
    /// Wrap `inner`; `finish` runs once at the end.
    pub(crate) fn new(inner: Incoming, finish: Finish) -> Self {
        Self {
            inner,
            scanner: TierScanner::new(),
            usage: UsageScanner::new(),
            finish: Some(finish),
        }
    }

    fn finish(&mut self) {
        let Some(f) = self.finish.take() else {
            return;
        };
        let served = self.scanner.served();
        f.cx.llm.observations.record_served(&f.role, f.seq, served);
        if let (Some(pinned), Some(served)) = (&f.pinned_tier, served)
            && pinned != served
        {
            let tier = super::request_facts::tier_label(Some(served));
            f.cx.llm
                .metrics
                .tier_mismatches
                .with_label_values(&[f.role_label.as_str(), tier])
                .inc();
        }
        f.cx.llm
            .metrics
            .responses
            .with_label_values(&[
                f.role_label.as_str(),
                f.status_class,
                super::request_facts::tier_label(served),
            ])
            .inc();
        if f.status_class == "2xx" {
            let usage = self.usage.usage(f.kind);
            let tier = served.map(str::to_string).or(f.requested_tier.clone());
            charge(&f, usage, tier.as_deref());
        }
    }
}

/// Count a successful answer's usage and cost and charge them to the role's spend.
fn charge(f: &Finish, usage: Option<Usage>, tier: Option<&str>) {
    let rt = f.cx.gate.runtime.load();
    let policy = &rt.policy.llm;
    let m = &f.cx.llm.metrics;
    let (role, model_label) = (f.role_label.as_str(), f.model_label.as_str());
    let now = crate::base::clock::now_secs();
    let Some(usage) = usage else {
        m.usage_unknown.with_label_values(&[role, "no_usage"]).inc();
        tracing::debug!(
            event = "llm.usage", role = %f.role, model = model_label, usage = "unknown",
            "the answer carried no usage: tokens and cost not counted"
        );
        f.cx.llm.spend.record(&f.role, Charge::default(), now);
        return;
    };
    let input_total = usage.input + usage.cache_read + usage.cache_write;
    m.token_usage
        .with_label_values(&["input", model_label, role])
        .observe(input_total as f64);
    m.token_usage
        .with_label_values(&["output", model_label, role])
        .observe(usage.output as f64);
    for (kind, n) in [
        ("input", usage.input),
        ("cache_read", usage.cache_read),
        ("cache_write", usage.cache_write),
        ("output", usage.output),
        ("reasoning", usage.reasoning),
    ] {
        if n > 0 {
            m.tokens
                .with_label_values(&[role, model_label, kind])
                .inc_by(n);
        }
    }
    let usd = f
        .model
        .as_deref()
        .and_then(|model| policy.prices.cost(model, &usage, tier));
    match usd {
        Some(usd) => m.cost.with_label_values(&[role, model_label]).inc_by(usd),
        None => m.usage_unknown.with_label_values(&[role, "unpriced"]).inc(),
    }
    // Debug level: a line per call costs the route's time to first byte more than its 10 %
    // budget on a busy node (benchmarks.md); the metrics carry every token and dollar.
    tracing::debug!(
        event = "llm.usage", role = %f.role, model = model_label, input = usage.input,
        cache_read = usage.cache_read, cache_write = usage.cache_write, output = usage.output,
        reasoning = usage.reasoning, usd = usd.unwrap_or(f64::NAN), tier = tier.unwrap_or("unset"),
        "llm call usage"
    );
    let spend = &f.cx.llm.spend;
    spend.record(
        &f.role,
        Charge {
            usd,
            tokens: Some(usage.total()),
        },
        now,
    );
    publish_spend(&f.cx, policy, now);
}

/// Set the spend and budget gauges from the ledger and the policy.
pub(crate) fn publish_spend(cx: &LlmContext, policy: &crate::policy::llm::LlmPolicy, now: u64) {
    let m = &cx.llm.metrics;
    // A new UTC day starts without yesterday's roles.
    m.spend.reset();
    m.budget.reset();
    for (role, spent) in cx.llm.spend.snapshot(now).roles {
        m.spend.with_label_values(&[role.as_str()]).set(spent.usd);
    }
    for (scope, map) in [
        ("pod", &policy.budgets.pod),
        ("namespace", &policy.budgets.namespace),
    ] {
        for (role, b) in map {
            if let Some(cap) = b.daily_usd {
                m.budget.with_label_values(&[role.as_str(), scope]).set(cap);
            }
        }
    }
}

impl Body for ObservingBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.scanner.feed(data);
                    this.usage.feed(data);
                }
            }
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => this.finish(),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for ObservingBody {
    fn drop(&mut self) {
        self.finish();
    }
}
