//! A hand-built JSON log line for the per-request hot path, in the same shape the tracing
//! subscriber writes (`timestamp`, `level`, `message`, the fields, `target`), queued straight
//! to the writer thread: formatting it costs a fraction of the generic JSON formatter.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::base::json_escape::{escape_into, write_str};

/// One JSON object under construction; fields keep their insertion order.
#[derive(Debug)]
pub(crate) struct JsonLine {
    buf: Vec<u8>,
    target: &'static str,
}

// === impl JsonLine ===

impl JsonLine {
    /// A line at `level` (`INFO`, `WARN`, …) for `target`, with `message`.
    #[cfg(test)]
    pub(crate) fn new(level: &str, target: &'static str, message: &str) -> Self {
        let mut line = Self::stamped(target);
        line.str("level", level);
        line.str("message", message);
        line
    }

    /// A line for `target` holding only its timestamp: the caller writes `level` and
    /// `message` next, as the tests' `new` does (or copies them, already encoded, with
    /// [`Self::encoded`]).
    pub(crate) fn stamped(target: &'static str) -> Self {
        let mut line = Self {
            buf: super::line_buffer(),
            target,
        };
        line.buf.extend_from_slice(b"{\"timestamp\":\"");
        write_rfc3339_micros(&mut line.buf, SystemTime::now());
        line.buf.extend_from_slice(b"\"");
        line
    }

    /// Fields alone, no timestamp and no braces: a part of a line that [`Self::encoded`] copies
    /// into others ([`Self::written`] reads it).
    pub(crate) fn fields_only() -> Self {
        Self {
            buf: Vec::new(),
            target: "",
        }
    }

    /// Fields already encoded as this type writes them (each `,"key":value`), copied as they
    /// are.
    pub(crate) fn encoded(&mut self, fields: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(fields);
        self
    }

    /// The bytes written so far (a line under construction, for a caller that keeps a part).
    pub(crate) fn written(&self) -> &[u8] {
        &self.buf
    }

    /// A string field, JSON-escaped.
    pub(crate) fn str(&mut self, key: &str, value: &str) -> &mut Self {
        self.key(key);
        write_str(&mut self.buf, value);
        self
    }

    /// A field from its `Display` form, JSON-escaped as it is formatted (no intermediate
    /// string).
    pub(crate) fn display(&mut self, key: &str, value: &dyn std::fmt::Display) -> &mut Self {
        use std::fmt::Write as _;
        self.key(key);
        self.buf.push(b'"');
        // Writing into a Vec cannot fail.
        let _ = write!(Escaper(&mut self.buf), "{value}");
        self.buf.push(b'"');
        self
    }

    /// A socket address field (`1.2.3.4:5`, `[::1]:5`), the hot-path form of `display`.
    pub(crate) fn socket(&mut self, key: &str, addr: &std::net::SocketAddr) -> &mut Self {
        let std::net::SocketAddr::V4(v4) = addr else {
            return self.display(key, addr);
        };
        self.key(key);
        self.buf.push(b'"');
        for (i, octet) in v4.ip().octets().iter().enumerate() {
            if i > 0 {
                self.buf.push(b'.');
            }
            push_decimal(&mut self.buf, u64::from(*octet));
        }
        self.buf.push(b':');
        push_decimal(&mut self.buf, u64::from(v4.port()));
        self.buf.push(b'"');
        self
    }

    /// A number field.
    pub(crate) fn num(&mut self, key: &str, value: impl serde::Serialize) -> &mut Self {
        self.key(key);
        let _ = serde_json::to_writer(&mut self.buf, &value);
        self
    }

    /// A `null` field.
    pub(crate) fn null(&mut self, key: &str) -> &mut Self {
        self.key(key);
        self.buf.extend_from_slice(b"null");
        self
    }

    /// An unsigned integer field, or `null`.
    pub(crate) fn uint(&mut self, key: &str, value: Option<u64>) -> &mut Self {
        match value {
            Some(v) => {
                self.key(key);
                push_decimal(&mut self.buf, v);
                self
            }
            None => self.null(key),
        }
    }

    /// Keys are the code's own field names, which never need an escape: copied as they are.
    fn key(&mut self, key: &str) {
        debug_assert!(
            !key.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\'),
            "a field name needing an escape: {key}"
        );
        self.buf.extend_from_slice(b",\"");
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\":");
    }

    /// The finished line, `target` last and a newline, as the subscriber writes it.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        let target = self.target;
        self.str("target", target);
        self.buf.extend_from_slice(b"}\n");
        self.buf
    }
}

