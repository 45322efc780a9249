//! JSON string contents written straight into a byte buffer, byte for byte as serde_json
//! escapes them, eight bytes at a time over the runs that need no escape: the response bodies
//! (`respond`, the vendor fronts, `check-url`) and the decision lines (`telemetry::line`) share
//! this one escaper.
//!
//! serde_json checks every byte against its escape table; a page of markdown or a URL is long
//! runs of plain text between a few newlines and quotes, so [`escape_into`] skips a word at a
//! time while no byte of it is below 0x20, `"` or `\`, and escapes the rest as serde_json does:
//! `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other control characters as `\u00xx` (lowercase hex).
//! Everything else, DEL, non-ASCII and U+2028/U+2029 included, is copied as it is.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Appends `s` as a JSON string literal (quotes included) to `out`.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    escape_into(out, s);
    out.push(b'"');
}

/// Appends the contents of `s` JSON-escaped, without quotes, to `out`.
pub(crate) fn escape_into(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(word) = bytes.get(i..i + 8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            if !needs_escape(u64::from_le_bytes(w)) {
                i += 8;
                continue;
            }
        }
        let b = bytes[i];
        if b < 0x20 || b == b'"' || b == b'\\' {
            out.extend_from_slice(&bytes[start..i]);
            push_escape(out, b);
            start = i + 1;
        }
        i += 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// Whether any byte of the little-endian word is below 0x20, `"` or `\` (exact, no misses).
fn needs_escape(w: u64) -> bool {
    let below_space = w.wrapping_sub(ONES * 0x20) & !w;
    let quote = w ^ (ONES * u64::from(b'"'));
    let backslash = w ^ (ONES * u64::from(b'\\'));
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v;
    (below_space | has_zero(quote) | has_zero(backslash)) & HIGHS != 0
}

fn push_escape(out: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match b {
        b'"' => out.extend_from_slice(b"\\\""),
        b'\\' => out.extend_from_slice(b"\\\\"),
        0x08 => out.extend_from_slice(b"\\b"),
        0x0c => out.extend_from_slice(b"\\f"),
        b'\n' => out.extend_from_slice(b"\\n"),
        b'\r' => out.extend_from_slice(b"\\r"),
        b'\t' => out.extend_from_slice(b"\\t"),
        _ => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(b >> 4)],
            HEX[usize::from(b & 0xf)],
        ]),
    }
}

#[cfg(test)]
mod tests;
