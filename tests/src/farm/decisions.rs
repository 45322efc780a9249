//! The gate's `egress.decision` lines, captured in process: a `tracing` layer that keeps the
//! fields of every decision event, so the farm compares what each server parsed with what the
//! gate decided, request by request.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// One decision line: its fields as text.
#[derive(Clone, Debug, Default)]
pub struct Decision {
    /// Every field the line carried (`listener`, `method`, `verdict`, `url`, `client`, ...).
    pub fields: BTreeMap<String, String>,
}

/// A request the gate let through, as the farm compares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allowed {
    /// The request method.
    pub method: String,
    /// The path of the request URL (the logged URL carries no query).
    pub path: String,
    /// `host:port` of the request URL: the `Host` the upstream is sent.
    pub host: String,
    /// Request body bytes relayed.
    pub body_len: u64,
}

/// The captured decisions; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Decisions {
    lines: Arc<Mutex<Vec<Decision>>>,
}

struct Capture(Decisions);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

// === impl Decision ===

impl Decision {
    /// A field's text.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    /// The request, when the gate let it through.
    pub fn allowed(&self) -> Option<Allowed> {
        if self.get("verdict")? != "allow" {
            return None;
        }
        let url = self.get("url")?;
        let rest = url.strip_prefix("http://")?;
        let (host, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        Some(Allowed {
            method: self.get("method")?.to_string(),
            path: path.to_string(),
            host: host.to_string(),
            body_len: self.get("request_bytes")?.parse().ok()?,
        })
    }
}

// === impl Decisions ===

impl Decisions {
    /// The capture installed as the process's global subscriber (once; later calls share it).
    pub fn install() -> Self {
        static GLOBAL: OnceLock<Decisions> = OnceLock::new();
        GLOBAL
            .get_or_init(|| {
                let decisions = Decisions::default();
                let subscriber = tracing_subscriber::registry().with(Capture(decisions.clone()));
                let _ = tracing::subscriber::set_global_default(subscriber);
                decisions
            })
            .clone()
    }

    /// How many decisions were captured so far.
    pub fn mark(&self) -> usize {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The decisions since `mark` about requests from the client `addr` (`ip:port`).
    pub fn of_client(&self, mark: usize, addr: &str) -> Vec<Decision> {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines[mark..]
            .iter()
            .filter(|d| d.get("client") == Some(addr))
            .cloned()
            .collect()
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().target() != "egress.decision" {
            return;
        }
        let mut d = Decision::default();
        event.record(&mut Fields(&mut d.fields));
        self.0
            .lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(d);
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_string(), value.to_string());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_string(), value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}
