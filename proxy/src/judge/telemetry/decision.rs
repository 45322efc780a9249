//! The one `egress.decision` line: every listener fills the same fields and this module writes
//! them, so a log query never depends on which listener decided.
//!
//! Every line carries every field, `null` where a listener has nothing to say (`vendor` on the
//! forward proxy, `upstream` before a dial, `original_dst` off the transparent listener, `sni`
//! where no TLS ClientHello was read).
//! Lines are built by hand and queued to the writer thread (the generic JSON formatter cost
//! more than the relay itself); without a queue (a one-shot command) they go through `tracing`.

use std::fmt::Display;
use std::net::SocketAddr;

use tokio::time::Instant;

use super::line::JsonLine;

/// One decision about one request, connection or extract item.
#[derive(Clone, Copy)]
pub(crate) struct DecisionLine<'a> {
    /// The listener: `api`, `forward_proxy`, `transparent`.
    pub(crate) listener: &'a str,
    /// What was asked: `extract`, `http`, `connect`, `tls`, `unknown`.
    pub(crate) proxy_type: &'a str,
    /// The HTTP method, when there was a request head.
    pub(crate) method: Option<&'a str>,
    /// The gate that decided (the listener's own name when every gate allowed).
    pub(crate) gate: &'a str,
    /// `allow`, `deny` or `report`.
    pub(crate) verdict: &'a str,
    /// The stable code (`ok` when allowed).
    pub(crate) reason: &'a str,
    /// The redacted URL, or `host:port`; formatted only when the line is written.
    pub(crate) url: &'a (dyn Display + Sync),
    /// The client's address.
    pub(crate) client: Option<SocketAddr>,
    /// The vendor backend that served an extract item.
    pub(crate) vendor: Option<&'a str>,
    /// The checked address the gate dialled.
    pub(crate) upstream: Option<SocketAddr>,
    /// The upstream's HTTP status.
    pub(crate) upstream_status: Option<u16>,
    /// Request body bytes relayed upstream.
    pub(crate) request_bytes: Option<u64>,
    /// The shared cache's outcome (`hit`, `miss`, ...; `bypass` where there is no cache).
    pub(crate) cache: &'a str,
    /// A captured connection's original destination.
    pub(crate) original_dst: Option<SocketAddr>,
    /// When the request arrived.
    pub(crate) started: Instant,
}

impl std::fmt::Debug for DecisionLine<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecisionLine")
            .field("listener", &self.listener)
            .field("gate", &self.gate)
            .field("verdict", &self.verdict)
            .field("reason", &self.reason)
            .field("url", &self.url.to_string())
            .finish_non_exhaustive()
    }
}

// === impl DecisionLine ===

impl DecisionLine<'_> {
    /// Write the line: `WARN` for a refusal or a report, `INFO` for an allow; `sni` is `null`.
    pub(crate) fn write(&self) {
        self.write_with_sni(None);
    }

    /// Write the line with the server name of the TLS ClientHello the connection carried, as
    /// [`shown_sni`] renders it.
    pub(crate) fn write_with_sni(&self, sni: Option<&str>) {
        let allow = self.verdict == "allow";
        let level = if allow {
            tracing::Level::INFO
        } else {
            tracing::Level::WARN
        };
        let enabled = if allow {
            tracing::enabled!(target: "egress.decision", tracing::Level::INFO)
        } else {
            tracing::enabled!(target: "egress.decision", tracing::Level::WARN)
        };
        if !enabled {
            return;
        }
        let duration_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        if super::queue_line(self.json(level, duration_ms, sni)) {
            return;
        }
        let d = self;
        let (client, upstream, original_dst) = (
            d.client.as_ref().map(tracing::field::display),
            d.upstream.as_ref().map(tracing::field::display),
            d.original_dst.as_ref().map(tracing::field::display),
        );
        macro_rules! line {
            ($level:ident) => {
                tracing::$level!(
                    target: "egress.decision",
                    listener = d.listener, proxy_type = d.proxy_type, method = d.method,
                    gate = d.gate, verdict = d.verdict, reason = d.reason, url = %d.url,
                    client, vendor = d.vendor, upstream, upstream_status = d.upstream_status,
                    request_bytes = d.request_bytes, duration_ms, cache = d.cache, original_dst,
                    sni, "egress.decision"
                )
            };
        }
        if allow {
            line!(info);
        } else {
            line!(warn);
        }
    }

    /// The line in the subscriber's JSON shape, every field present.
    fn json(&self, level: tracing::Level, duration_ms: f64, sni: Option<&str>) -> Vec<u8> {
        let mut line = JsonLine::stamped("egress.decision");
        let head = Head {
            level: level.as_str(),
            listener: self.listener,
            proxy_type: self.proxy_type,
            method: self.method,
            gate: self.gate,
            verdict: self.verdict,
            reason: self.reason,
        };
        let copied = KEPT_HEAD.try_with(|kept| {
            let mut kept = kept.borrow_mut();
            if !kept.as_ref().is_some_and(|k| k.is(&head)) {
                *kept = Some(KeptHead::encode(&head));
            }
            if let Some(kept) = kept.as_ref() {
                line.encoded(&kept.bytes);
            }
        });
        if copied.is_err() {
            // A thread past its thread-locals (exiting): encode without keeping.
            line.encoded(&KeptHead::encode(&head).bytes);
        }
        line.display("url", self.url);
        socket(&mut line, "client", self.client.as_ref());
        match self.vendor {
            Some(vendor) => line.str("vendor", vendor),
            None => line.null("vendor"),
        };
        socket(&mut line, "upstream", self.upstream.as_ref());
        line.uint("upstream_status", self.upstream_status.map(u64::from))
            .uint("request_bytes", self.request_bytes)
            .num("duration_ms", duration_ms)
            .str("cache", self.cache);
        socket(&mut line, "original_dst", self.original_dst.as_ref());
        match sni {
            Some(sni) => line.str("sni", sni),
            None => line.null("sni"),
        };
        line.finish()
    }
}

