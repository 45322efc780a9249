//! A hand-built JSON log line for the per-request hot path, in the same shape the tracing
//! subscriber writes (`timestamp`, `level`, `message`, the fields, `target`), queued straight
//! to the writer thread: formatting it costs a fraction of the generic JSON formatter.

use std::time::{SystemTime, UNIX_EPOCH};

/// One JSON object under construction; fields keep their insertion order.
#[derive(Debug)]
pub struct JsonLine {
    buf: Vec<u8>,
    target: &'static str,
}

// === impl JsonLine ===

impl JsonLine {
    /// A line at `level` (`INFO`, `WARN`, …) for `target`, with `message`.
    pub fn new(level: &str, target: &'static str, message: &str) -> Self {
        let mut line = Self {
            buf: Vec::with_capacity(384),
            target,
        };
        line.buf.extend_from_slice(b"{\"timestamp\":\"");
        write_rfc3339_micros(&mut line.buf, SystemTime::now());
        line.buf.extend_from_slice(b"\"");
        line.str("level", level);
        line.str("message", message);
        line
    }

    /// A string field, JSON-escaped.
    pub fn str(&mut self, key: &str, value: &str) -> &mut Self {
        self.key(key);
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut self.buf, value);
        self
    }

    /// A field from its `Display` form, JSON-escaped.
    pub fn display(&mut self, key: &str, value: &dyn std::fmt::Display) -> &mut Self {
        self.str(key, &value.to_string())
    }

    /// A number field.
    pub fn num(&mut self, key: &str, value: impl serde::Serialize) -> &mut Self {
        self.key(key);
        let _ = serde_json::to_writer(&mut self.buf, &value);
        self
    }

    fn key(&mut self, key: &str) {
        self.buf.push(b',');
        let _ = serde_json::to_writer(&mut self.buf, key);
        self.buf.push(b':');
    }

    /// The finished line, `target` last and a newline, as the subscriber writes it.
    pub fn finish(mut self) -> Vec<u8> {
        let target = self.target;
        self.str("target", target);
        self.buf.extend_from_slice(b"}\n");
        self.buf
    }
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` (UTC), the subscriber's timestamp form.
fn write_rfc3339_micros(buf: &mut Vec<u8>, now: SystemTime) {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = crate::report::time::civil_from_days(i64::try_from(days).unwrap_or(0));
    let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let micros = since.subsec_micros();
    let text = format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{micros:06}Z");
    buf.extend_from_slice(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn timestamps_are_utc_rfc3339_with_microseconds() {
        let cases = [
            (0, 0, "1970-01-01T00:00:00.000000Z"),
            (951_782_400, 5, "2000-02-29T00:00:00.000005Z"),
            (1_796_000_000, 123_456, "2026-11-30T00:53:20.123456Z"),
            (4_107_542_399, 999_999, "2100-02-28T23:59:59.999999Z"),
        ];
        for (secs, micros, want) in cases {
            let mut buf = Vec::new();
            let at = UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros);
            write_rfc3339_micros(&mut buf, at);
            assert_eq!(String::from_utf8_lossy(&buf), want, "{secs} s");
        }
    }

    #[test]
    fn a_line_is_one_json_object_with_escaped_fields_and_the_target_last() {
        let mut line = JsonLine::new("WARN", "egress.decision", "egress.decision");
        line.str("url", "evil\"host\n:1")
            .num("upstream_status", 403_u16)
            .num("duration_ms", 1.5_f64)
            .display("client", &"127.0.0.1:9");
        let bytes = line.finish();
        assert_eq!(bytes.last(), Some(&b'\n'), "a line ends with a newline");
        let text = String::from_utf8_lossy(&bytes);
        let json: serde_json::Value =
            serde_json::from_str(text.trim_end()).expect("the line must be one JSON object");
        assert_eq!(json["level"], "WARN");
        assert_eq!(
            json["url"], "evil\"host\n:1",
            "strings must round-trip escaped"
        );
        assert_eq!(json["upstream_status"], 403);
        assert_eq!(json["duration_ms"], 1.5);
        assert_eq!(json["client"], "127.0.0.1:9");
        assert!(
            text.trim_end().ends_with(r#""target":"egress.decision"}"#),
            "the target comes last, like the subscriber's lines: {text}"
        );
    }
}