/// `YYYY-MM-DDTHH:MM:` of the minute a thread last stamped a line in, kept so the lines of one
/// minute do not convert the date again.
struct MinuteStamp {
    minute: u64,
    text: [u8; 17],
}

thread_local! {
    static MINUTE: std::cell::Cell<Option<MinuteStamp>> = const { std::cell::Cell::new(None) };
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` (UTC), the subscriber's timestamp form.
fn write_rfc3339_micros(buf: &mut Vec<u8>, now: SystemTime) {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let minute = secs / 60;
    let stamp = match MINUTE.try_with(std::cell::Cell::take).ok().flatten() {
        Some(kept) if kept.minute == minute => kept,
        _ => MinuteStamp {
            minute,
            text: minute_text(minute),
        },
    };
    buf.extend_from_slice(&stamp.text);
    let _ = MINUTE.try_with(|cell| cell.set(Some(stamp)));
    push_padded(buf, secs % 60, 2);
    buf.push(b'.');
    push_padded(buf, u64::from(since.subsec_micros()), 6);
    buf.push(b'Z');
}

/// `YYYY-MM-DDTHH:MM:` of the minute `minute` minutes after the epoch.
fn minute_text(minute: u64) -> [u8; 17] {
    let (days, rem) = (minute / 1_440, minute % 1_440);
    let (y, m, d) = crate::report::time::civil_from_days(i64::try_from(days).unwrap_or(0));
    let fields = [
        (u64::try_from(y).unwrap_or(0), 4, b'-'),
        (u64::try_from(m).unwrap_or(0), 2, b'-'),
        (u64::try_from(d).unwrap_or(0), 2, b'T'),
        (rem / 60, 2, b':'),
        (rem % 60, 2, b':'),
    ];
    let mut buf = Vec::with_capacity(17);
    for (value, width, sep) in fields {
        push_padded(&mut buf, value, width);
        buf.push(sep);
    }
    let mut text = [b'0'; 17];
    // Years past 9999 would not fit; the subscriber's form has four digits too.
    let n = buf.len().min(17);
    text[..n].copy_from_slice(&buf[..n]);
    text
}

/// `value` in decimal, zero-padded to `width` digits.
fn push_padded(buf: &mut Vec<u8>, value: u64, width: usize) {
    let mut digits = itoa::Buffer::new();
    let text = digits.format(value).as_bytes();
    buf.extend(std::iter::repeat_n(b'0', width.saturating_sub(text.len())));
    buf.extend_from_slice(text);
}

fn push_decimal(buf: &mut Vec<u8>, value: u64) {
    push_padded(buf, value, 0);
}

/// A `fmt::Write` that JSON-escapes into a byte buffer.
struct Escaper<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Escaper<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        escape_into(self.0, s);
        Ok(())
    }
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
            // The same minute again (the kept date), the next second, the next minute and day.
            (1_796_000_000, 7, "2026-11-30T00:53:20.000007Z"),
            (1_796_000_039, 0, "2026-11-30T00:53:59.000000Z"),
            (1_796_000_040, 1, "2026-11-30T00:54:00.000001Z"),
            (1_796_000_040 + 86_400, 2, "2026-12-01T00:54:00.000002Z"),
            (1_796_000_000, 3, "2026-11-30T00:53:20.000003Z"),
        ];
        for (secs, micros, want) in cases {
            let mut buf = Vec::new();
            let at = UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros);
            write_rfc3339_micros(&mut buf, at);
            assert_eq!(String::from_utf8_lossy(&buf), want, "{secs} s");
        }
    }

    #[test]
    fn escaping_and_addresses_match_serde_json_and_display() {
        let mut text: String = (0u8..0x80).map(char::from).collect();
        text.push_str("é ☃ 𝄞 \u{2028}");
        let mut buf = Vec::new();
        escape_into(&mut buf, &text);
        let want = serde_json::to_string(&text).expect("serialize");
        assert_eq!(
            format!("\"{}\"", String::from_utf8_lossy(&buf)),
            want,
            "the same escapes as serde_json"
        );
        for addr in [
            "127.0.0.1:9",
            "10.200.3.255:65535",
            "0.0.0.0:0",
            "[::1]:443",
            "[fe80::1]:80",
        ] {
            let addr: std::net::SocketAddr = addr.parse().expect("test address");
            let mut line = JsonLine::new("INFO", "t", "m");
            line.socket("a", &addr);
            let bytes = line.finish();
            let json: serde_json::Value =
                serde_json::from_slice(&bytes).expect("the line must be JSON");
            assert_eq!(json["a"], addr.to_string(), "{addr}");
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