/// The fields from `level` to `reason`: the same for every allowed request a listener relays of
/// one kind, so a worker encodes them once and copies them into the lines that follow.
struct Head<'a> {
    level: &'a str,
    listener: &'a str,
    proxy_type: &'a str,
    method: Option<&'a str>,
    gate: &'a str,
    verdict: &'a str,
    reason: &'a str,
}

/// The [`Head`] a thread's last decision line had, with its encoded fields.
struct KeptHead {
    fields: [String; 6],
    method: Option<String>,
    bytes: Vec<u8>,
}

thread_local! {
    static KEPT_HEAD: std::cell::RefCell<Option<KeptHead>> = const { std::cell::RefCell::new(None) };
}

impl KeptHead {
    fn encode(head: &Head<'_>) -> Self {
        let mut line = JsonLine::fields_only();
        line.str("level", head.level)
            .str("message", "egress.decision")
            .str("listener", head.listener)
            .str("proxy_type", head.proxy_type);
        match head.method {
            Some(method) => line.str("method", method),
            None => line.null("method"),
        };
        line.str("gate", head.gate)
            .str("verdict", head.verdict)
            .str("reason", head.reason);
        let bytes = line.written().to_vec();
        Self {
            fields: [
                head.level,
                head.listener,
                head.proxy_type,
                head.gate,
                head.verdict,
                head.reason,
            ]
            .map(str::to_string),
            method: head.method.map(str::to_string),
            bytes,
        }
    }

    fn is(&self, head: &Head<'_>) -> bool {
        let [level, listener, proxy_type, gate, verdict, reason] = &self.fields;
        level == head.level
            && listener == head.listener
            && proxy_type == head.proxy_type
            && self.method.as_deref() == head.method
            && gate == head.gate
            && verdict == head.verdict
            && reason == head.reason
    }
}

/// The `sni` field for a ClientHello's canonical server name: the name with any secret-shaped
/// token redacted, or only `[redacted:<rule>]` when `secret_rule` judged the name itself (a
/// secret refused or reported in a host is never written out, in any case).
pub(crate) fn shown_sni(name: &str, secret_rule: Option<&str>) -> String {
    match secret_rule {
        Some(rule) => format!("[redacted:{rule}]"),
        None => crate::judge::gates::secret_url::redact_secrets(name).into_owned(),
    }
}

