//! The response body relayed to the agent frame by frame, with the served tier scanned from
//! each data frame as it passes; when the body ends (or the agent goes away) the tier is
//! recorded once for the request's role.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};

use super::LlmContext;
use super::tier::TierScanner;

/// What to record when the body ends.
#[derive(Debug)]
pub struct Finish {
    /// The gate and the route state the record goes to.
    pub cx: LlmContext,
    /// Role the request was observed under.
    pub role: String,
    /// Bounded role label.
    pub role_label: String,
    /// Sequence number of the request in the store.
    pub seq: u64,
    /// `2xx`, `4xx`, ...
    pub status_class: &'static str,
    /// The service tier pinned for the role, if any: a served tier that differs is counted.
    pub pinned_tier: Option<String>,
}

/// An upstream body that observes the served tier while streaming.
#[derive(Debug)]
pub struct ObservingBody {
    inner: Incoming,
    scanner: TierScanner,
    finish: Option<Finish>,
}

// === impl ObservingBody ===

impl ObservingBody {
    /// Wrap `inner`; `finish` runs once at the end.
    pub fn new(inner: Incoming, finish: Finish) -> Self {
        Self {
            inner,
            scanner: TierScanner::new(),
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