fn socket(line: &mut JsonLine, key: &str, addr: Option<&SocketAddr>) {
    match addr {
        Some(addr) => line.socket(key, addr),
        None => line.null(key),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_carries_every_field_in_one_order() {
        let url = "https://e.com/";
        let line = DecisionLine {
            listener: "api",
            proxy_type: "extract",
            method: None,
            gate: "ssrf",
            verdict: "deny",
            reason: "ip_private_range",
            client: Some("127.0.0.1:5000".parse().unwrap()),
            ..forward_allow(&url)
        };
        let bytes = line.json(tracing::Level::WARN, 1.5, Some("e.com"));
        let value: serde_json::Value = serde_json::from_slice(&bytes).expect("a JSON line");
        let keys: Vec<&str> = value
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut want = vec![
            "timestamp",
            "level",
            "message",
            "listener",
            "proxy_type",
            "method",
            "gate",
            "verdict",
            "reason",
            "url",
            "client",
            "vendor",
            "upstream",
            "upstream_status",
            "request_bytes",
            "duration_ms",
            "cache",
            "original_dst",
            "sni",
            "target",
        ];
        let mut got = keys.clone();
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got, want, "{value}");
        assert_eq!(value["client"], "127.0.0.1:5000");
        assert_eq!(value["vendor"], serde_json::Value::Null);
        assert_eq!(value["reason"], "ip_private_range");
        assert_eq!(value["sni"], "e.com");
        let without = line.json(tracing::Level::WARN, 1.5, None);
        let value: serde_json::Value = serde_json::from_slice(&without).expect("a JSON line");
        assert_eq!(value.get("sni"), Some(&serde_json::Value::Null));
    }

    /// An allowed forward-proxy request for `url`, nothing else known.
    fn forward_allow<'a>(url: &'a (dyn Display + Sync)) -> DecisionLine<'a> {
        DecisionLine {
            listener: "forward_proxy",
            proxy_type: "http",
            method: Some("GET"),
            gate: "forward",
            verdict: "allow",
            reason: "ok",
            url,
            client: None,
            vendor: None,
            upstream: None,
            upstream_status: None,
            request_bytes: None,
            cache: "bypass",
            original_dst: None,
            started: Instant::now(),
        }
    }

    #[test]
    fn lines_in_a_row_carry_their_own_head_whether_it_was_kept_or_not() {
        let url = "http://e.com/";
        let base = forward_allow(&url);
        // Each variant differs from the line before it (the base) in one field of the head.
        let variants = [
            DecisionLine {
                method: Some("PO\"ST"),
                ..base
            },
            DecisionLine {
                method: None,
                ..base
            },
            DecisionLine {
                listener: "transparent",
                ..base
            },
            DecisionLine {
                proxy_type: "connect",
                ..base
            },
            DecisionLine {
                gate: "ssrf",
                ..base
            },
            DecisionLine {
                verdict: "deny",
                ..base
            },
            DecisionLine {
                reason: "ip_private_range",
                ..base
            },
        ];
        let heads: Vec<DecisionLine<'_>> = variants.iter().flat_map(|v| [base, *v]).collect();
        // Level outermost, so consecutive lines differ in one field of the head at a time.
        for level in [tracing::Level::INFO, tracing::Level::WARN] {
            for (i, d) in heads.iter().enumerate() {
                let bytes = d.json(level, 0.5, None);
                let v: serde_json::Value = serde_json::from_slice(&bytes).expect("a JSON line");
                let want = serde_json::json!({
                    "level": level.as_str(), "message": "egress.decision",
                    "listener": d.listener, "proxy_type": d.proxy_type, "method": d.method,
                    "gate": d.gate, "verdict": d.verdict, "reason": d.reason, "url": url,
                });
                for (key, value) in want.as_object().expect("an object") {
                    assert_eq!(&v[key], value, "line {i}, {level}: {key}");
                }
            }
        }
    }

    #[test]
    fn the_same_head_at_another_level_is_not_taken_for_the_kept_one() {
        let url = "http://e.com/";
        let line = DecisionLine {
            verdict: "report",
            ..forward_allow(&url)
        };
        for level in [
            tracing::Level::INFO,
            tracing::Level::WARN,
            tracing::Level::INFO,
        ] {
            let v: serde_json::Value =
                serde_json::from_slice(&line.json(level, 0.5, None)).expect("a JSON line");
            assert_eq!(v["level"], level.as_str());
        }
    }

    #[test]
    fn a_server_name_refused_for_a_secret_is_shown_only_as_its_rule() {
        let token = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
        let host = format!("{token}.example.com");
        assert_eq!(
            shown_sni(&host, Some("github-pat")),
            "[redacted:github-pat]"
        );
        let shown = shown_sni(&host, None);
        assert!(!shown.contains(token), "a token must be redacted: {shown}");
        assert_eq!(shown_sni("example.com", None), "example.com");
    }
}
